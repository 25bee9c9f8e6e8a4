"""How numbers, durations and times read on the pages. Pure: plain values in, text out."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from gates import figures

DASH = figures.DASH


def number(value: object) -> str:
    """A number as gates.figures writes it everywhere (pages, charts, PDF)."""
    return figures.number(value)


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
    return figures.seconds(seconds)


def moment(value: datetime | None) -> str:
    """A time with its zone, in the site's zone: "2026-12-01 12:56:10 UTC"."""
    if value is None:
        return DASH
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or ''}".strip()
