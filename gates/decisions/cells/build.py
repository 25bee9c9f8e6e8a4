"""A G3 cell as the decision document holds it: which clause and tier, its repetitions, its
numbers at its deciding look and why it has its verdict, for ratio cells, goodput floors and
cells on an arm this host cannot run. Pure: plain numbers in, typed documents out; no Django.
"""

from __future__ import annotations

from documents.cell import CellHead, G3Cell, Pair, ShareRepetition
from gates.decisions.cells import floors, readout
from gates.decisions.clauses import Clause
from gates.decisions.statistics.inference import VERDICT_NAMES, LookOutcome, SequentialPlan


def cell_head(clause: Clause, tier: int, pairs: list[Pair], dropped: list[str]) -> CellHead:
    head: CellHead = {
        "clause": clause.index,
        "metric": clause.metric,
        "compare": clause.compare,
        "change": clause.change,
        "tier": tier,
        "threshold": clause.threshold,
        "better": clause.better,
        "pairs": pairs,
        "dropped": dropped,
        "sd_floor": None,
        "repetitions_shown": readout.repetitions_text(pairs),
    }
    if clause.slo is not None:
        head["slo"] = floors.slo_shown(clause)
    return head


def ratio_cell(
    clause: Clause,
    tier: int,
    pairs: list[Pair],
    dropped: list[str],
    plan: SequentialPlan,
    outcome: LookOutcome,
    row: int,
    floor: float,
) -> G3Cell:
    cell: CellHead = {**cell_head(clause, tier, pairs, dropped), "sd_floor": float(floor)}
    index = int(outcome.look[0, row])
    if index < 0:
        early, cause = readout.before_first_look(clause, pairs, plan)
        return {**cell, **early, "verdict": "inconclusive", "cause": cause}
    numbers = readout.at_look(clause, outcome, row, index, plan)
    verdict = VERDICT_NAMES[int(outcome.verdict[0, row])]
    cause = readout.cell_cause(verdict, clause, numbers, plan, len(pairs), outcome, row)
    return {**cell, **numbers, "verdict": verdict, "cause": cause}


def floor_cell(
    clause: Clause,
    tier: int,
    shares: list[ShareRepetition],
    dropped: list[str],
    plan: SequentialPlan,
    outcome: LookOutcome,
    row: int,
    floor: float,
) -> G3Cell:
    cell: CellHead = {
        **cell_head(clause, tier, [], dropped),
        "sd_floor": float(floor),
        "repetitions_shown": floors.repetitions_text(shares),
    }
    index = int(outcome.look[0, row])
    if index < 0:
        early, found, cause = floors.before_first_look(clause, shares, plan)
        cell["goodput"] = found
        return {**cell, **early, "verdict": "inconclusive", "cause": cause}
    numbers, found = floors.at_look(clause, shares, outcome, row, index, plan)
    verdict = VERDICT_NAMES[int(outcome.verdict[0, row])]
    cause = floors.cell_cause(verdict, clause, numbers, plan, len(shares))
    cell["goodput"] = found
    return {**cell, **numbers, "verdict": verdict, "cause": cause}


def not_evaluated_cell(clause: Clause, tier: int, role: str, cause: str) -> G3Cell:
    """A clause on an arm the host cannot run is not judged: never a pass, never a fail."""
    return {
        **cell_head(clause, tier, [], []),
        "estimate": None,
        "low": None,
        "high": None,
        "n": 0,
        "look": None,
        "confidence_at_look": None,
        "shown": {"estimate": None, "interval": None, "look": cause},
        "ratio": {"estimate": None, "low": None, "high": None, "bound": clause.bound_ratio},
        "log_ratio": {"mean": None, "sd": None, "t_quantile": None},
        "verdict": "inconclusive",
        "not_evaluated": True,
        "cause": cause,
    }
