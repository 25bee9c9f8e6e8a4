"""G3's offload cells of a replayed trace against the planner's external band: a row per
offload cell (within, below, above, or why not told), advisory, never the G3 verdict."""

from __future__ import annotations

import copy

import pytest

from gates.decisions import EvidenceError, decide_g3
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, paired


def bands(*tiers: tuple[int, float, float] | tuple[int, str]) -> dict:
    found = [
        {"tier": tier[0], "missing": tier[1]}
        if len(tier) == 2
        else {"tier": tier[0], "band": [tier[1], tier[2]]}
        for tier in tiers
    ]
    return {**CONTEXT, "replay_external_bands": found}


def with_rates(rows: list[dict], rates: list[float | None]) -> list[dict]:
    """The offload arm's repetitions at these external hit rates, in repetition order."""
    rows = copy.deepcopy(rows)
    offload = [row for row in rows if row["arm"] == "offload"]
    for row, rate in zip(offload, rates, strict=True):
        row["server"]["external_hit_rate"] = rate
    return rows


PASSING = [0.60, 0.62, 0.59, 0.61]


@pytest.mark.parametrize(
    ("rates", "position", "row_verdict", "words"),
    [
        ([0.4, 0.5, 0.45, 0.45], "within", "pass", "within the planner's band 30.0% to 50.0%"),
        ([0.3, 0.3, 0.3, 0.3], "within", "pass", "within"),  # the ends belong to the band
        ([0.21, 0.25, 0.22, 0.24], "below", "inconclusive", "a model error, not a tier defect"),
        ([0.7, 0.6, 0.6, 0.7], "above", "pass", "a model error in the tier's favour"),
    ],
)
def test_each_offload_cell_is_within_below_or_above_the_band_and_never_the_verdict(
    rates, position, row_verdict, words
):
    measured = with_rates(paired(PASSING), rates)
    result = decide_g3(g3_spec(), measured, bands((8, 0.3, 0.5)))
    plain = decide_g3(g3_spec(), measured, CONTEXT)
    assert result["verdict"] == plain["verdict"] == "pass"
    assert result["clauses"] == plain["clauses"] and result["reasons"] == plain["reasons"]
    (row,) = result["replay_bands"]
    mean = sum(rates) / 4
    assert (row["arm"], row["tier"], row["check"]) == ("offload", 8, "replay_band")
    assert (row["position"], row["verdict"], row["advisory"]) == (position, row_verdict, True)
    assert row["external_hit_rate"] == pytest.approx(mean) and row["rates"] == rates
    assert (row["band_low"], row["band_high"], row["expected"]) == (0.3, 0.5, "30.0% to 50.0%")
    assert words in row["cause"] and f"mean external hit rate {mean:.1%}" in row["cause"]
    noted = [note for note in result["notes"] if note.startswith("replay_band offload c=8: ")]
    assert len(noted) == (0 if position == "within" else 1)
    assert result["inputs"]["context"]["replay_external_bands"] == [{"tier": 8, "band": [0.3, 0.5]}]


def test_a_failing_g3_stays_failed_whatever_side_of_the_band():
    measured = with_rates(paired([0.95, 0.97, 0.96, 0.96]), [0.4] * 4)
    result = decide_g3(g3_spec(), measured, bands((8, 0.3, 0.5)))
    assert result["verdict"] == "fail" and result["replay_bands"][0]["position"] == "within"


def test_a_missing_band_or_rate_says_why_and_notes_nothing():
    spec = g3_spec(tiers=[8, 16])
    rows = paired(PASSING) + with_rates(paired(PASSING, tier=16), [None] * 4)
    result = decide_g3(spec, rows, bands((8, "no saved KV plan"), (16, 0.3, 0.5)))
    missing, unobserved = result["replay_bands"]
    assert (
        missing["tier"] == 8
        and "no band from the planner at c=8: no saved KV plan" in (missing["cause"])
    )
    assert "position" not in missing and missing["verdict"] == "inconclusive"
    assert unobserved["tier"] == 16 and unobserved["external_hit_rate"] is None
    assert "mean external hit rate was not observed" in unobserved["cause"]
    assert not [note for note in result["notes"] if note.startswith("replay_band")]


def test_the_side_services_lookup_rate_is_the_rate_when_it_is_the_hit_proof():
    measured = paired(PASSING)
    for row in measured:
        if row["arm"] == "offload":
            row["server"]["hit_proof"] = "lmcache"
            row["server"]["side_services"] = {"lmcache": {"lookup_hit_rate": 0.25}}
    (row,) = decide_g3(g3_spec(), measured, bands((8, 0.3, 0.5)))["replay_bands"]
    assert row["position"] == "below" and row["hit_proof"] == "lmcache lookup hit rate"
    assert "mean lmcache lookup hit rate 25.0%" in row["cause"]


def test_without_bands_the_decision_is_as_before():
    result = decide_g3(g3_spec(), paired(PASSING), CONTEXT)
    assert "replay_bands" not in result
    assert "replay_external_bands" not in result["inputs"]["context"]


@pytest.mark.parametrize(
    ("found", "field"),
    [
        ("no", "context.replay_external_bands"),
        ([{"band": [0.1, 0.2]}], "context.replay_external_bands[0].tier"),
        ([{"tier": 8, "band": [0.5, 0.2]}], "context.replay_external_bands[0].band"),
        (
            [{"tier": 8, "band": [0.1, 0.2]}, {"tier": 8, "missing": "x"}],
            "context.replay_external_bands",
        ),
    ],
)
def test_a_malformed_band_is_refused_naming_the_field(found, field):
    with pytest.raises(EvidenceError) as error:
        decide_g3(g3_spec(), paired(PASSING), {**CONTEXT, "replay_external_bands": found})
    assert error.value.field == field
