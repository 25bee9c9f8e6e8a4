"""Fault knobs of `simhost serve`: what to break, when, and by how much.

Pure logic: parsing a fault file's text, merging with flags, and the decisions the server asks
for (is it time to crash? how slow is a step now?). No I/O; standard library only.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, fields, replace
from typing import Any, Dict, Optional

SECONDS_PER_HOUR = 3600.0
MIB = 1 << 20
CRASH_EXIT_STATUS = 70


class FaultConfigError(ValueError):
    """A fault file or flag value that cannot be used; the message names the field."""


@dataclass(frozen=True)
class FaultConfig:
    """Every knob is off by default. Rates are per hour of the `clock` ("wall" or "emulated")."""

    crash_after_requests: Optional[int] = None
    crash_after_seconds: Optional[float] = None
    error_rate: float = 0.0
    latency_drift_pct_per_hour: float = 0.0
    memory_growth_mib_per_hour: float = 0.0
    hang_after_requests: Optional[int] = None
    hang_after_seconds: Optional[float] = None
    wrong_output_rate: float = 0.0
    clock: str = "wall"
    seed: int = 0

    def elapsed_hours(self, wall_seconds: float, time_scale: float) -> float:
        """Hours on the fault clock after `wall_seconds` of wall time."""
        seconds = wall_seconds if self.clock == "wall" else wall_seconds / time_scale
        return seconds / SECONDS_PER_HOUR

    def drift_factor(self, hours: float) -> float:
        """Multiplier on every engine step: +pct per hour, never below zero."""
        return max(0.0, 1.0 + self.latency_drift_pct_per_hour / 100.0 * hours)

    def leaked_bytes(self, hours: float) -> int:
        return int(self.memory_growth_mib_per_hour * hours * MIB)

    def should_crash(self, finished_requests: int, wall_seconds: float) -> bool:
        by_count = self.crash_after_requests is not None and (
            finished_requests >= self.crash_after_requests
        )
        by_time = self.crash_after_seconds is not None and wall_seconds >= self.crash_after_seconds
        return by_count or by_time

    def should_hang(self, answered_requests: int, wall_seconds: float) -> bool:
        # Counted on answers, as the crash is: a request already taken in is answered, so the
        # N-th answer is always written before the hang, whatever the periodic check's timing.
        by_count = self.hang_after_requests is not None and (
            answered_requests >= self.hang_after_requests
        )
        by_time = self.hang_after_seconds is not None and wall_seconds >= self.hang_after_seconds
        return by_count or by_time

    def any_active(self) -> bool:
        return self != FaultConfig(clock=self.clock, seed=self.seed)


class FaultDice:
    """Seeded draws, so a fault run can be replayed request for request."""

    def __init__(self, config: FaultConfig) -> None:
        self._config = config
        self._rng = random.Random(config.seed)  # noqa: S311 - replayable faults

    def fail_this_request(self) -> bool:
        return self._config.error_rate > 0 and self._rng.random() < self._config.error_rate

    def corrupt_this_output(self, prompt_fingerprint: int) -> bool:
        """Stable per prompt: the same prompt is corrupted on every try."""
        rate = self._config.wrong_output_rate
        draw = random.Random(prompt_fingerprint ^ self._config.seed).random()  # noqa: S311
        return rate > 0 and draw < rate


_INT_FIELDS = {"crash_after_requests", "hang_after_requests", "seed"}
_FRACTION_FIELDS = {"error_rate", "wrong_output_rate"}
_OPTIONAL_FIELDS = {
    "crash_after_requests",
    "crash_after_seconds",
    "hang_after_requests",
    "hang_after_seconds",
}
_SIGNED_FIELDS = {"latency_drift_pct_per_hour", "memory_growth_mib_per_hour"}


def _check_value(name: str, value: Any) -> Any:
    if name == "clock":
        if value not in ("wall", "emulated"):
            raise FaultConfigError("{}: must be 'wall' or 'emulated', got {!r}".format(name, value))
        return value
    if value is None and name in _OPTIONAL_FIELDS:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FaultConfigError("{}: must be a number, got {!r}".format(name, value))
    if name in _INT_FIELDS and value != int(value):
        raise FaultConfigError("{}: must be a whole number, got {!r}".format(name, value))
    if value < 0 and name not in _SIGNED_FIELDS:
        raise FaultConfigError("{}: must not be negative, got {!r}".format(name, value))
    if name in _FRACTION_FIELDS and value > 1:
        raise FaultConfigError("{}: must be a fraction from 0 to 1, got {!r}".format(name, value))
    return int(value) if name in _INT_FIELDS else float(value)


def parse_fault_text(text: str, source: str) -> Dict[str, Any]:
    """The knobs set in a fault JSON file; unknown keys and bad values name the field."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise FaultConfigError("{}: not valid JSON ({})".format(source, error)) from None
    if not isinstance(data, dict):
        raise FaultConfigError("{}: must hold a JSON object".format(source))
    known = {f.name for f in fields(FaultConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise FaultConfigError("{}: unknown fault field {}".format(source, unknown[0]))
    return {name: _check_value(name, value) for name, value in data.items()}


def build_fault_config(from_file: Dict[str, Any], from_flags: Dict[str, Any]) -> FaultConfig:
    """Flags override the file; both are validated field by field."""
    merged = dict(from_file)
    merged.update({k: v for k, v in from_flags.items() if v is not None})
    checked = {name: _check_value(name, value) for name, value in merged.items()}
    return replace(FaultConfig(), **checked)
