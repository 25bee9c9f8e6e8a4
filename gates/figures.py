"""How every number reads wherever a person sees it: the pages, the chart labels, the PDF and the
alert text all call these, so one value never reads two ways. Pure: plain values in, text out.

Rules: four significant figures, trailing zeros after the point dropped (never before it:
180.5 is "180.5", 640 is "640"); thousands grouped with commas; a unit after a space, except a
ratio's "x" which is attached ("1.234x"). An estimate and its interval are written to the same
number of decimals, so rounding can never put the shown estimate outside the shown interval.
"""

from __future__ import annotations

import math
from typing import Any

DASH = "—"  # shown where a value does not exist, instead of "None"
DIGITS = 4  # significant figures
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def finite(value: Any) -> float | None:
    """The value as a float when it is a real, finite number; else None (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def decimals(value: float, digits: int = DIGITS) -> int:
    """How many decimals `digits` significant figures of `value` take (0 for whole numbers)."""
    if value == 0 or float(value).is_integer():
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    return max(digits - 1 - magnitude, 0)


def fixed(value: float, places: int, *, strip: bool = True) -> str:
    """`value` to `places` decimals, grouped; with `strip`, trailing zeros after the point
    dropped (never those before it)."""
    text = f"{value:,.{places}f}"
    if strip and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def with_unit(text: str, unit: str = "") -> str:
    unit = unit.strip()
    if not unit or text == DASH:
        return text
    return f"{text}x" if unit == "x" else f"{text} {unit}"


def number(value: Any, unit: str = "", digits: int = DIGITS) -> str:
    """One number as a person reads it: "180.5 %", "8", "1.234x", "12,345 tokens/s"; a dash when
    there is none."""
    found = finite(value)
    if found is None:
        return DASH if value is None or value == "" else str(value)
    return with_unit(fixed(found, decimals(found, digits)), unit)


def estimate_interval(estimate: Any, low: Any, high: Any, unit: str = "") -> tuple[str, str, str]:
    """An estimate and its interval's ends, written to one shared number of decimals (the
    finest any of them needs, zeros kept so they line up), each with its unit."""
    values = [finite(value) for value in (estimate, low, high)]
    places = max((decimals(value) for value in values if value is not None), default=0)
    shown = [
        DASH if value is None else with_unit(fixed(value, places, strip=False), unit)
        for value in values
    ]
    return shown[0], shown[1], shown[2]


def interval(low: Any, high: Any, unit: str = "") -> str:
    """ "1.21x to 1.38x"; a dash when neither end exists."""
    if finite(low) is None and finite(high) is None:
        return DASH
    _, shown_low, shown_high = estimate_interval(None, low, high, unit)
    return f"{shown_low} to {shown_high}"


def share(fraction: Any) -> str:
    """A fraction of one as a percentage: 0.125 is "12.5 %"."""
    found = finite(fraction)
    return DASH if found is None else number(found * 100, "%")


def change(fraction: Any) -> str:
    """A relative change as a signed percentage: -0.687 is "-68.7 %", 0.008 is "+0.8 %"."""
    found = finite(fraction)
    if found is None:
        return DASH
    return ("+" if found > 0 else "") + share(found)


def byte_size(count: Any) -> str:
    """A byte count in binary units: 2199023255552 is "2 TiB", 85899345920 is "80 GiB"."""
    found = finite(count)
    if found is None:
        return DASH
    size, unit = found, _BYTE_UNITS[0]
    for unit in _BYTE_UNITS:
        if abs(size) < 1024 or unit == _BYTE_UNITS[-1]:
            break
        size /= 1024
    return number(size, unit, 3)


def gib(value: Any) -> str:
    """A size already in GiB, in the unit a person would pick: 2048 GiB is "2 TiB"."""
    found = finite(value)
    return DASH if found is None else byte_size(found * 1024**3)


def seconds(value: Any) -> str:
    """A short time span: "850 ms", "42 s", "3 min 5 s", "2 h 14 min"."""
    found = finite(value)
    if found is None or found < 0:
        return DASH
    if found < 1:
        return f"{found * 1000:.0f} ms"
    if found < 60:
        return f"{found:.0f} s" if found >= 10 else f"{found:.1f} s"
    minutes, rest = divmod(round(found), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def count(value: Any, noun: str, plural: str | None = None) -> str:
    """ "1 GPU", "8 GPUs", "1,024 requests"."""
    found = finite(value)
    if found is None:
        return f"{DASH} {plural or noun + 's'}"
    word = noun if found == 1 else (plural or noun + "s")
    return f"{number(found)} {word}"
