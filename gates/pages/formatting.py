"""How numbers, durations and times read on the pages. Pure: plain values in, text out."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

DASH = "—"  # shown where a value does not exist, instead of "None"


def number(value: object, digits: int = 3) -> str:
    """A number as a person reads it: whole numbers without decimals ("8", not "8.000"),
    others to `digits` significant figures, no trailing zeros; not a number: a dash."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return DASH if value in (None, "") else str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}".replace(",", "\u202f")
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def share(fraction: object) -> str:
    """A probability or share (0.86) as a percent: "86 %", one decimal under 10 % ("2.5 %")."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        return DASH
    if not math.isfinite(fraction):
        return DASH
    percent = 100 * fraction
    return f"{percent:.0f} %" if abs(percent) >= 10 else f"{percent:.1f} %"


def shown(value: object) -> str:
    """Any decided value: numbers as `number` writes them, lists joined, None a dash."""
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(item) for item in value) or DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{key} {shown(item)}" for key, item in value.items()) or DASH
    return number(value)


def duration(seconds: float | timedelta | None) -> str:
    """ "850 ms", "42 s", "3 min 5 s", "2 h 14 min"."""
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    if seconds is None or seconds < 0:
        return DASH
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def moment(value: datetime | None) -> str:
    """A time with its zone, in the site's zone: "2026-12-01 12:56:10 UTC"."""
    if value is None:
        return DASH
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or ''}".strip()
