"""G3's offload cells of a replayed trace: their measured TTFT change (offload statistic /
baseline statistic, paired by repetition) against the planner's paired band. A row per offload
arm, baseline, statistic a TTFT clause judges and tier (within, below, above, or why not told),
advisory: the verdict, its reasons and clauses are the same with and without it."""

from __future__ import annotations

import math

import pytest

from gates.decisions import EvidenceError, decide_g3
from tests.gates.decisions.bands.test_g3_ttft_bands import PASSING, predicted
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, measurement, paired

# The clause's own estimate: the geometric mean of the paired ratios (0.6048...).
GEOMEAN = math.exp(sum(map(math.log, PASSING)) / len(PASSING))


def with_changes(context: dict, **changes: list[float]) -> dict:
    """The context's bands, each tier that has one carrying these change bands."""
    bands = [
        {**band, "changes": {name.replace("_", "/"): ends for name, ends in changes.items()}}
        if "arms" in band
        else band
        for band in context["replay_ttft_predictions"]
    ]
    return {**context, "replay_ttft_predictions": bands}


@pytest.mark.parametrize(
    ("band", "position", "row_verdict"),
    [
        ([0.55, 0.65], "within", "pass"),
        ([GEOMEAN, 0.65], "within", "pass"),  # the ends belong to the band
        ([0.70, 0.90], "below", "inconclusive"),
        ([0.40, 0.58], "above", "inconclusive"),
    ],
)
def test_the_measured_change_is_within_below_or_above_and_the_decision_is_otherwise_unchanged(
    band, position, row_verdict
):
    measured = paired(PASSING)
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=band)
    result = decide_g3(g3_spec(), measured, context)
    without = decide_g3(g3_spec(), measured, predicted((8, 600.0, 650.0)))
    plain = decide_g3(g3_spec(), measured, CONTEXT)
    for key in ("verdict", "reasons", "clauses", "validity", "plan"):
        assert result[key] == plain[key] == without[key], key
    assert result["replay_ttft_bands"] == without["replay_ttft_bands"]
    (row,) = result["replay_ttft_changes"]
    assert (row["arm"], row["baseline"], row["tier"]) == ("offload", "baseline", 8)
    assert (row["check"], row["advisory"], row["metric"]) == (
        "replay_ttft_change",
        True,
        "ttft_p50",
    )
    assert (row["position"], row["verdict"]) == (position, row_verdict)
    assert row["ratios"] == pytest.approx(PASSING)
    assert row["measured_ratio"] == pytest.approx(GEOMEAN)
    assert [row["band_low"], row["band_high"]] == band
    assert f"{GEOMEAN:.3f} ({(GEOMEAN - 1) * 100:+.1f} %)" in row["observed"]
    assert ("a model error, not a tier defect" in row["cause"]) == (position != "within")
    noted = [n for n in result["notes"] if n.startswith("replay_ttft_change offload/baseline")]
    assert len(noted) == (0 if position == "within" else 1)
    assert result["notes"] == without["notes"] + noted


def test_a_failing_g3_stays_failed_whatever_side_of_the_change_band():
    measured = paired([0.95, 0.97, 0.96, 0.96])
    plain = decide_g3(g3_spec(), measured, CONTEXT)
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.5, 0.7])
    result = decide_g3(g3_spec(), measured, context)
    assert result["verdict"] == plain["verdict"] == "fail"
    assert result["reasons"] == plain["reasons"] and result["clauses"] == plain["clauses"]
    assert result["replay_ttft_changes"][0]["position"] == "above"


def test_a_recompute_arm_gets_a_row_only_when_a_ttft_clause_compares_it():
    clauses = [
        {
            "metric": "ttft_p50",
            "compare": compare,
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        }
        for compare in ("offload/baseline", "offload/recompute")
    ]
    measured = paired(PASSING) + [
        measurement("recompute", rep, 2000.0, 8) for rep in range(1, len(PASSING) + 1)
    ]
    context = with_changes(
        predicted((8, 600.0, 650.0)), offload_resident=[0.5, 0.7], offload_recompute=[0.2, 0.4]
    )
    resident, recompute = decide_g3(g3_spec(clauses), measured, context)["replay_ttft_changes"]
    assert (resident["baseline"], recompute["baseline"]) == ("baseline", "recompute")
    offload_ms = [1000 * (1 + 0.01 * rep) * r for rep, r in enumerate(PASSING, start=1)]
    assert recompute["ratios"] == pytest.approx([ms / 2000.0 for ms in offload_ms])
    assert recompute["position"] == "within"
    only_resident = decide_g3(g3_spec(clauses[:1]), measured, context)
    assert [row["baseline"] for row in only_resident["replay_ttft_changes"]] == ["baseline"]


def test_a_missing_band_or_pair_says_why_and_notes_nothing():
    spec = g3_spec(tiers=[8, 16, 32])
    rows = (
        paired(PASSING)
        + [row for row in paired(PASSING, tier=16) if row["arm"] == "offload"]
        + paired(PASSING, tier=32)
    )
    context = with_changes(
        predicted((8, "no inventory was accepted at G1"), (16, 1, 2), (32, 1, 2)),
        offload_resident=[0.5, 0.7],
    )
    context["replay_ttft_predictions"][2]["changes"] = {"offload/recompute": [0.2, 0.4]}
    unpaired, no_band = decide_g3(spec, rows, context)["replay_ttft_changes"]
    assert unpaired["tier"] == 16 and "position" not in unpaired
    assert unpaired["cause"] == "no kept repetition measured TTFT p50 on both offload and baseline"
    assert no_band["tier"] == 32 and "offload/resident at c=32" in no_band["cause"]


def test_a_context_from_before_the_change_bands_gives_no_change_row():
    result = decide_g3(g3_spec(), paired(PASSING), predicted((8, 600.0, 650.0)))
    assert "replay_ttft_changes" not in result
    assert "changes" not in result["inputs"]["context"]["replay_ttft_predictions"][0]


def test_the_context_keeps_the_change_bands_for_the_signed_bundle():
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.5, 0.7])
    result = decide_g3(g3_spec(), paired(PASSING), context)
    (kept,) = result["inputs"]["context"]["replay_ttft_predictions"]
    assert kept["changes"] == {"offload/resident": [0.5, 0.7]}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ("no", "replay_ttft_predictions[0].changes"),
        ({"offload/fast": [0.5, 0.7]}, "replay_ttft_predictions[0].changes"),
        ({"offload/resident": [0.7, 0.5]}, "replay_ttft_predictions[0].changes.offload/resident"),
        ({"offload/resident": [0, 0.5]}, "replay_ttft_predictions[0].changes.offload/resident"),
    ],
)
def test_a_malformed_change_band_is_an_evidence_error_naming_the_field(changes, field):
    context = predicted((8, 600.0, 650.0))
    context["replay_ttft_predictions"][0]["changes"] = changes
    with pytest.raises(EvidenceError) as error:
        decide_g3(g3_spec(), paired(PASSING), context)
    assert field in str(error.value)


P99_RATIOS = [0.30, 0.32, 0.29, 0.31]  # the tail gains far more than the median (PASSING)


def tail_paired() -> list[dict]:
    """PASSING's p50 ratios, and p99 ratios of P99_RATIOS by repetition."""
    rows = paired(PASSING)
    for row in rows:
        rep, ttft = row["repetition"], row["metrics"]["ttft_ms"]["median"]
        base = 3000.0 * (1 + 0.01 * rep)
        p99 = base * P99_RATIOS[rep - 1] if row["arm"] == "offload" else base
        row["metrics"]["ttft_ms"] = {"median": ttft, "p99": p99}
    return rows


P99_CLAUSE = {
    "metric": "ttft_p99",
    "compare": "offload/baseline",
    "change": "reduction",
    "at_least_pct": 25,
    "tiers": "all",
}


def p99_spec(clauses: list[dict]) -> dict:
    """A G3 spec whose cells send enough requests for a p99 (the spec's own check)."""
    workload = {**g3_spec()["workload"], "num_prompts": 1000}
    return g3_spec(clauses, workload=workload)


def test_a_p99_clause_gets_a_p99_row_against_the_p99_change_band():
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.55, 0.65])
    band = context["replay_ttft_predictions"][0]
    band["metric_changes"] = {"ttft_p99": {"offload/resident": [0.25, 0.35]}}
    result = decide_g3(p99_spec([P99_CLAUSE]), tail_paired(), context)
    (row,) = result["replay_ttft_changes"]
    assert row["metric"] == "ttft_p99"
    assert row["ratios"] == pytest.approx(P99_RATIOS)
    geomean = math.exp(sum(map(math.log, P99_RATIOS)) / len(P99_RATIOS))
    assert row["measured_ratio"] == pytest.approx(geomean)
    assert (row["band_low"], row["band_high"], row["position"]) == (0.25, 0.35, "within")
    assert row["cause"].startswith("TTFT p99 offload / baseline")
    # the p50's band would call the same cell below it: the rows read the clause's statistic
    band["metric_changes"] = {"ttft_p99": {"offload/resident": [0.55, 0.65]}}
    (below,) = decide_g3(p99_spec([P99_CLAUSE]), tail_paired(), context)["replay_ttft_changes"]
    assert below["position"] == "below"
    assert any(
        n.startswith("replay_ttft_change offload/baseline ttft_p99 c=8")
        for n in decide_g3(p99_spec([P99_CLAUSE]), tail_paired(), context)["notes"]
    )


def test_clauses_on_two_statistics_get_a_row_each_p50_first():
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.55, 0.65])
    context["replay_ttft_predictions"][0]["metric_changes"] = {
        "ttft_p99": {"offload/resident": [0.25, 0.35]}
    }
    clauses = [P99_CLAUSE, {**P99_CLAUSE, "metric": "ttft_p50"}]
    rows = decide_g3(p99_spec(clauses), tail_paired(), context)["replay_ttft_changes"]
    assert [(row["metric"], row["position"]) for row in rows] == [
        ("ttft_p50", "within"),
        ("ttft_p99", "within"),
    ]


def test_a_context_from_before_the_other_statistics_gives_the_p50_row_and_says_so():
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.55, 0.65])
    (row,) = decide_g3(p99_spec([P99_CLAUSE]), tail_paired(), context)["replay_ttft_changes"]
    assert (row["metric"], row["position"]) == ("ttft_p50", "within")
    assert row["ratios"] == pytest.approx(PASSING)
    assert "judges TTFT p99, whose change band was not predicted" in row["cause"]


def test_a_statistic_the_context_has_no_band_for_says_so():
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.55, 0.65])
    context["replay_ttft_predictions"][0]["metric_changes"] = {}
    (row,) = decide_g3(p99_spec([P99_CLAUSE]), tail_paired(), context)["replay_ttft_changes"]
    assert row["metric"] == "ttft_p99" and "position" not in row
    assert row["cause"] == "no TTFT p99 change band from the planner for offload/resident at c=8"


@pytest.mark.parametrize(
    ("metric_changes", "field"),
    [
        ({"ttft_p50": {"offload/resident": [0.5, 0.7]}}, "[0].metric_changes"),
        ({"ttft_p99": {"offload/fast": [0.5, 0.7]}}, "[0].metric_changes.ttft_p99"),
        ({"ttft_p99": {"offload/resident": [0.7, 0.5]}}, "metric_changes.ttft_p99.offload/resid"),
    ],
)
def test_a_malformed_statistic_band_is_an_evidence_error_naming_the_field(metric_changes, field):
    context = with_changes(predicted((8, 600.0, 650.0)), offload_resident=[0.55, 0.65])
    context["replay_ttft_predictions"][0]["metric_changes"] = metric_changes
    with pytest.raises(EvidenceError) as error:
        decide_g3(g3_spec(), paired(PASSING), context)
    assert field in str(error.value)
