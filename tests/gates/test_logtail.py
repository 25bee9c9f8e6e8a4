"""Windows onto a run's bounded log: whole lines, offsets that survive the front being cut."""

from __future__ import annotations

from gates.logtail import log_after, log_tail

LINES = "".join(f"line {n:03d}\n" for n in range(100))  # 9 characters a line


def test_a_short_log_is_its_own_tail():
    window = log_tail("a\nb\n", 4)
    assert (window.text, window.offset, window.next, window.skipped) == ("a\nb\n", 0, 4, False)


def test_a_long_log_tail_starts_at_a_line_boundary_within_the_limit():
    window = log_tail(LINES, len(LINES), limit=40)
    assert window.text == "line 096\nline 097\nline 098\nline 099\n"
    assert window.skipped and window.next == len(LINES)
    assert LINES[window.offset :] == window.text


def test_the_tail_of_a_cut_log_drops_the_partial_first_line():
    kept = LINES[-22:]  # the log keeps its newest characters only, from mid-line
    window = log_tail(kept, len(LINES))
    assert window.text == "line 098\nline 099\n" and window.offset == len(LINES) - 18


def test_polling_after_the_last_offset_returns_only_what_was_appended():
    first = log_tail(LINES, len(LINES))
    grown = LINES + "line 100\n"
    window = log_after(grown, len(grown), first.next)
    assert (window.text, window.offset, window.skipped) == ("line 100\n", len(LINES), False)
    assert log_after(grown, len(grown), window.next).text == ""


def test_an_offset_already_cut_from_the_log_resumes_at_the_next_whole_line():
    written = len(LINES)
    kept = LINES[-22:]
    window = log_after(kept, written, 5)
    assert window.skipped and window.text == "line 098\nline 099\n"
    assert window.offset == written - 18


def test_a_chunk_cut_by_the_limit_ends_at_a_line_end_and_the_next_poll_goes_on():
    window = log_after(LINES, len(LINES), 0, limit=40)
    assert window.text == LINES[:36] and window.next == 36
    following = log_after(LINES, len(LINES), window.next, limit=40)
    assert following.text.startswith("line 004\n")


def test_an_offset_past_the_end_is_held_at_the_end():
    window = log_after("a\n", 2, 99)
    assert (window.text, window.offset, window.next) == ("", 2, 2)
