"""The limits untrusted JSON keeps before anything parses deeper or stores it: nesting depth,
checked on the text itself (no recursion, so 100,000 brackets cost a scan, not the stack), and
strings PostgreSQL can store (no U+0000, no lone surrogate).

Pure: used by the API's JSON parser and by readers of uploaded files alike.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

# Gate specs nest about five levels and tool outputs about eight; 64 is far above both and
# far below where json or jsonb recursion becomes a risk.
MAX_DEPTH = 64
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# Strings go whole (a bracket inside one does not count), then runs of anything else, then
# the quote of a string left open (invalid JSON, which json.loads refuses afterwards).
_NOT_A_BRACKET = re.compile(rf'{_STRING}|[^\[\]{{}}"]+|"')
_PATH_TOKEN = re.compile(rf"({_STRING})\s*(:)?|[\[\]{{}},]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_PATH_PARTS_SHOWN = 8

Path = tuple[str | int, ...]


class JsonLimitError(ValueError):
    """JSON that breaks a limit; `path` names where (`a.b[2]`, "" for the whole document)."""

    def __init__(self, problem: str, path: Path = ()):
        self.path = format_path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Refuse `text` when any value in it nests deeper than `limit` arrays and objects."""
    if text.count("[") + text.count("{") <= limit:
        return
    brackets = _NOT_A_BRACKET.sub("", text)
    depth = accumulate(1 if char in "[{" else -1 for char in brackets)
    if max(depth, default=0) > limit:
        raise JsonLimitError(f"nested deeper than {limit} levels", _path_at_depth(text, limit))


def check_storable(value: Any) -> None:
    """Refuse a value holding a string (key or value) with U+0000 or a lone surrogate half."""
    for path, problem in storable_problems(value):
        raise JsonLimitError(problem, path)


def storable_problems(value: Any) -> list[tuple[Path, str]]:
    """Where `value` holds a string (key or value) PostgreSQL cannot store, and why."""
    problems: list[tuple[Path, str]] = []
    stack: list[tuple[Path, Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problems += _text_problems(item, path)
        if not isinstance(item, (dict, list)):
            continue
        children = item.items() if isinstance(item, dict) else enumerate(item)
        nested = []
        for key, child in children:
            if isinstance(key, str):
                problems += _text_problems(key, (*path, key), what="key")
            if isinstance(child, str):
                problems += _text_problems(child, (*path, key))
            elif isinstance(child, (dict, list)):
                nested.append(((*path, key), child))
        stack += reversed(nested)
    return problems


def load(text: str, limit: int = MAX_DEPTH) -> Any:
    """One JSON document within the limits; NaN and Infinity are refused (JSON has neither)."""
    check_depth(text, limit)
    value = json.loads(text, parse_constant=_refuse_constant)
    check_storable(value)
    return value


def format_path(path: Path) -> str:
    """`a.b[2].c` for ("a", "b", 2, "c"); long paths are cut (a deep one is 64 parts)."""
    shown = "".join(
        f"[{part}]" if isinstance(part, int) else f".{_printable(part)}"
        for part in path[:_PATH_PARTS_SHOWN]
    )
    return shown.lstrip(".") + ("..." if len(path) > _PATH_PARTS_SHOWN else "")


def _printable(key: str) -> str:
    # The offending key itself may be in the path: its bad characters are shown escaped, or
    # the error message could not be encoded either.
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", key)


def _text_problems(text: str, path: Path, what: str = "string") -> list[tuple[Path, str]]:
    found = _UNSTORABLE.search(text)
    if found is None:
        return []
    if found.group() == "\x00":
        return [(path, f"the {what} holds the NUL character U+0000")]
    return [(path, f"the {what} holds a lone surrogate U+{ord(found.group()):04X}")]


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _path_at_depth(text: str, limit: int) -> Path:
    """Where the first container beyond `limit` opens, as keys and indexes (error path only:
    this scan is slower than the depth count, and stops at that container)."""
    path: list[str | int | None] = []
    for match in _PATH_TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            if len(path) >= limit:
                break
            path.append(0 if token == "[" else None)
        elif token in ("]", "}"):
            path = path[:-1]
        elif token == ",":
            if path and isinstance(path[-1], int):
                path[-1] += 1
        elif match.group(2) and path:
            path[-1] = _key(match.group(1))
    return tuple(part for part in path if part is not None)


def _key(quoted: str) -> str:
    try:
        key: str = json.loads(quoted)  # a quoted JSON string decodes to text
        return key
    except ValueError:
        return quoted.strip('"')
