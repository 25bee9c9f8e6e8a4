"""What the engine predicts for a trace replay: each arm's TTFT p50 at a concurrency tier, as a
band, and the TTFT change of each statistic a G3 clause may judge (p50, p90, p99, mean), from
the replay's own requests (their send times, lengths and prefix blocks) run through
the engine simhost serves them with (simhost.engine.batching over simhost.engine.perf).

The replay is modelled as its client sends it (simhost.bench.replay, `vllm bench serve`'s timed
trace): open loop at the planned send times, at most `concurrency` requests in flight (one whose
time comes while the tier is full leaves when a slot frees, and its TTFT counts from then),
the unmeasured warm-up sent but left out of the p50. Pure; standard library only (Python 3.9).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from simhost.engine.batching import Engine, EngineConfig, EngineRequest
from simhost.engine.predict import ARMS, arm_config
from simhost.engine.presets import ModelPreset

# The model runs the first requests only: seconds per run instead of minutes on a long trace.
MAX_REQUESTS = 1000
# The model's own uncertainty, each run one point of it: the share of the host links the
# offload connector reaches (as gates.planner.speed), and how late the client sends each
# request, uniform in [0, SEND_JITTER_S) per seeded run: the replay's fidelity bar lets the
# arrival error's p99 reach 10 ms, which moves queueing and batching at a busy tier.
LINK_EFFICIENCIES = (0.5, 1.0)
JITTER_SEEDS = (1, 2)
SEND_JITTER_S = 0.010
# ... and when the server starts a request's clock that comes while a step runs: vLLM at its
# send, simhost's virtual clock at the step's start (simhost.server.runtime: a later arrival
# would let the engine schedule it before it came). Both, so the band holds either server.
CLOCKS_FROM_STEP_START = (False, True)
# The TTFT changes the G3 clauses judge, offload over each baseline arm (offload statistic /
# baseline statistic): a clause's reduction is 1 - ratio, its gain ratio - 1.
CHANGES = (("offload", "resident"), ("offload", "recompute"))
# The statistics of the measured requests' TTFTs a clause may name (ttft_<statistic>), each a
# percentile rank or None for the mean: read as the replay-records adapter reads a measured
# replay (runners.adapters.replay_records: nearest rank, numpy's inverted_cdf), so a predicted
# p99 is the same order statistic of the same requests as the measured one.
STATISTICS: Dict[str, Optional[int]] = {"p50": 50, "p90": 90, "p99": 99, "mean": None}

# One run of an arm: (link efficiency, jitter seed, clock from the step's start) -> seconds.
RunKey = Tuple[float, int, bool]


@dataclass(frozen=True)
class ReplayedRequest:
    """One kept request of the replay: when it is sent (None: at once), its prompt length, the
    keys of its trace blocks (each standing for itself and every block before it; None: a
    load-shape trace, nothing shared), its output length and whether it is measured."""

    send_at_s: Optional[float]
    prompt_tokens: int
    block_keys: Optional[Tuple[int, ...]]
    output_tokens: int
    measured: bool = True


@dataclass(frozen=True)
class ArmBand:
    """One arm's predicted TTFT p50 (seconds), lowest and highest over the runs."""

    low_s: float
    high_s: float
    runs: int


@dataclass(frozen=True)
class ChangeBand:
    """The predicted ratio of one arm's TTFT p50 over another's, lowest and highest over the
    paired runs (each run of the first arm over the run of the second with its seed and clock)."""

    low: float
    high: float
    runs: int


@dataclass(frozen=True)
class ReplayTtftPrediction:
    concurrency: int
    arms: Dict[str, ArmBand]
    modelled_requests: int
    kept_requests: int
    refused_requests: int  # of the modelled: longer than the server's context, refused (400)
    # statistic -> "offload/resident" -> band, every statistic from the same runs
    statistic_changes: Dict[str, Dict[str, ChangeBand]] = field(default_factory=dict)

    @property
    def capped(self) -> bool:
        return self.modelled_requests < self.kept_requests

    @property
    def changes(self) -> Dict[str, ChangeBand]:
        """The TTFT p50 change bands (the ones a context has carried since before the others)."""
        return self.statistic_changes.get("p50", {})


def engine_hashes(
    request: ReplayedRequest, trace_block_tokens: Optional[int], block_size: int, salt: int
) -> List[int]:
    """The prompt's full engine blocks as prefix-cache keys: engine block i holds the same token
    ids in every request whose trace block under its last token has the same key, at the same
    offset (the replay gives each key one fixed run of ids, the last block cut short)."""
    full = request.prompt_tokens // block_size
    if not request.block_keys or not trace_block_tokens:
        return [hash(("request", salt, index)) for index in range(full)]
    hashes = []
    for index in range(full):
        last = ((index + 1) * block_size - 1) // trace_block_tokens
        if last >= len(request.block_keys):
            break  # past the blocks the trace names: the replay's prompt ends there too
        offset = index * block_size - last * trace_block_tokens  # negative: spans two blocks
        hashes.append(hash((request.block_keys[last], offset)))
    return hashes


def replay_ttfts(
    config: EngineConfig,
    requests: Sequence[ReplayedRequest],
    concurrency: int,
    trace_block_tokens: Optional[int],
    jitter: Optional[random.Random] = None,
    from_step_start: bool = False,
) -> List[float]:
    """One run of the replay through a fresh engine: the measured requests' TTFTs (s), in the
    order their first tokens came. `from_step_start`: a request sent while a step runs is
    clocked from that step's start."""
    engine = Engine(config)
    sends = [_send_time(request, jitter) for request in requests]
    order = sorted(range(len(requests)), key=lambda index: (sends[index], index))
    pending: Deque[int] = deque(order)
    slots = [0.0] * concurrency  # when each slot of the tier is free (a min-heap)
    first: Dict[str, float] = {}
    measured: Dict[str, ReplayedRequest] = {}
    ttfts: List[float] = []
    now = step_start = 0.0  # the step that ran last began at step_start, ended at now
    while pending or engine.has_work():
        while pending and sends[pending[0]] <= now and slots:
            index = pending.popleft()
            sent = max(sends[index], heapq.heappop(slots))
            if from_step_start and step_start < sent < now:
                sent = step_start
            request = requests[index]
            built = _engine_request(request, index, config.block_size, trace_block_tokens, sent)
            engine.add(built)
            if request.measured:
                measured[built.req_id] = request
        if not engine.has_work():
            now = step_start = sends[pending[0]]  # idle until the next send
            continue
        result = engine.step(now)
        if result.idle and result.duration == 0:
            raise RuntimeError("engine stalled")
        # waiting for KV loads is no step: a request sent meanwhile is clocked from its send
        step_start = now + result.duration if result.idle else now
        now += result.duration
        for built in result.emitted:
            if built.req_id not in first:
                first[built.req_id] = now
                if built.req_id in measured:
                    ttfts.append(now - built.arrival)
        for _ in result.finished:
            heapq.heappush(slots, now)
    return ttfts


def _send_time(request: ReplayedRequest, jitter: Optional[random.Random]) -> float:
    late = jitter.uniform(0.0, SEND_JITTER_S) if jitter is not None else 0.0
    return (request.send_at_s or 0.0) + late


def _engine_request(
    request: ReplayedRequest,
    index: int,
    block_size: int,
    trace_block_tokens: Optional[int],
    sent: float,
) -> EngineRequest:
    return EngineRequest(
        req_id="replay-{}".format(index),
        prompt_hashes=engine_hashes(request, trace_block_tokens, block_size, index),
        prompt_len=request.prompt_tokens,
        max_tokens=max(1, request.output_tokens),
        salt=hash(("replay", index)),
        arrival=sent,
    )


def ttft_statistics(ttfts: Sequence[float]) -> Dict[str, float]:
    """Each of STATISTICS over one run's TTFTs: a percentile as the nearest rank (the smallest
    value with at least that share of the values at or below it), the mean as the mean."""
    if not ttfts:
        raise ValueError("the replay measures no request")
    ordered = sorted(ttfts)
    count = len(ordered)
    return {
        name: sum(ordered) / count if rank is None else ordered[max(0, -(-rank * count // 100) - 1)]
        for name, rank in STATISTICS.items()
    }


def predict_replay_ttft(
    preset: ModelPreset,
    requests: Sequence[ReplayedRequest],
    concurrency: int,
    *,
    trace_block_tokens: Optional[int],
    offload_gib: float,
    tier_bytes_per_s: Optional[float] = None,
    max_requests: int = MAX_REQUESTS,
    kept: Optional[int] = None,
) -> ReplayTtftPrediction:
    """Each arm's TTFT p50 band at `concurrency` over the first `max_requests` kept requests
    (`kept`: how many the replay sends when `requests` holds only its head).

    The band of an arm is the lowest and highest p50 over its runs: one per JITTER_SEEDS send
    jitter and per server clock (CLOCKS_FROM_STEP_START) for every arm, times LINK_EFFICIENCIES
    for the offload arm (the resident and recompute arms move nothing over the host links).
    `statistic_changes` holds, per statistic of STATISTICS, the ratio offload / baseline for
    each of CHANGES from the runs paired by seed and clock (paired_change_band): one set of
    runs gives every statistic. The same inputs give the same band."""
    modelled = list(requests[:max_requests])
    served = served_requests(modelled, preset.max_model_len)
    runs: Dict[str, Dict[RunKey, Dict[str, float]]] = {}
    for arm in ARMS:
        efficiencies = LINK_EFFICIENCIES if arm == "offload" else (1.0,)
        runs[arm] = {
            (efficiency, seed, from_step_start): ttft_statistics(
                replay_ttfts(
                    _config(preset, arm, efficiency, offload_gib, tier_bytes_per_s),
                    served,
                    concurrency,
                    trace_block_tokens,
                    random.Random(seed),  # noqa: S311 - a model's draw, not a secret
                    from_step_start,
                )
            )
            for efficiency in efficiencies
            for seed in JITTER_SEEDS
            for from_step_start in CLOCKS_FROM_STEP_START
        }
    arms: Dict[str, ArmBand] = {}
    for arm, by_run in runs.items():
        p50s = [statistics["p50"] for statistics in by_run.values()]
        arms[arm] = ArmBand(low_s=min(p50s), high_s=max(p50s), runs=len(p50s))
    refused = len(modelled) - len(served)
    total = len(requests) if kept is None else max(kept, len(requests))
    changes = {statistic: _change_bands(runs, statistic) for statistic in STATISTICS}
    return ReplayTtftPrediction(concurrency, arms, len(modelled), total, refused, changes)


def _change_bands(
    runs: Dict[str, Dict[RunKey, Dict[str, float]]], statistic: str
) -> Dict[str, ChangeBand]:
    def of(arm: str) -> Dict[RunKey, float]:
        return {key: values[statistic] for key, values in runs[arm].items()}

    return {
        "{}/{}".format(over, base): paired_change_band(of(over), of(base))
        for over, base in CHANGES
        if over in runs and base in runs
    }


def paired_change_band(over: Dict[RunKey, float], base: Dict[RunKey, float]) -> ChangeBand:
    """The ratio over/base of one statistic from paired runs: each run of `over` divided by the
    run of `base` that sent the same requests at the same jittered times and clocked them the
    same way (its seed and clock; a baseline arm moves nothing over the host links, so its one
    efficiency serves every efficiency of `over`). What moves both arms alike (a late send, a clock)
    cancels in the ratio instead of spanning the band twice, as the extremes of two
    independent bands would (`independent_change_band`)."""
    by_pair = {(seed, clock): value for (_, seed, clock), value in base.items()}
    ratios = [
        value / by_pair[(seed, clock)]
        for (_, seed, clock), value in over.items()
        if by_pair.get((seed, clock), 0.0) > 0
    ]
    if not ratios:
        raise ValueError("the two arms share no seeded run to pair")
    return ChangeBand(low=min(ratios), high=max(ratios), runs=len(ratios))


def independent_change_band(over: ArmBand, base: ArmBand) -> Tuple[float, float]:
    """The ratio's band from the extremes of two independent bands: lowest over highest to
    highest over lowest. The paired band always lies inside it."""
    return over.low_s / base.high_s, over.high_s / base.low_s


def served_requests(
    requests: Sequence[ReplayedRequest], max_model_len: int
) -> List[ReplayedRequest]:
    """What the server serves, as simhost's and vLLM's API do: a prompt past the context length
    (or an empty one) is refused before the engine sees it, an output cut to what is left."""
    return [
        replace(
            request, output_tokens=min(request.output_tokens, max_model_len - request.prompt_tokens)
        )
        for request in requests
        if 0 < request.prompt_tokens <= max_model_len
    ]


def _config(
    preset: ModelPreset,
    arm: str,
    link_efficiency: float,
    offload_gib: float,
    tier_bytes_per_s: Optional[float],
) -> EngineConfig:
    platform = replace(preset.platform, link_efficiency=link_efficiency)
    shifted = replace(preset, platform=platform)
    return arm_config(shifted, arm, None, offload_gib, tier_bytes_per_s)
