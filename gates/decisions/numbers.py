"""Numbers read from untrusted JSON (measurements, facts, decision results): what counts as a
number, its finite float value, and a spec metric's value in one normalized run.
Pure: shared by the decision engine and the chart builders; imports no Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gates.specs.schema import METRICS


def is_number(value: Any) -> bool:
    """A JSON number: an int or a float, never a bool (True is an int to Python)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_float(value: Any) -> float | None:
    """`value` as a float when it is a finite number, otherwise None."""
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return number if math.isfinite(number) else None


def metric_value(metrics: Mapping[str, Any], name: str) -> Any:
    """The raw value of metric `name` in one normalized run (None when the run lacks it)."""
    key, stat, _ = METRICS[name]
    value = metrics.get(key)
    if stat is None:
        return value
    return value.get(stat) if isinstance(value, Mapping) else None
