"""Windows onto a run's bounded log, for the live log box and the API. Pure: no Django.

The log keeps only its newest characters; `written` counts every character ever appended, so
an offset is a position in everything written and stays valid after the front is cut.
"""

from __future__ import annotations

from dataclasses import dataclass

TAIL_CHARS = 16 * 1024  # what a page first shows and the run's API entry carries
CHUNK_CHARS = 64 * 1024  # the most one `?after=` poll returns


@dataclass(frozen=True)
class LogWindow:
    text: str
    offset: int  # where `text` starts, in characters ever written
    next: int  # the offset to ask for next (`?after=next`)
    skipped: bool  # text before `offset` exists (or existed) that this window leaves out

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "offset": self.offset,
            "next": self.next,
            "skipped": self.skipped,
        }


def log_tail(log: str, written: int, *, limit: int = TAIL_CHARS) -> LogWindow:
    """The newest whole lines of the log, at most `limit` characters."""
    first = written - len(log)  # offset of log[0]
    begin = max(first, written - limit)
    text = log[begin - first :]
    if begin > 0 and log[begin - first - 1 : begin - first] != "\n":
        text = _from_next_line(text)
    return LogWindow(text, written - len(text), written, skipped=written > len(text))


def log_after(log: str, written: int, after: int, *, limit: int = CHUNK_CHARS) -> LogWindow:
    """What was written from offset `after` on, at most `limit` characters, oldest first.
    Text already cut from the front is skipped up to the next line, so a window never starts
    mid-line; a chunk the limit cuts ends at its last line end."""
    first = written - len(log)
    after = min(max(after, 0), written)
    begin = max(after, first)
    text = log[begin - first :]
    skipped = begin > after
    if skipped and log[begin - first - 1 : begin - first] != "\n":
        text = _from_next_line(text)
        begin = written - len(text)
    if len(text) > limit:
        chunk = text[:limit]
        text = chunk[: chunk.rfind("\n") + 1] or chunk
    return LogWindow(text, begin, begin + len(text), skipped)


def _from_next_line(text: str) -> str:
    newline = text.find("\n")
    return text[newline + 1 :] if newline >= 0 else ""
