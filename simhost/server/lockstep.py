"""The virtual clock's lockstep with a closed-loop client (`--clock virtual`).

In a closed loop the client sends a new request as soon as one finishes; on a busy machine
that takes it milliseconds of wall time, which the emulated engine would count as idle slots
and fewer requests in flight. So the bench client says, on each request, which run it belongs
to, how many requests the run starts with, and whether another request will follow this one's
end (`X-Simhost-Lockstep: RUN BURST FOLLOWS`); the engine loop holds its virtual clock while
requests it was promised are still on their way (at most `GRACE_S` of wall time each).
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
    follows: bool


def parse_promise(value: Optional[str]) -> Optional[Promise]:
    """The header's promise, or None when absent or malformed (then the request just runs)."""
    parts = (value or "").split()
    if len(parts) != 3 or not parts[1].isdigit() or parts[2] not in ("0", "1"):
        return None
    return Promise(run=parts[0], burst=int(parts[1]), follows=parts[2] == "1")


def promise_header(run: str, burst: int, follows: bool) -> str:
    return "{} {} {}".format(run, burst, 1 if follows else 0)


class Lockstep:
    """How many promised requests have not arrived yet (negative: some came early)."""

    def __init__(self) -> None:
        self.owed = 0
        self._run: Optional[str] = None

    def arrived(self, promise: Optional[Promise]) -> None:
        if promise is None:
            return
        if promise.run != self._run:
            self._run, self.owed = promise.run, promise.burst
        self.owed -= 1

    def finished(self, promise: Optional[Promise]) -> None:
        if promise is not None and promise.follows:
            self.owed += 1

    def waiting(self) -> bool:
        return self.owed > 0

    def give_up(self) -> None:
        """A promised request never came (the client went away): stop waiting for it."""
        self.owed = 0
