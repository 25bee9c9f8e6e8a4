"""Sessions and turns where a trace names them (Bailian's parent chains, Mooncake's optional
`session_id`, ShareGPT conversations). Memory grows with sessions, not requests. Pure."""

from __future__ import annotations

from collections import Counter
from typing import Any

from runners.traces.histograms import count_summary


class SessionProfile:
    def __init__(self) -> None:
        self.requests_of: Counter[str] = Counter()

    def add(self, session: str | None) -> None:
        if session is not None:
            self.requests_of[session] += 1

    def to_dict(self) -> dict[str, Any] | None:
        if not self.requests_of:
            return None
        requests = sum(self.requests_of.values())
        multi_turn = sum(n for n in self.requests_of.values() if n > 1)
        return {
            "sessions": len(self.requests_of),
            "requests_with_session": requests,
            "multi_turn_request_share": multi_turn / requests,
            "requests_per_session": count_summary(Counter(self.requests_of.values())),
        }
