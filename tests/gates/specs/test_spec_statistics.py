"""The statistics rules of a G3 spec: an even repetition plan of at least 4, percentile clauses
only on workloads that can estimate them, claims in the clause's unit, the statistics section."""

from __future__ import annotations

import pytest

from gates.specs.statistics import percentile_requests_needed
from gates.specs.validation import default_spec, validate_spec


def fields(document: dict) -> dict[str, str]:
    return {error.field: error.message for error in validate_spec("G3", document)}


def test_the_template_is_valid_and_states_its_attempts_floor_and_claims():
    document = default_spec("G3")
    assert validate_spec("G3", document) == []
    assert document["statistics"]["attempts"] >= 1 and document["statistics"]["sd_floor"] > 0
    assert all("claimed" in c or "claimed_pct" in c for c in document["clauses"])


@pytest.mark.parametrize(
    ("repetitions", "field", "words"),
    [
        ({"min": 2, "max": 8}, "repetitions.min", "at least 4"),
        ({"min": 5, "max": 8}, "repetitions.min", "even"),
        ({"min": 4, "max": 9}, "repetitions.max", "even"),
    ],
)
def test_a_repetition_plan_with_odd_or_too_few_repetitions_is_refused(repetitions, field, words):
    document = default_spec("G3")
    document["repetitions"] = repetitions
    assert words in fields(document)[field]


def test_a_p99_clause_on_64_prompts_is_refused_naming_the_requests_it_needs():
    document = default_spec("G3")
    document["clauses"][0]["metric"] = "ttft_p99"
    message = fields(document)["clauses[0].metric"]
    assert "needs at least 688 requests per cell" in message and "num_prompts is 64" in message
    document["workload"]["num_prompts"] = 688
    assert validate_spec("G3", document) == []


def test_the_requests_a_percentile_needs_grow_with_the_percentile():
    assert percentile_requests_needed(50) == 10
    assert percentile_requests_needed(90) == 66
    assert percentile_requests_needed(99) == 688  # MLPerf LoadGen asks 662
    # the largest of that many requests lies above the true p99 at least 99.9 % of the time
    assert 1 - 0.99**688 >= 0.999 > 1 - 0.99**687


def test_a_claim_in_the_wrong_unit_is_refused():
    document = default_spec("G3")
    document["clauses"][3]["claimed_pct"] = 12
    assert "use claimed" in fields(document)["clauses[3].claimed_pct"]


def test_an_unknown_statistics_field_is_refused_and_the_section_is_optional():
    document = default_spec("G3")
    document["statistics"]["alpha"] = 0.5
    assert "statistics.alpha" in fields(document)
    del document["statistics"]
    assert validate_spec("G3", document) == []
