"""Claims read as sentences and checked against published clauses: each number inside or below
what was measured is supported, one above is not, and the reason names the tier and report."""

from __future__ import annotations

import pytest

from gates.decisions.claims import check_claim, parse_claim

ARTICLE = (
    "TTFT p50 -26 to -32 % across three concurrency tiers, throughput +29 % at c=8 and +40 % "
    "at c=16, 8.6-20x against recompute"
)


def clause(metric, change, tier, estimate, low, high, compare="offload/baseline"):
    return {
        "metric": metric,
        "change": change,
        "tier": tier,
        "estimate": estimate,
        "low": low,
        "high": high,
        "compare": compare,
    }


REPORT = {
    "id": "r1",
    "clauses": [
        clause("ttft_p50", "reduction", 4, 30.0, 27.0, 33.0),
        clause("ttft_p50", "reduction", 8, 31.0, 28.0, 34.0),
        clause("ttft_p50", "reduction", 16, 32.0, 29.0, 35.0),
        clause("output_throughput", "gain", 8, 31.0, 28.0, 33.0),
        clause("output_throughput", "gain", 16, 38.0, 35.0, 39.5),
        clause("ttft_p50", "ratio", 16, 12.0, 9.0, 14.0, compare="recompute/offload"),
    ],
}


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (
            "TTFT p50 reduction 26-32 % at c=4/8/16 on 480B",
            [("reduction", "ttft_p50", 26.0, 32.0, (4, 8, 16))],
        ),
        (
            ARTICLE,
            [
                ("reduction", "ttft_p50", 26.0, 32.0, ()),
                ("gain", "output_throughput", 29.0, 29.0, (8,)),
                ("gain", "output_throughput", 40.0, 40.0, (16,)),
                ("ratio", None, 8.6, 20.0, ()),
            ],
        ),
        ("TTFT p99 \u221210 % at c=16", [("reduction", "ttft_p99", 10.0, 10.0, (16,))]),
        ("up to 3\u00d7 faster TTFT", [("ratio", None, 3.0, 3.0, ())]),
        ("no numbers at all", []),
    ],
)
def test_a_sentence_s_numbers_are_read_with_their_metric_and_tiers(sentence, expected):
    found = [(n.change, n.metric, n.low, n.high, n.tiers) for n in parse_claim(sentence)]
    assert found == expected


def test_a_claim_within_every_interval_is_supported():
    check = check_claim("TTFT p50 reduction 26-32 % at c=4/8/16", [REPORT])
    assert check.status == "supported", check
    assert "c=16: within or below what was measured 32 % [29, 35] in report r1" in (
        check.numbers[0].reason
    )


def test_a_number_above_the_interval_is_not_supported_and_says_by_how_much():
    check = check_claim(ARTICLE, [REPORT])
    assert check.status == "partly"
    by_text = {n.number.text: n for n in check.numbers}
    assert by_text["+40 %"].supported is False
    assert "c=16: 40 % is above what was measured 38 % [35, 39.5]" in by_text["+40 %"].reason
    assert by_text["8.6-20x"].supported is False  # 20x is above the 14x top
    assert by_text["+29 %"].supported and by_text["-26 to -32 %"].supported


def test_an_unmeasured_tier_or_metric_is_not_supported():
    check = check_claim("TTFT p50 reduction 20 % at c=32; e2el p50 reduction 5 %", [REPORT])
    assert check.status == "not supported"
    assert "c=32: not measured in the cited reports" in check.numbers[0].reason
    assert "no published clause measured e2el_p50 reduction" in check.numbers[1].reason


def test_a_claim_without_reports_or_numbers_is_not_supported():
    assert check_claim("26 % lower TTFT", []).reason == "the claim cites no published report"
    assert check_claim("much faster", [REPORT]).reason == "the claim has no number to check"


def test_the_best_of_several_reports_supports_a_number():
    other = {"id": "r2", "clauses": [clause("output_throughput", "gain", 16, 45.0, 41.0, 48.0)]}
    check = check_claim("throughput +40 % at c=16", [REPORT, other])
    assert check.status == "supported" and "report r2" in check.numbers[0].reason
