"""The virtual clock's lockstep with a closed-loop client (`--clock virtual`).

In a closed loop the client sends a new request as soon as one finishes; on a busy machine
that takes it milliseconds of wall time, which the emulated engine would count as idle slots
and fewer requests in flight. So the bench client says, on each request, which run it belongs
to, how many requests it keeps in flight and how many the run sends in all
(`X-Simhost-Lockstep: RUN BURST TOTAL`). A closed loop keeps min(BURST, TOTAL - finished)
requests in flight, so once `finished` of the run's requests have ended the server knows that
min(finished + BURST, TOTAL) must have arrived, whichever of them ended first; the engine loop
holds its virtual clock until they have (at most `GRACE_S` of wall time, then it goes on).
Pure state; standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

LOCKSTEP_HEADER = "X-Simhost-Lockstep"
GRACE_S = 2.0  # wall seconds the clock waits for a promised request before going on without


@dataclass(frozen=True)
class Promise:
    run: str
    burst: int
    total: int


def parse_promise(value: Optional[str]) -> Optional[Promise]:
    """The header's promise, or None when absent or malformed (then the request just runs)."""
    parts = (value or "").split()
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    burst, total = int(parts[1]), int(parts[2])
    if burst < 1 or total < 1:
        return None
    return Promise(run=parts[0], burst=burst, total=total)


def promise_header(run: str, burst: int, total: int) -> str:
    return "{} {} {}".format(run, burst, total)


class Lockstep:
    """The current run's arrivals and ends, and how many arrivals the closed loop owes."""

    def __init__(self) -> None:
        self._run: Optional[str] = None
        self._burst = 0
        self._total = 0
        self._arrived = 0
        self._finished = 0

    def arrived(self, promise: Optional[Promise]) -> None:
        if promise is None:
            return
        if promise.run != self._run:
            self._run, self._burst, self._total = promise.run, promise.burst, promise.total
            self._arrived = self._finished = 0
        self._arrived += 1

    def finished(self, promise: Optional[Promise]) -> None:
        if promise is not None and promise.run == self._run:
            self._finished += 1

    def owed(self) -> int:
        if self._run is None:
            return 0
        expected = min(self._finished + self._burst, self._total)
        return max(0, expected - self._arrived)

    def waiting(self) -> bool:
        return self.owed() > 0

    def give_up(self) -> None:
        """A promised request never came (the client went away): stop waiting for it."""
        self._arrived += self.owed()
