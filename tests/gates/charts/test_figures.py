"""Every number reads one way: gates.figures writes it for the pages, the chart labels and the
PDF; the shown estimate always lies inside the shown interval."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from gates import figures
from gates.charts import g3 as charts
from gates.pages.report.tables import clause_table
from gates.templatetags.page_tags import check_figures, clause_figures
from tests.gates.charts.test_charts import estimate_traces
from tests.gates.pages.test_dashboards import record_g3_decision


def value_of(text: str) -> float:
    """The number a reader takes from a shown value: "1,234.5 %" is 1234.5."""
    match = re.match(r"-?[\d,]+(\.\d+)?", text)
    assert match, text
    return float(match.group(0).replace(",", ""))


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (180.5, "%", "180.5 %"),  # was "18 %": a trailing zero before the point was dropped
        (640.3, "%", "640.3 %"),
        (640.0, "%", "640 %"),
        (100.0, "", "100"),
        (29, "%", "29 %"),
        (1.23456, "x", "1.235x"),
        (0.012345, "", "0.01235"),
        (12345.6, "tokens/s", "12,346 tokens/s"),
        (-0.00001, "", "-0.00001"),
        (0.0, "%", "0 %"),
        (None, "%", "—"),
        (float("nan"), "", "—"),
    ],
)
def test_numbers_read_as_written_with_their_unit(value, unit, shown):
    assert figures.number(value, unit) == (shown if value == value else "nan")


def test_sizes_times_counts_and_shares():
    assert figures.byte_size(2199023255552) == "2 TiB"
    assert figures.byte_size(85520809984) == "79.6 GiB"
    assert figures.gib(2048) == "2 TiB"
    assert figures.seconds(51) == "51 s" and figures.seconds(3725) == "1 h 2 min"
    assert figures.count(1, "GPU") == "1 GPU" and figures.count(8, "GPU") == "8 GPUs"
    assert figures.share(0.9598) == "95.98 %" and figures.share(0.125) == "12.5 %"
    assert figures.change(-0.687) == "-68.7 %" and figures.change(0.008) == "+0.8 %"
    assert figures.change(0) == "0 %" and figures.change(None) == figures.DASH


finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=3, max_size=3), st.sampled_from(["%", "x", ""]))
def test_the_shown_estimate_lies_inside_the_shown_interval(values, unit):
    low, estimate, high = sorted(values)
    shown = figures.estimate_interval(estimate, low, high, unit)
    shown_estimate, shown_low, shown_high = (value_of(text) for text in shown)
    assert shown_low <= shown_estimate <= shown_high, shown


def cell(estimate: float, low: float, high: float) -> dict:
    return {
        "clause": 0,
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "tier": 16,
        "threshold": 29.0,
        "estimate": estimate,
        "low": low,
        "high": high,
        "verdict": "pass",
        "confidence_at_look": 0.95,
        "n": 8,
    }


@pytest.mark.parametrize(
    ("estimate", "low", "high"), [(180.5, 150.25, 210.0), (640.0, 600.125, 700.3), (30.1, 29.0, 31)]
)
def test_the_page_the_chart_and_the_pdf_show_the_same_numbers(estimate, low, high):
    stored = cell(estimate, low, high)
    row = {**stored, "unit": "%", "comparison": "reduction"}
    page = clause_figures(row)
    hover = estimate_traces(charts.forest_figure({"clauses": [stored]}))[0]["hovertext"][0]
    pdf = clause_table([stored])[0]
    assert page["estimate"] == pdf.estimate
    assert page["interval"] == f"{pdf.interval.split(']')[0][1:].replace(', ', ' to ')}"
    assert f"{page['estimate']} [{pdf.interval.split(']')[0][1:]}]" in hover
    assert page["bar"] == pdf.bar == "29 %" and "bar: at least 29 %" in hover
    assert value_of(page["interval"]) <= value_of(page["estimate"])


def test_g4_checks_show_their_unit_and_comparison():
    shown = check_figures(
        {"metric": "memory_growth", "expected": 64, "observed": 12.25, "unit": None}
    )
    assert shown == {
        "comparison": "growth, at most",
        "expected": "64 MiB/h",
        "observed": "12.25 MiB/h",
    }
    assert check_figures({"metric": "error_rate", "expected": 1, "observed": 0.5})["observed"] == (
        "0.5 %"
    )


@pytest.mark.django_db
def test_the_g3_clause_table_shows_the_decisions_numbers_as_the_pdf_does(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    client.force_login(customer_viewer)
    html = client.get(reverse("gates:gate-detail", args=[decision.gate_id])).content.decode()
    table = html[html.index('id="clauses"') :]
    for row in clause_table(decision.result["clauses"]):
        assert f'<td class="num">{row.estimate}</td>' in table
