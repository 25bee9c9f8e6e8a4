"""The statistics rules of a G3 spec (docs/decisions.md): the schema of its optional
`statistics` section and claimed effects, and the rules a schema cannot say (an even repetition
plan of at least 4, percentile clauses only on workloads that can estimate them).
Pure: plain JSON in, (field, message) pairs out; gates.specs.validation turns them into FieldErrors.
"""

from __future__ import annotations

import math

from documents.spec import ClauseSpec, Repetitions, Workload

# Optional, so specs written before it keep per-attempt control.
STATISTICS = {
    "type": "object",
    "properties": {
        "attempts": {"type": "integer", "minimum": 1, "maximum": 10},
        "sd_floor": {"type": "number", "minimum": 0, "maximum": 1},
        "noise_cv_pct": {"type": "number", "exclusiveMinimum": 0, "maximum": 200},
        # Where the stated noise comes from (a measurement, a report): shown beside the OC.
        "noise_source": {"type": "string", "minLength": 1, "maxLength": 300},
        # A cell's sd is floored at this share of the reference noise (G2's, else the stated).
        "sd_floor_fraction": {"type": "number", "minimum": 0, "maximum": 1},
        # A cell whose variance is this improbable for the reference noise is invalid.
        "spread_level": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.1},
        "min_power": {"type": "number", "minimum": 0, "maximum": 0.99},
        "require_power": {"type": "boolean"},
        # Pool a clause's sd across its tiers where the data support it (decisions.md).
        "pool_tiers": {"type": "boolean"},
        # A new attempt after an inconclusive one continues from its repetitions (decisions.md).
        "carry_repetitions": {"type": "boolean"},
        "outliers": {
            "type": "object",
            "properties": {
                "max_reruns": {"type": "integer", "minimum": 0, "maximum": 10},
                "max_preemptions": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                # The chance, per attempt, that a robust screen flags an undisturbed repetition.
                "screen_level": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.1},
                # The chance, per repetition, that the step check flags an undisturbed one.
                "step_level": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.1},
            },
            "required": ["max_reruns"],
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
# What the vendor expects a clause to show; feeds the operating characteristic, never a verdict.
CLAIMS = {
    "claimed_pct": {"type": "number", "exclusiveMinimum": -100, "maximum": 100_000},
    "claimed": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000},
}
# The largest of n requests lies above the true pNN with chance 1 - (NN/100)^n; a percentile
# clause needs that at least this sure, or a tail the run cannot see could pass (p99: 688
# requests per cell; MLPerf LoadGen asks 662).
PERCENTILE_SUPPORT = 0.999
MIN_REPETITIONS = 4

Problem = tuple[str, str]


def repetition_problems(repetitions: Repetitions) -> list[Problem]:
    """Looks fall on even counts, so the A B C / C B A order cancels drift at every look; four
    pairs at the first look give its t statistic 3 degrees of freedom."""
    problems = []
    if repetitions["min"] < MIN_REPETITIONS:
        problems.append(("min", f"must be at least {MIN_REPETITIONS}"))
    for key, count in (("min", repetitions["min"]), ("max", repetitions["max"])):
        if count % 2:
            problems.append((key, "must be even (looks fall on whole A B C / C B A pairs)"))
    return problems


def clause_problems(
    clause: ClauseSpec, percentile_key: str | None, workload: Workload
) -> list[Problem]:
    """A claim in the wrong unit, or a percentile the workload has too few requests for."""
    change = clause["change"]
    key, other = ("claimed", "claimed_pct") if change == "ratio" else ("claimed_pct", "claimed")
    problems = []
    if other in clause:
        problems.append((other, f"does not apply to change {change!r}; use {key}"))
    if percentile_key not in (None, "mean"):
        percentile = 50.0 if percentile_key == "median" else float(percentile_key[1:])
        needed = percentile_requests_needed(percentile)
        if workload["num_prompts"] < needed:
            problems.append(
                (
                    "metric",
                    f"{clause['metric']} needs at least {needed} requests per cell to be "
                    f"estimated; workload.num_prompts is {workload['num_prompts']}",
                )
            )
    return problems


def percentile_requests_needed(percentile: float) -> int:
    """Requests per cell a pNN clause needs (see PERCENTILE_SUPPORT)."""
    return math.ceil(math.log(1 - PERCENTILE_SUPPORT) / math.log(percentile / 100))
