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


_WORDS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "vllm": "vLLM",
    "cuda": "CUDA",
    "rocm": "ROCm",
    "gib": "GiB",
    "mib": "MiB",
    "sha256": "SHA-256",
    "os": "OS",
    "cpu": "CPU",
}


def fact_label(name: object) -> str:
    """A stored field name as words: "gpu_names" is "GPU names", "host_memory_bytes" "host
    memory" (the unit goes with the value)."""
    words = str(name).removesuffix("_bytes").split("_")
    text = " ".join(_WORDS.get(word, word) for word in words)
    return text[:1].upper() + text[1:]


def fact(value: object, name: object = "") -> str:
    """A stored fact for a person: bytes in GiB/TiB, yes/no, a list once per distinct item
    with its count ("8 x NVIDIA H100 80GB HBM3"), never Python's repr."""
    if str(name).endswith("_bytes") and figures.finite(value) is not None:
        return figures.byte_size(value)
    if str(name).endswith("_gib") and figures.finite(value) is not None:
        return figures.gib(value)
    if isinstance(value, (list, tuple)):
        shown_items = [fact(item) for item in value]
        distinct = list(dict.fromkeys(shown_items))
        counted = [
            f"{shown_items.count(item)} x {item}" if shown_items.count(item) > 1 else item
            for item in distinct
        ]
        return ", ".join(counted) or DASH
    if isinstance(value, dict):
        return "; ".join(f"{fact_label(k)}: {fact(v, k)}" for k, v in value.items()) or DASH
    return shown(value)
