"""The within-repetition step check of G3 (statistics.outliers.step_level): a bench whose
per-request TTFTs, in the order the requests were sent, shift level part-way through (the server
got slower half-way through a bench) marks its repetition as disturbed, like the outlier screen.

The statistic: the first `concurrency` requests are skipped (they all start at once and queue
behind each other, a ramp every bench has); the rest are cut into blocks of `concurrency`
requests (a closed loop turns its batch over once per block, so block means carry little of the
queue's autocorrelation); T is the largest centred cumulative sum of the block means of
log-TTFT, in units of sqrt(blocks) x their sd from successive differences (which a level shift
barely moves). T is scale and location free, but its law still depends on the queue's regime,
so its limit is the largest quantile over a stated grid of simulated closed-loop benches (one
FIFO prefill server, `concurrency` clients; loads 0.5-8 and prefill CVs 5 % and 30 %), seeded,
at the conservative end of its Monte Carlo error. `stepped_gates` simulates what a mid-bench step
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

MIN_BLOCKS = 6  # fewer blocks give a scale estimate too noisy to find a step with
NULL_PATHS = 1 << 14  # simulated benches per regime of the grid
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


def block_statistic(log_values: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(T, blocks before the split) per series of the last axis; the ramp already removed."""
    blocks = log_values.shape[-1] // block
    kept = log_values[..., log_values.shape[-1] - blocks * block :]
    means = kept.reshape(*kept.shape[:-1], blocks, block).mean(axis=-1)
    cumulative = np.cumsum(means - means.mean(axis=-1, keepdims=True), axis=-1)[..., :-1]
    # Successive differences: a single level shift adds one large term among blocks - 1.
    scale = np.sqrt((np.diff(means, axis=-1) ** 2).sum(axis=-1) / (2 * (blocks - 1)))
    statistic = np.abs(cumulative).max(axis=-1) / np.maximum(scale * math.sqrt(blocks), 1e-300)
    return statistic, np.abs(cumulative).argmax(axis=-1) + 1


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


def step_limit(blocks: int, concurrency: int, tail: float) -> float:
    """The limit T exceeds with probability at most `tail` in every regime of the grid."""
    return _grid_quantile(blocks, concurrency, round(tail, 12))


@lru_cache(maxsize=128)
def _grid_quantile(blocks: int, concurrency: int, tail: float) -> float:
    rng = np.random.default_rng(2611 + 97 * blocks + concurrency)
    requests = concurrency * (blocks + 1)
    # The conservative end: the order statistic three binomial sds beyond the nominal one.
    expected = tail * NULL_PATHS
    index = NULL_PATHS - 1 - max(0, int(expected - 3 * math.sqrt(expected)))
    found = [np.sort(_iid_statistics(rng, blocks))[index]]
    for load, sd in NULL_REGIMES:
        ttfts = closed_loop_ttfts(rng, NULL_PATHS, requests, concurrency, load=load, prefill_sd=sd)
        statistic, _ = block_statistic(np.log(ttfts[:, concurrency:]), concurrency)
        found.append(np.sort(statistic)[index])
    return float(max(found))


def _iid_statistics(rng: np.random.Generator, blocks: int) -> np.ndarray:
    return block_statistic(rng.standard_normal((NULL_PATHS, blocks)), 1)[0]


def find_step(ttfts: Sequence[float | None], concurrency: int, tail: float) -> Step | None:
    """The step in one bench's TTFTs (send order; None for a failed request), if T exceeds its
    limit at `tail`; ValueError when the bench has too few requests to test."""
    kept = [(i, float(v)) for i, v in enumerate(ttfts) if v is not None and v > 0]
    too_few = _too_few(len(kept), concurrency)
    if too_few:
        raise ValueError(too_few)
    block = max(1, concurrency)
    blocks = (len(kept) - block) // block
    order = np.array([i for i, _ in kept])
    logs = np.log(np.array([v for _, v in kept]))[len(kept) - blocks * block :]
    statistic, split = block_statistic(logs, block)
    limit = step_limit(blocks, block, tail)
    if float(statistic) <= limit:
        return None
    cut = int(split) * block
    change = math.expm1(float(logs[cut:].mean() - logs[:cut].mean()))
    at = int(order[len(kept) - blocks * block + cut]) + 1
    return Step(change, at, len(ttfts), float(statistic), limit)


@dataclass(frozen=True)
class SteppedGates:
    """What a mid-bench step does to one cell at its bar, with and without the check."""

    gates: int
    false_pass_unchecked: float
    false_pass_checked: float
    stepped_flagged: float  # share of the stepped benches the check flags
    undisturbed_flagged: float  # share of the same benches, undisturbed, it flags
    tail: float  # the bench's share of the level (what undisturbed_flagged should stay under)


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
    mid-bench (favourable: a slower baseline lowers the ratio). With the check, a flagged
    repetition is replaced by an undisturbed one, as the re-run does. The same benches without
    the step (common random numbers) give the check's false flags."""
    reps = plan.max_repetitions
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
    tail = level / benches_per_repetition
    blocks = (requests - tier) // tier
    limit = step_limit(blocks, tier, tail)
    flagged = {
        slower: block_statistic(np.log(ttfts[:, requests - blocks * tier :]), tier)[0] > limit
        for slower, ttfts in benches.items()
    }
    shift = np.log(np.median(benches[slower_by], axis=1) / np.median(benches[0.0], axis=1))
    disturbed = rng.integers(0, plan.min_repetitions, gates)
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
    )


# A bench: (arm, tier, repetition, its TTFTs in send order or None where its file has none).
Bench = tuple[str, int, int, Sequence[float | None] | None]


def step_checks(benches: Sequence[Bench], level: float) -> tuple[list[ValidityCheck], list[str]]:
    """One failed `step` check per bench with a step, the level split over the benches of each
    repetition (so a repetition is flagged at most `level` of the time), and a note per arm and
    tier whose benches could not be tested, with why."""
    testable: dict[int, list[Bench]] = {}
    skipped: dict[tuple[str, int, str], list[int]] = {}
    for bench in benches:
        arm, tier, repetition, ttfts = bench
        why = _untestable(ttfts, tier)
        if why:
            skipped.setdefault((arm, tier, why), []).append(repetition)
        else:
            testable.setdefault(repetition, []).append(bench)
    found = [
        check
        for group in testable.values()
        for bench in group
        if (check := _bench_check(bench, level, len(group))) is not None
    ]
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
    return _too_few(sum(1 for value in ttfts if value is not None and value > 0), tier)


def _too_few(timed: int, concurrency: int) -> str | None:
    """Why `timed` requests at `concurrency` are too few to test, or None."""
    block = max(1, concurrency)
    blocks = (timed - block) // block
    if blocks >= MIN_BLOCKS:
        return None
    return (
        f"{timed} timed requests at concurrency {concurrency} give {max(blocks, 0)} blocks "
        f"after the first wave; the check needs {MIN_BLOCKS}"
    )


def _bench_check(bench: Bench, level: float, tested: int) -> ValidityCheck | None:
    arm, tier, repetition, ttfts = bench
    step = find_step(ttfts or [], tier, level / tested)
    if step is None:
        return None
    return {
        "check": "step",
        "arm": arm,
        "tier": tier,
        "repetition": repetition,
        "observed": step.statistic,
        "limit": step.limit,
        "ok": False,
        "reason": f"{arm} at tier {tier}, repetition {repetition}: step of "
        f"{step.change * 100:+.0f} % in TTFT at request {step.at_request} of {step.requests} "
        f"(statistic {step.statistic:.2f} over its limit {step.limit:.2f} at level {level:g} "
        "per repetition)",
    }
