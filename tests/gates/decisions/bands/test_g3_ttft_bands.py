"""G3's offload cells of a replayed trace against the planner's TTFT p50 band: a row per
offload cell (within, below, above, or why not told), advisory: the verdict, its reasons and
clauses are the same with and without it."""

from __future__ import annotations

import pytest

from gates.decisions import EvidenceError, decide_g3
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, paired

PASSING = [0.60, 0.62, 0.59, 0.61]
# The offload arm's TTFT p50 per repetition in paired(PASSING): 1000 ms x (1 + rep/100) x ratio.
OFFLOAD_MS = [1000 * (1 + 0.01 * rep) * ratio for rep, ratio in enumerate(PASSING, start=1)]
MEAN = sum(OFFLOAD_MS) / 4  # 620.1 ms


def predicted(*tiers: tuple[int, float, float] | tuple[int, str]) -> dict:
    found = [
        {"tier": tier[0], "missing": tier[1]}
        if len(tier) == 2
        else {
            "tier": tier[0],
            "arms": {"offload": [tier[1], tier[2]], "resident": [900.0, 1100.0]},
            "modelled": 1000,
            "kept": 3993,
            "capped": True,
            "refused": 0,
            "assumes": "the first 1,000 requests of 3,993 (the model's cap)",
        }
        for tier in tiers
    ]
    return {**CONTEXT, "replay_ttft_predictions": found}


@pytest.mark.parametrize(
    ("band", "position", "row_verdict"),
    [
        ((600.0, 650.0), "within", "pass"),
        ((MEAN, 650.0), "within", "pass"),  # the ends belong to the band
        ((650.0, 700.0), "below", "inconclusive"),
        ((400.0, 600.0), "above", "inconclusive"),
    ],
)
def test_each_offload_cell_is_within_below_or_above_and_the_decision_is_otherwise_unchanged(
    band, position, row_verdict
):
    measured = paired(PASSING)
    result = decide_g3(g3_spec(), measured, predicted((8, *band)))
    plain = decide_g3(g3_spec(), measured, CONTEXT)
    for key in ("verdict", "reasons", "clauses", "validity", "plan"):
        assert result[key] == plain[key], key
    assert result["verdict"] == "pass"
    (row,) = result["replay_ttft_bands"]
    assert (row["arm"], row["tier"], row["check"]) == ("offload", 8, "replay_ttft_band")
    assert (row["position"], row["verdict"], row["advisory"]) == (position, row_verdict, True)
    assert row["measured_ms"] == pytest.approx(MEAN)
    assert row["ttft_p50_ms"] == pytest.approx(OFFLOAD_MS)
    assert (row["band_low_ms"], row["band_high_ms"]) == band
    assert f"mean TTFT p50 {MEAN:.1f} ms over 4 kept repetition(s) is {position}" in row["cause"]
    model_error = "a model error, not a tier defect" in row["cause"]
    assert model_error == (position != "within")
    noted = [note for note in result["notes"] if note.startswith("replay_ttft_band offload c=8")]
    assert len(noted) == (0 if position == "within" else 1)
    assert result["notes"] == plain["notes"] + noted


def test_a_failing_g3_stays_failed_with_its_reasons_whatever_side_of_the_band():
    measured = paired([0.95, 0.97, 0.96, 0.96])
    plain = decide_g3(g3_spec(), measured, CONTEXT)
    result = decide_g3(g3_spec(), measured, predicted((8, 100.0, 200.0)))
    assert result["verdict"] == plain["verdict"] == "fail"
    assert result["reasons"] == plain["reasons"] and result["clauses"] == plain["clauses"]
    assert result["replay_ttft_bands"][0]["position"] == "above"


def test_the_context_keeps_the_bands_as_parsed_for_the_signed_bundle():
    result = decide_g3(g3_spec(), paired(PASSING), predicted((8, 600.0, 650.0)))
    (kept,) = result["inputs"]["context"]["replay_ttft_predictions"]
    assert kept["arms"] == {"offload": [600.0, 650.0], "resident": [900.0, 1100.0]}
    assert (kept["capped"], kept["modelled"], kept["kept"]) == (True, 1000, 3993)


def test_a_missing_band_or_measurement_says_why_and_notes_nothing():
    spec = g3_spec(tiers=[8, 16])
    rows = paired(PASSING) + [
        {**row, "metrics": {}} if row["arm"] == "offload" else row
        for row in paired(PASSING, tier=16)
    ]
    result = decide_g3(spec, rows, predicted((8, "no inventory was accepted at G1"), (16, 1, 2)))
    missing, unobserved = result["replay_ttft_bands"]
    assert missing["tier"] == 8 and "position" not in missing
    assert "no TTFT band from the planner at c=8: no inventory" in missing["cause"]
    assert unobserved["tier"] == 16 and unobserved["cause"] == "TTFT p50 was not observed"
    assert not [note for note in result["notes"] if note.startswith("replay_ttft_band")]


def test_without_predictions_the_decision_is_as_before():
    result = decide_g3(g3_spec(), paired(PASSING), CONTEXT)
    assert "replay_ttft_bands" not in result
    assert "replay_ttft_predictions" not in result["inputs"]["context"]


@pytest.mark.parametrize(
    ("found", "field"),
    [
        ("no", "context.replay_ttft_predictions"),
        ([{"arms": {"offload": [1, 2]}}], "context.replay_ttft_predictions[0].tier"),
        ([{"tier": 8, "arms": {"fast": [1, 2]}}], "context.replay_ttft_predictions[0].arms"),
        ([{"tier": 8, "arms": {"offload": [2, 1]}}], "replay_ttft_predictions[0].arms.offload"),
        ([{"tier": 8, "arms": {"offload": [0, 1]}}], "replay_ttft_predictions[0].arms.offload"),
        ([{"tier": 8, "missing": "x"}, {"tier": 8, "missing": "y"}], "replay_ttft_predictions"),
    ],
)
def test_a_malformed_prediction_is_an_evidence_error_naming_the_field(found, field):
    with pytest.raises(EvidenceError) as error:
        decide_g3(g3_spec(), paired(PASSING), {**CONTEXT, "replay_ttft_predictions": found})
    assert field in str(error.value)
