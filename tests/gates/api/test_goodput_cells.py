"""A goodput floor cell, decided by the engine and recorded, as the REST API, the gate page and
the report show it: the SLO in words, a share in percent against its bar."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from gates.decisions import decide_g3
from gates.pages.report.tables import clause_table
from tests.gates.api.test_api import vendor_api  # noqa: F401 (a fixture)
from tests.gates.decisions.goodput.test_goodput import FLOOR, bench
from tests.gates.decisions.test_g3 import g3_spec
from tests.gates.pages.test_dashboards import open_g3, uploaded_run

SHARES = [63, 64, 63, 64, 64, 63, 64, 64]


def floor_result() -> dict:
    items = [
        bench(arm, rep, count)
        for rep, count in enumerate(SHARES, 1)
        for arm in ("baseline", "offload")
    ]
    return decide_g3(g3_spec([FLOOR]), items)


@pytest.fixture
def decided_floor(actor, vendor_viewer, engagement):
    gate = open_g3(actor, vendor_viewer, engagement)
    run = uploaded_run(actor, vendor_viewer, gate)
    return services.decision_record(run_id=run.pk, result=floor_result())


@pytest.mark.django_db
def test_the_api_carries_a_floor_cells_slo_unit_and_comparison(vendor_api, decided_floor):  # noqa: F811
    clauses = vendor_api.get(reverse("api:gate-detail", args=[decided_floor.gate_id])).json()[
        "clauses"
    ]
    (cell,) = clauses
    assert (cell["metric"], cell["compare"], cell["change"]) == ("goodput", "offload", "floor")
    assert (cell["unit"], cell["comparison"], cell["threshold"]) == ("%", "at_least", 90.0)
    assert cell["slo"] == "TTFT ≤ 2 s and TPOT ≤ 50 ms"
    assert cell["verdict"] == "pass" and 90 <= cell["low"] <= cell["estimate"] <= 100


@pytest.mark.django_db
def test_the_gate_page_shows_the_floor_with_its_slo_in_words(
    client, decided_floor, customer_viewer
):
    client.force_login(customer_viewer)
    html = client.get(reverse("gates:gate-detail", args=[decided_floor.gate_id])).content.decode()
    assert "goodput within TTFT ≤ 2 s and TPOT ≤ 50 ms" in html
    assert "offload share ≥" in html
    assert "of requests within TTFT ≤ 2 s and TPOT ≤ 50 ms, interval [" in html


def test_the_report_names_the_floor_and_reads_its_share_in_percent():
    (row,) = clause_table(floor_result()["clauses"])
    assert row.name == "goodput within TTFT ≤ 2 s and TPOT ≤ 50 ms floor, offload, c=8"
    assert row.comparison == "share of requests within the SLO in %, at least the bar"
    assert row.bar == "90 %" and row.estimate.endswith(" %") and row.verdict == "pass"
