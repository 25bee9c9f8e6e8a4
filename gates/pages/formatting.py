"""How numbers, durations and times read on the pages. Pure: plain values in, text out."""

from __future__ import annotations

import re
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


_GPU = re.compile(r"\bGPU (\d+)\b")


def said_once(text: str) -> str:
    """A reason that repeats one sentence per GPU ("GPU 0: X; GPU 1: X; ...") said once, with
    the GPUs it holds for: "GPUs 0-7: X". Other sentences are kept in order, each once."""
    parts = [part.strip() for part in re.split(r"\n|; ", text or "") if part.strip()]
    groups: dict[str, list[int]] = {}
    for part in parts:
        gpus = [int(n) for n in _GPU.findall(part)]
        key = _GPU.sub("GPU #", part)
        groups.setdefault(key, []).extend(gpus[:1])
    return "; ".join(_one(key, gpus) for key, gpus in groups.items())


def _one(sentence: str, gpus: list[int]) -> str:
    if len(gpus) <= 1:
        return sentence.replace("GPU #", f"GPU {gpus[0]}" if gpus else "GPU", 1)
    ordered = sorted(set(gpus))
    run = ordered == list(range(ordered[0], ordered[-1] + 1))
    which = f"{ordered[0]}-{ordered[-1]}" if run else ", ".join(map(str, ordered))
    return sentence.replace("GPU #", f"GPUs {which}", 1)
