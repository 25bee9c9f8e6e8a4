"""A goodput floor cell of G3: each repetition's share of the arm's requests within the SLO, and
what the cell shows a person (its numbers in percent, the SLO in words, why it has its verdict).
The walk over the looks is the ratio cells' own (g3._decide_cells); this module turns a floor's
measurements into margins and a decided margin back into shares.
Pure: plain data in, typed documents out; imports no Django.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from documents.cell import (
    CellReadout,
    GoodputFloorReadout,
    LogRatioReadout,
    RatioReadout,
    ShareRepetition,
    SloShown,
)
from gates import figures
from gates.decisions.cells import readout
from gates.decisions.clauses import Clause
from gates.decisions.goodput import BenchShare, Slo, bench_goodput
from gates.decisions.statistics.inference import LookOutcome, SequentialPlan
from gates.decisions.statistics.shares import binomial_sd_floor, margin_to_share, share_margins
from gates.decisions.validity import Measurement


def clause_slo(clause: Clause) -> Slo:
    """A goodput clause's SLO (validation made every goodput clause state one)."""
    return clause.slo or Slo()


def slo_shown(clause: Clause) -> SloShown:
    slo = clause_slo(clause)
    return {"bounds": slo.as_document(), "text": slo.text}


def bench_share(item: Measurement, clause: Clause) -> BenchShare | str:
    """One bench's requests within the clause's SLO, or why its file cannot say."""
    return bench_goodput(item.metrics.get("per_request"), clause_slo(clause))


def floor_shares(
    clause: Clause, tier: int, items: list[Measurement], budget: int
) -> tuple[list[ShareRepetition], list[str]]:
    """The arm's share per repetition at `tier`, in repetition order, and each repetition left
    out with why: a bench without per-request numbers is not judged on goodput, never guessed."""
    benches = sorted(
        (item for item in items if item.tier == tier and item.arm == clause.a),
        key=lambda item: item.repetition,
    )
    shares: list[ShareRepetition] = []
    dropped: list[str] = []
    for item in benches:
        found = bench_share(item, clause)
        if isinstance(found, str):
            dropped.append(
                f"repetition {item.repetition}: the {clause.a} bench {found}, so it is not "
                "judged on goodput"
            )
            continue
        shares.append(
            {
                "repetition": item.repetition,
                "met": found.met,
                "requests": found.requests,
                "share": found.share,
            }
        )
    for share in shares[budget:]:
        dropped.append(f"repetition {share['repetition']}: beyond repetitions.max ({budget})")
    return shares[:budget], dropped


def floor_margins(clause: Clause, shares: list[ShareRepetition]) -> np.ndarray:
    return share_margins([share["share"] for share in shares], clause.bound_ratio)


def floor_sd(clause: Clause, shares: list[ShareRepetition]) -> float:
    return binomial_sd_floor(clause.bound_ratio, [share["requests"] for share in shares])


def percent_text(share: float | None) -> str:
    return "unknown" if share is None else figures.number(100 * share, "%")


def repetitions_text(shares: list[ShareRepetition]) -> str:
    """'r1 93.1 % (466/500), r2 ...'."""
    return ", ".join(
        f"r{s['repetition']} {percent_text(s['share'])} ({s['met']}/{s['requests']})"
        for s in shares
    )


def estimate_text(clause: Clause, share: float | None) -> str:
    """'offload: 93.1 % of requests within TTFT ≤ 2 s and TPOT ≤ 50 ms'."""
    return f"{clause.a}: {percent_text(share)} of requests within {clause_slo(clause).text}"


def _readout(
    clause: Clause, shares: list[ShareRepetition], scale: tuple[float | None, ...]
) -> GoodputFloorReadout:
    mean, sd, quantile = scale
    return {
        "arm": clause.a,
        "bar_pct": clause.threshold,
        "shares": shares,
        "scale": {"mean": mean, "sd": sd, "t_quantile": quantile},
    }


def _no_ratio(clause: Clause) -> RatioReadout:
    """A floor compares no arms: its ratio readout holds only the bar, as a share."""
    return {"estimate": None, "low": None, "high": None, "bound": clause.bound_ratio}


NO_LOG_RATIO: LogRatioReadout = {"mean": None, "sd": None, "t_quantile": None}


def before_first_look(
    clause: Clause, shares: list[ShareRepetition], plan: SequentialPlan
) -> tuple[CellReadout, GoodputFloorReadout, str]:
    """No interval before the plan's first look: the mean share and each repetition instead."""
    size, first = len(shares), plan.looks[0]
    mean = float(np.mean([s["share"] for s in shares])) if size >= 2 else None
    if size < 2:
        cause = (
            f"{size} repetition(s) of {clause.a} with per-request numbers; an interval needs "
            f"at least 2 and the plan's first look is at {first}"
        )
    else:
        cause = (
            f"no interval before the plan's first look at {first} repetitions; "
            f"{estimate_text(clause, mean)} over {size}: {repetitions_text(shares)}"
        )
    shown: CellReadout = {
        "estimate": None if mean is None else 100 * mean,
        "low": None,
        "high": None,
        "n": size,
        "look": None,
        "confidence_at_look": None,
        "shown": {
            "estimate": None if mean is None else estimate_text(clause, mean),
            "interval": None,
            "look": f"before the first look (at {first} repetitions)",
        },
        "ratio": _no_ratio(clause),
        "log_ratio": NO_LOG_RATIO.copy(),
    }
    return shown, _readout(clause, shares, (None, None, None)), cause


def at_look(
    clause: Clause,
    shares: list[ShareRepetition],
    outcome: LookOutcome,
    row: int,
    index: int,
    plan: SequentialPlan,
) -> tuple[CellReadout, GoodputFloorReadout]:
    """The margin interval at the look turned back into shares of requests, in percent."""
    mean, sd, low, high = (
        float(values[0, row]) for values in (outcome.mean, outcome.sd, outcome.low, outcome.high)
    )
    bar = clause.bound_ratio
    estimate, lower, upper = (margin_to_share(value, bar) for value in (mean, low, high))
    critical = float(outcome.pass_critical[0, row])
    confidence = 1 - float(2 * stats.t.sf(critical, plan.looks[index] - 1))
    numbers: CellReadout = {
        "estimate": 100 * estimate,
        "low": 100 * lower,
        "high": 100 * upper,
        "n": plan.looks[index],
        "look": plan.looks[index],
        "confidence_at_look": confidence,
        "shown": {
            "estimate": estimate_text(clause, estimate),
            "interval": f"[{percent_text(lower)}, {percent_text(upper)}]",
            "look": readout.look_text(index, plan.looks, confidence),
        },
        "ratio": _no_ratio(clause),
        "log_ratio": NO_LOG_RATIO.copy(),
    }
    return numbers, _readout(clause, shares, (mean, sd, critical))


def cell_cause(
    verdict: str, clause: Clause, numbers: CellReadout, plan: SequentialPlan, size: int
) -> str:
    shown = numbers["shown"]
    high = numbers["high"]
    return readout.sequential_cause(
        verdict,
        f"{shown['estimate']}, interval {shown['interval']}",
        f"the bar {figures.number(clause.threshold, '%')}",
        shown["look"],
        plan,
        size,
        short="below",
        fail_holm=f"Holm over {plan.cells} cells",
        short_now=high is not None and high < clause.threshold,
    )
