"""What changed between two versions of a gate spec, field by field, named by dotted path
(`clauses[0].at_least_pct: 29 -> 25`): the engineer's form, kept in the audit trail and the
API. Pure: two spec documents in, a list of changes out; gates/specs/words.py writes each change
in the clause's own terms for the pages and alerts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ABSENT = object()
# The version number always differs between versions; it is not a change of the bar.
IGNORED = frozenset({"version"})


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "before": None if self.before is ABSENT else self.before,
            "after": None if self.after is ABSENT else self.after,
            "before_text": "(absent)" if self.before is ABSENT else show(self.before),
            "after_text": "(absent)" if self.after is ABSENT else show(self.after),
            "text": str(self),
        }

    def __str__(self) -> str:
        if self.before is ABSENT:
            return f"{self.field}: added {show(self.after)}"
        if self.after is ABSENT:
            return f"{self.field}: removed (was {show(self.before)})"
        return f"{self.field}: {show(self.before)} -> {show(self.after)}"


def spec_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[FieldChange]:
    """Every leaf that differs, named by its path: `expect.free_disk_min_gib`, `tiers`."""
    changes: list[FieldChange] = []
    _walk("", before, after, changes)
    return changes


def show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def _walk(path: str, before: Any, after: Any, out: list[FieldChange]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            if not path and key in IGNORED:
                continue
            child = f"{path}.{key}" if path else str(key)
            _walk(child, before.get(key, ABSENT), after.get(key, ABSENT), out)
        return
    if _list_of_objects(before) and _list_of_objects(after):
        for index in range(max(len(before), len(after))):
            _walk(
                f"{path}[{index}]",
                before[index] if index < len(before) else ABSENT,
                after[index] if index < len(after) else ABSENT,
                out,
            )
        return
    if before is ABSENT or after is ABSENT or not _same(before, after):
        out.append(FieldChange(path or "(document)", before, after))


def _list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(item, dict) for item in value)


def _same(a: Any, b: Any) -> bool:
    # 1 and 1.0 are the same bar; true and 1 are not.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and bool(a == b)
    return bool(a == b)
