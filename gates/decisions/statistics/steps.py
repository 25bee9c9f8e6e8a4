"""The within-repetition step check of G3 (statistics.outliers.step_level): a bench whose
per-request TTFTs, in the order the requests were sent, shift level part-way through (the server
got slower half-way through a bench) marks its repetition as disturbed, like the outlier screen.

The statistic: the first `tier` requests are skipped (they all start at once and queue behind
each other, a ramp every bench has); over the rest, in send order, S is the largest deviation of
the cumulative sum of log-TTFT from its straight line (the usual CUSUM over every split point),
divided by sqrt(requests). S scales with the bench's long-run noise, which a queue's
autocorrelation sets and no single bench estimates well; so a bench is judged by R, its S over
the median S of the same arm and tier's benches (the repetitions of one arm at one tier run the
same queue): R is scale free and calibrates itself on the run's own benches. R's law under no
step still depends a little on the queue's regime and on how many benches the median is over, so
its limit is the largest quantile over a stated grid of simulated closed-loop benches (one FIFO
prefill server, `tier` clients; loads 0.5-8 and prefill CVs 5 % and 30 %, plus independent
normal requests), seeded, at the conservative end of its Monte Carlo error, memoised per
(requests, tier) and (benches, tail). A bench is tested when its arm and tier have at least
MIN_REPETITIONS tested benches with at least MIN_REQUESTS timed requests after the first wave;
the others are named as not tested, with why. `stepped_gates` simulates what a mid-bench step
does to one cell's false pass with and without the check (bench/decision_error_rates.py and the
tests share it). Pure: numpy only, imports no Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from documents.cell import ValidityCheck
from gates.decisions.statistics.inference import PASS, SequentialPlan, clause_margins, decide_cells

MIN_REPETITIONS = 6  # fewer benches give a median too noisy to scale a bench by
MIN_REQUESTS = 16  # timed requests after the first wave: fewer leave no room for a step
NULL_PATHS = 1 << 15  # simulated benches per regime of the grid
# (load: the clients' demand on the prefill server, c x prefill / (prefill + decode);
#  the prefill time's log sd): unsaturated, at capacity and saturated queues.
NULL_REGIMES = tuple((load, sd) for load in (0.5, 1.0, 2.0, 4.0, 8.0) for sd in (0.05, 0.3))


@dataclass(frozen=True)
class Step:
    """A level shift found in one bench: its size (exp of the log-level change, minus one), the
    request (1-based, in send order, failed ones counted) from which it holds, and the test."""

    change: float
    at_request: int
    requests: int
    statistic: float
    limit: float


def cusum_statistic(log_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, values before the split) per series of the last axis; the ramp already removed."""
    count = log_values.shape[-1]
    centred = log_values - log_values.mean(axis=-1, keepdims=True)
    deviation = np.abs(np.cumsum(centred, axis=-1)[..., :-1])
    return deviation.max(axis=-1) / math.sqrt(count), deviation.argmax(axis=-1) + 1


def relative_statistics(statistics: np.ndarray) -> np.ndarray:
    """R: each bench's S over the median S of its group (the last axis: one arm and tier)."""
    median = np.median(statistics, axis=-1, keepdims=True)
    ratios: np.ndarray = statistics / np.maximum(median, 1e-300)
    return ratios


def closed_loop_ttfts(
    rng: np.random.Generator,
    paths: int,
    requests: int,
    concurrency: int,
    *,
    load: float,
    prefill_sd: float,
    slower_from: int | None = None,
    slower_by: float = 0.0,
) -> np.ndarray:
    """(paths, requests) TTFTs in send order of a closed-loop bench: `concurrency` clients, one
    FIFO prefill server (lognormal prefill, mean 1), then a decode; from request `slower_from`
    (0-based) on, prefill and decode take `1 + slower_by` times as long."""
    decode = max(concurrency / load - 1.0, 0.0)
    free = np.zeros((paths, concurrency))
    server = np.zeros(paths)
    rows = np.arange(paths)
    out = np.empty((paths, requests))
    for index in range(requests):
        client = free.argmin(axis=1)
        start = free[rows, client]
        slower = 1.0 + (slower_by if slower_from is not None and index >= slower_from else 0.0)
        prefill = slower * np.exp(rng.normal(-(prefill_sd**2) / 2, prefill_sd, paths))
        server = np.maximum(start, server) + prefill
        out[:, index] = server - start
        free[rows, client] = server + slower * decode * np.exp(rng.normal(0.0, 0.1, paths))
    return out


def step_limit(requests: int, tier: int, benches: int, tail: float) -> float:
    """The limit R exceeds with probability at most `tail` in every regime of the grid, for a
    bench of `requests` timed requests after the first wave at `tier`, scaled by the median of
    `benches` alike (itself among them)."""
    return _grid_quantile(requests, tier, benches, round(tail, 12))


@lru_cache(maxsize=256)
def _grid_quantile(requests: int, tier: int, benches: int, tail: float) -> float:
    found = []
    for statistics in null_statistics(requests, tier):
        groups = statistics[: statistics.size // benches * benches].reshape(-1, benches)
        ratios = np.sort(relative_statistics(groups).ravel())
        # The conservative end: the order statistic three binomial sds beyond the nominal one.
        expected = tail * ratios.size
        found.append(ratios[ratios.size - 1 - max(0, int(expected - 3 * math.sqrt(expected)))])
    return float(max(found))


@lru_cache(maxsize=32)
def null_statistics(requests: int, tier: int) -> tuple[np.ndarray, ...]:
    """S of NULL_PATHS undisturbed benches per regime of the grid (independent normal requests
    first), `requests` timed after a first wave of `tier`; seeded, so a limit is reproducible."""
    rng = np.random.default_rng(2611 + 97 * requests + tier)
    found = [cusum_statistic(rng.standard_normal((NULL_PATHS, requests)))[0]]
    for load, sd in NULL_REGIMES:
        ttfts = closed_loop_ttfts(rng, NULL_PATHS, tier + requests, tier, load=load, prefill_sd=sd)
        found.append(cusum_statistic(np.log(ttfts[:, tier:]))[0])
    return tuple(found)


def timed_logs(ttfts: Sequence[float | None], tier: int) -> tuple[np.ndarray, np.ndarray]:
    """(send-order index, log-TTFT) of a bench's timed requests after its first `tier`."""
    kept = [(index, float(v)) for index, v in enumerate(ttfts) if v is not None and v > 0]
    kept = kept[max(1, tier) :]
    return np.array([i for i, _ in kept], dtype=int), np.log(np.array([v for _, v in kept]))


def find_steps(
    group: Sequence[Sequence[float | None]], tier: int, tails: Sequence[float]
) -> list[Step | None]:
    """Per bench of one arm and tier (its TTFTs in send order, None for a failed request; every
    bench testable, at least MIN_REPETITIONS of them), its step if R exceeds its limit at its
    own tail, else None; ValueError, with why, when the group cannot be tested."""
    if len(group) < MIN_REPETITIONS:
        raise ValueError(f"{len(group)} benches; the check needs {MIN_REPETITIONS}")
    series = [timed_logs(ttfts, tier) for ttfts in group]
    found = [cusum_statistic(logs) for _, logs in series]
    statistics = np.array([float(statistic) for statistic, _ in found])
    if not np.median(statistics) > 0:
        # Constant TTFTs (a stub server, a clock too coarse): no noise to scale a step by.
        raise ValueError(
            "the TTFTs of half or more of its benches do not vary after the first wave; "
            "there is no noise to scale a step by"
        )
    relative = relative_statistics(statistics)
    requests = int(np.median([logs.size for _, logs in series]))
    steps: list[Step | None] = []
    for ttfts, (order, logs), (_, split), ratio, tail in zip(
        group, series, found, relative, tails, strict=True
    ):
        limit = step_limit(requests, tier, len(group), tail)
        if float(ratio) <= limit:
            steps.append(None)
            continue
        cut = int(split)
        change = math.expm1(float(logs[cut:].mean() - logs[:cut].mean()))
        steps.append(Step(change, int(order[cut]) + 1, len(ttfts), float(ratio), limit))
    return steps


@dataclass(frozen=True)
class SteppedGates:
    """What a mid-bench step does to one cell at its bar, with and without the check."""

    gates: int
    false_pass_unchecked: float
    false_pass_checked: float
    stepped_flagged: float  # share of the stepped benches the check flags
    undisturbed_flagged: float  # share of the same benches, undisturbed, it flags
    tail: float  # the bench's share of the level (what undisturbed_flagged should stay under)
    limit: float  # the limit on R at the first look


def stepped_gates(
    rng: np.random.Generator,
    gates: int,
    plan: SequentialPlan,
    sd_log_ratio: float,
    *,
    sd_floor: float,
    level: float,
    benches_per_repetition: int,
    requests: int,
    tier: int,
    load: float,
    prefill_sd: float,
    slower_by: float,
) -> SteppedGates:
    """One attempt of `plan` on a "reduction >= 25 %" cell at its bar at this noise; in every
    gate one of the first look's repetitions has its baseline bench `slower_by` slower from
    mid-bench (favourable: a slower baseline lowers the ratio). The check runs at the first look,
    the stepped bench scaled by the median over the look's baseline benches at that tier; a
    flagged repetition is replaced by an undisturbed one, as the re-run does. The same benches
    without the step (common random numbers) give the check's false flags."""
    reps, first = plan.max_repetitions, plan.min_repetitions
    logs = math.log(0.75) + rng.normal(0.0, sd_log_ratio, (gates, reps))
    seed = int(rng.integers(1 << 30))
    benches = {
        slower: closed_loop_ttfts(
            np.random.default_rng(seed),
            gates,
            requests,
            tier,
            load=load,
            prefill_sd=prefill_sd,
            slower_from=requests // 2,
            slower_by=slower,
        )
        for slower in (0.0, slower_by)
    }
    others = closed_loop_ttfts(
        rng, gates * (first - 1), requests, tier, load=load, prefill_sd=prefill_sd
    )
    other_statistics = cusum_statistic(np.log(others[:, tier:]))[0].reshape(gates, first - 1)
    tail = level / benches_per_repetition
    limit = step_limit(requests - tier, tier, first, tail)
    flagged = {}
    for slower, ttfts in benches.items():
        own = cusum_statistic(np.log(ttfts[:, tier:]))[0]
        group = np.column_stack([own, other_statistics])
        flagged[slower] = relative_statistics(group)[:, 0] > limit
    shift = np.log(np.median(benches[slower_by], axis=1) / np.median(benches[0.0], axis=1))
    disturbed = rng.integers(0, first, gates)
    passed = {}
    for checked, kept in ((False, shift), (True, np.where(flagged[slower_by], 0.0, shift))):
        moved = logs.copy()
        moved[np.arange(gates), disturbed] -= kept
        margins = clause_margins(moved, "reduction", 0.75)[:, None, :]
        verdict = decide_cells(margins, plan, sd_floor=sd_floor).verdict[:, 0]
        passed[checked] = float((verdict == PASS).mean())
    return SteppedGates(
        gates,
        passed[False],
        passed[True],
        float(flagged[slower_by].mean()),
        float(flagged[0.0].mean()),
        tail,
        limit,
    )


# A bench: (arm, tier, repetition, its TTFTs in send order or None where its file has none).
Bench = tuple[str, int, int, Sequence[float | None] | None]


def step_checks(benches: Sequence[Bench], level: float) -> tuple[list[ValidityCheck], list[str]]:
    """One failed `step` check per bench with a step, the level split over the tested benches of
    each repetition (so a repetition is flagged at most `level` of the time), and a note per arm
    and tier whose benches could not be tested, with why."""
    groups: dict[tuple[str, int], list[Bench]] = {}
    skipped: dict[tuple[str, int, str], list[int]] = {}
    for bench in benches:
        arm, tier, repetition, ttfts = bench
        why = _untestable(ttfts, tier)
        if why:
            skipped.setdefault((arm, tier, why), []).append(repetition)
        else:
            groups.setdefault((arm, tier), []).append(bench)
    tested: dict[tuple[str, int], list[Bench]] = {}
    for (arm, tier), group in groups.items():
        if len(group) >= MIN_REPETITIONS:
            tested[arm, tier] = group
        else:
            why = (
                f"{len(group)} repetition(s) with enough per-request TTFTs at this arm and "
                f"tier; the check needs {MIN_REPETITIONS} to scale a bench by their median"
            )
            skipped[arm, tier, why] = [repetition for _, _, repetition, _ in group]
    per_repetition: dict[int, int] = {}
    for group in tested.values():
        for _, _, repetition, _ in group:
            per_repetition[repetition] = per_repetition.get(repetition, 0) + 1
    found: list[ValidityCheck] = []
    for (arm, tier), group in tested.items():
        try:
            found += _group_checks(group, level, per_repetition)
        except ValueError as flat:
            skipped[arm, tier, str(flat)] = [repetition for _, _, repetition, _ in group]
    found.sort(key=lambda check: check["repetition"] or 0)
    return found, _skipped_notes(skipped)


def _skipped_notes(skipped: dict[tuple[str, int, str], list[int]]) -> list[str]:
    """One note per reason and set of repetitions: arms and tiers named together when the
    reason holds for every arm at every tier named (a bench tool that keeps no per-request
    TTFTs is one line, not one per arm and tier), else one note per arm and tier."""
    grouped: dict[tuple[str, tuple[int, ...]], list[tuple[str, int]]] = {}
    for (arm, tier, why), repetitions in skipped.items():
        grouped.setdefault((why, tuple(sorted(repetitions))), []).append((arm, tier))
    notes = []
    for (why, reps), pairs in grouped.items():
        arms = list(dict.fromkeys(arm for arm, _ in pairs))
        tiers = sorted({tier for _, tier in pairs})
        every = len(pairs) == len(arms) * len(tiers)
        places = [(_words(arms), tiers)] if every else [(arm, [tier]) for arm, tier in pairs]
        for arm_words, place_tiers in places:
            tier_words = "tier" + ("s " if len(place_tiers) > 1 else " ") + _words(place_tiers)
            notes.append(
                f"step check skipped for {arm_words} at {tier_words}, repetition(s) "
                f"{_runs(reps)}: {why}"
            )
    return notes


def _words(items: Sequence[object]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    names = [str(item) for item in items]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _runs(numbers: Sequence[int]) -> str:
    """'1, 2' for two; '1-8' for three or more in a row: '1-3, 5'."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][-1] + 1:
            spans[-1].append(number)
        else:
            spans.append([number])
    return ", ".join(
        f"{span[0]}-{span[-1]}" if len(span) >= 3 else ", ".join(map(str, span)) for span in spans
    )


def _untestable(ttfts: Sequence[float | None] | None, tier: int) -> str | None:
    if ttfts is None:
        return "its bench file has no per-request TTFTs"
    timed = sum(1 for value in ttfts if value is not None and value > 0)
    if timed - max(1, tier) >= MIN_REQUESTS:
        return None
    return (
        f"{timed} timed requests at concurrency {tier} leave {max(timed - max(1, tier), 0)} "
        f"after the first wave; the check needs {MIN_REQUESTS}"
    )


def _group_checks(
    group: list[Bench], level: float, per_repetition: dict[int, int]
) -> list[ValidityCheck]:
    """The failed checks of one arm and tier's benches."""
    tier = group[0][1]
    tails = [level / per_repetition[repetition] for _, _, repetition, _ in group]
    steps = find_steps([ttfts or [] for _, _, _, ttfts in group], tier, tails)
    return [
        {
            "check": "step",
            "arm": arm,
            "tier": tier,
            "repetition": repetition,
            "observed": step.statistic,
            "limit": step.limit,
            "ok": False,
            "reason": f"{arm} at tier {tier}, repetition {repetition}: step of "
            f"{step.change * 100:+.0f} % in TTFT at request {step.at_request} of {step.requests} "
            f"(its CUSUM {step.statistic:.2f}x the median of the {len(group)} benches of this "
            f"arm and tier, over its limit {step.limit:.2f} at level {level:g} per repetition)",
        }
        for (arm, _, repetition, _), step in zip(group, steps, strict=True)
        if step is not None
    ]
