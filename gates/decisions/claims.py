"""A vendor's claim checked against the published reports it cites: the numbers of the sentence
(percent reductions and gains, ratios such as 8.6-20x, concurrency tiers such as c=4/8/16) read
out, each compared with the matching clause's estimate and interval.

A number is supported when it is inside or below what was measured (its largest value is no
more than the interval's top), at every tier it names; the claim is supported when every number
is, partly when some are, not when none is. Pure: strings and dicts in, dataclasses out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Written as typeset in articles too: the minus sign, the en dash of a range, the times sign.
MINUS, EN_DASH, TIMES = "\u2212", "\u2013", "\u00d7"
NUMBER = rf"[+\-{MINUS}]?\d+(?:\.\d+)?"
RANGE = rf"\s*(?:-|{EN_DASH}|to|\.\.)\s*"
PERCENT = re.compile(rf"(?P<a>{NUMBER})(?:{RANGE}(?P<b>{NUMBER}))?\s*%")
RATIO = re.compile(rf"(?P<a>{NUMBER})(?:{RANGE}(?P<b>{NUMBER}))?\s*[x{TIMES}](?![a-z])", re.I)
TIERS = re.compile(r"\bc\s*=\s*(?P<tiers>\d+(?:\s*/\s*\d+)*)", re.I)
METRICS = (
    (re.compile(r"\bttft\b(?:\s*(?P<p>p\d+|mean|median))?", re.I), "ttft"),
    (re.compile(r"\b(?:output\s+)?throughput\b", re.I), "output_throughput"),
    (re.compile(r"\btpot\b(?:\s*(?P<p>p\d+|mean|median))?", re.I), "tpot"),
    (re.compile(r"\be2el?\b(?:\s*(?P<p>p\d+|mean|median))?", re.I), "e2el"),
)
SUPPORTED, PARTLY, NOT_SUPPORTED = "supported", "partly", "not supported"


@dataclass(frozen=True)
class ClaimedNumber:
    text: str  # as written: "26-32 %"
    change: str  # reduction | gain | ratio
    metric: str | None  # "ttft_p50", "output_throughput"; None when the sentence names none
    low: float
    high: float
    tiers: tuple[int, ...]  # empty: every tier measured


@dataclass(frozen=True)
class NumberCheck:
    number: ClaimedNumber
    supported: bool
    reason: str


@dataclass(frozen=True)
class ClaimCheck:
    status: str
    numbers: tuple[NumberCheck, ...]
    reason: str


def parse_claim(sentence: str) -> list[ClaimedNumber]:
    """The numbers a sentence claims, in order, each with its metric and tiers."""
    found = []
    for match, change in _number_matches(sentence):
        a, b = _value(match["a"]), _value(match["b"]) if match["b"] else _value(match["a"])
        if change != "ratio":
            change = _direction(sentence, match.start(), a, b)
            a, b = abs(a), abs(b)
        found.append(
            ClaimedNumber(
                text=match.group(0).strip(),
                change=change,
                metric=_metric_before(sentence, match.start()),
                low=min(a, b),
                high=max(a, b),
                tiers=_tiers_after(sentence, match.end()),
            )
        )
    return found


def check_claim(sentence: str, reports: Iterable[Mapping[str, Any]]) -> ClaimCheck:
    """The claim's status against every clause of the cited reports (`{"id", "clauses"}`)."""
    clauses = [(str(r.get("id")), c) for r in reports for c in r.get("clauses") or []]
    numbers = parse_claim(sentence)
    if not numbers:
        return ClaimCheck(NOT_SUPPORTED, (), "the claim has no number to check")
    if not clauses:
        return ClaimCheck(NOT_SUPPORTED, (), "the claim cites no published report")
    checks = tuple(check_number(number, clauses) for number in numbers)
    held = sum(check.supported for check in checks)
    status = SUPPORTED if held == len(checks) else PARTLY if held else NOT_SUPPORTED
    return ClaimCheck(status, checks, f"{held} of {len(checks)} number(s) supported")


def check_number(
    number: ClaimedNumber, clauses: list[tuple[str, Mapping[str, Any]]]
) -> NumberCheck:
    matching = [(r, c) for r, c in clauses if _same_quantity(number, c)]
    if not matching:
        what = f"{number.metric or 'a metric'} {number.change}"
        return NumberCheck(number, False, f"{number.text}: no published clause measured {what}")
    tiers = number.tiers or tuple(sorted({int(c["tier"]) for _, c in matching if c.get("tier")}))
    reasons, held = [], True
    for tier in tiers or (None,):
        ok, reason = _at_tier(number, tier, matching)
        held &= ok
        reasons.append(reason)
    return NumberCheck(number, held, f"{number.text}: " + "; ".join(reasons))


def _at_tier(
    number: ClaimedNumber, tier: int | None, matching: list[tuple[str, Mapping[str, Any]]]
) -> tuple[bool, str]:
    at = [(r, c) for r, c in matching if tier is None or c.get("tier") in (tier, str(tier))]
    where = f"c={tier}" if tier is not None else "all tiers"
    if not at:
        return False, f"{where}: not measured in the cited reports"
    report, clause = max(at, key=lambda rc: _top(rc[1]))
    top = _top(clause)
    unit = "x" if number.change == "ratio" else " %"
    measured = f"measured {_fmt(clause.get('estimate'))}{unit} [{_fmt(clause.get('low'))}, "
    measured += f"{_fmt(clause.get('high'))}] in report {report}"
    if number.high <= top:
        return True, f"{where}: within or below what was {measured}"
    return False, f"{where}: {_fmt(number.high)}{unit} is above what was {measured}"


def _same_quantity(number: ClaimedNumber, clause: Mapping[str, Any]) -> bool:
    if clause.get("change") != number.change or clause.get("high") is None:
        return False
    metric = str(clause.get("metric") or "")
    if number.metric is None:
        return True
    return metric == number.metric or metric.startswith(number.metric + "_")


def _top(clause: Mapping[str, Any]) -> float:
    return float(clause.get("high") or 0.0)


def _number_matches(sentence: str) -> list[tuple[re.Match[str], str]]:
    percents = [(m, "percent") for m in PERCENT.finditer(sentence)]
    ratios = [(m, "ratio") for m in RATIO.finditer(sentence)]
    return sorted(percents + ratios, key=lambda pair: pair[0].start())


def _direction(sentence: str, at: int, a: float, b: float) -> str:
    """Reduction or gain: the sign as written, else the words before the number."""
    if a < 0 or b < 0:
        return "reduction"
    before = sentence[max(0, at - 60) : at].lower()
    words = {"reduction": ("reduc", "lower", "faster", "less", "cut", "drop"), "gain": ()}
    last = max((before.rfind(w), "reduction") for w in words["reduction"])
    gain = max(before.rfind(w) for w in ("gain", "higher", "more", "increase", "throughput"))
    return "reduction" if last[0] > gain else "gain"


def _segment_start(sentence: str, at: int) -> int:
    """Where the number's part of the sentence begins: after the last comma or semicolon, so
    "..., 8.6-20x against recompute" takes neither the metric nor the tiers of the part before."""
    return max(sentence.rfind(",", 0, at), sentence.rfind(";", 0, at)) + 1


def _metric_before(sentence: str, at: int) -> str | None:
    best: tuple[int, str] | None = None
    start = _segment_start(sentence, at)
    for pattern, name in METRICS:
        for match in pattern.finditer(sentence[start:at]):
            percentile = (match.groupdict().get("p") or "").lower()
            if name != "output_throughput":
                name_full = f"{name}_{'p50' if percentile in ('', 'median') else percentile}"
            else:
                name_full = name
            if best is None or match.start() > best[0]:
                best = (match.start(), name_full)
    return best[1] if best else None


def _tiers_after(sentence: str, at: int) -> tuple[int, ...]:
    """The first `c=...` after the number, unless another number comes before it; else the
    nearest one before the number (a sentence that names its tiers first)."""
    following = TIERS.search(sentence, at)
    next_number = min(
        (m.start() for m, _ in _number_matches(sentence) if m.start() >= at), default=None
    )
    if following and (next_number is None or following.start() < next_number):
        return _tier_list(following["tiers"])
    before = list(TIERS.finditer(sentence[_segment_start(sentence, at) : at]))
    return _tier_list(before[-1]["tiers"]) if before else ()


def _tier_list(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in re.split(r"\s*/\s*", text.strip()))


def _value(text: str) -> float:
    return float(text.replace(MINUS, "-"))


def _fmt(value: object) -> str:
    return f"{float(value):.3g}" if isinstance(value, (int, float)) else "?"
