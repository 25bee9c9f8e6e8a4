"""The history and compare pages and their API, over runs recorded through the services and
decided by the engine: what they show, their fixed query counts, and a 404 across
organizations."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from gates import services
from gates.decisions import decide_g3
from gates.models import Decision, Gate, Run
from tests.gates.charts.test_charts import CONTEXT, synthetic_measurements
from tests.gates.pages.test_dashboards import (
    embedded,
    open_g3,
    record_g3_decision,
    record_measurements,
)
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


def decide_another_attempt(actor, viewer, gate: Gate, seed: int) -> Decision:
    """A further G3 attempt on the same spec, decided from its own measurements."""
    run = services.run_create(
        actor=actor, viewer=viewer, gate=gate, host=None, source=Run.Source.UPLOAD
    )
    rows = synthetic_measurements(8, seed=seed)
    record_measurements(run, rows)
    return services.decision_record(
        run_id=run.pk, result=decide_g3(gate.current_spec.document, rows, CONTEXT)
    )


@pytest.fixture
def two_attempts(actor, vendor_viewer, engagement) -> tuple[Run, Run]:
    first = record_g3_decision(actor, vendor_viewer, engagement)
    second = decide_another_attempt(actor, vendor_viewer, first.gate, seed=11)
    return first.runs.get(), second.runs.get()


def queries_for(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_gate_history_plots_every_attempt_per_cell_with_its_numbers(
    client, customer_viewer, two_attempts
):
    first, _second = two_attempts
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:gate-history", args=[first.gate_id]))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-figure="figure-history-') == 8  # 4 clauses over their tiers
    figure = embedded(response, "figure-history-0")
    points = [y for trace in figure["data"] if trace["mode"] == "markers" for y in trace["y"]]
    estimates = [
        decision.clauses[0]["estimate"]
        for decision in Decision.objects.filter(gate=first.gate).order_by("created_at")
    ]
    assert sorted(points) == sorted(estimates)
    assert next(t for t in figure["data"] if t["name"] == "bar")["line"]["shape"] == "hv"
    assert "Run #1" in html and "Run #2" in html and "TTFT p50 reduction" in html


def test_the_gate_page_links_its_history_and_the_run_page_the_previous_attempt(
    client, customer_viewer, two_attempts
):
    first, second = two_attempts
    client.force_login(customer_viewer)
    gate_page = client.get(reverse("gates:gate-detail", args=[first.gate_id])).content.decode()
    assert reverse("gates:gate-history", args=[first.gate_id]) in gate_page
    run_page = client.get(reverse("gates:run-detail", args=[second.pk])).content.decode()
    assert reverse("gates:run-compare", args=[first.pk, second.pk]) in run_page
    assert "with the previous attempt (run #1)" in run_page


def test_the_history_costs_the_same_queries_with_more_decisions(
    client, actor, vendor_viewer, vendor_admin, engagement
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    client.force_login(vendor_admin)
    urls = [
        reverse("gates:gate-history", args=[decision.gate_id]),
        reverse("gates:clause-history") + "?clause=ttft_p50:offload/baseline:reduction",
    ]
    client.get(urls[0])  # the session's first read
    few = [queries_for(client, url) for url in urls]
    decide_another_attempt(actor, vendor_viewer, decision.gate, seed=5)
    assert [queries_for(client, url) for url in urls] == few


def test_the_compare_page_shows_each_cell_change_with_its_interval(
    client, customer_viewer, two_attempts
):
    first, second = two_attempts
    client.force_login(customer_viewer)
    url = reverse("gates:run-compare", args=[first.pk, second.pk])
    client.get(url)  # the session's first read
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    html = response.content.decode()
    cells, _, arms = html.partition('id="compare-arms"')
    assert response.status_code == 200 and cells.count('data-field="change"') == 8
    assert "Welch t interval" in html and "90 % confidence interval" in html
    assert "TTFT p50 reduction, offload vs baseline, c=16" in html
    # Each arm on its own: the arms of the template's clauses at each tier, once each.
    arm_rows = arms.count('data-field="change"')
    assert arm_rows >= 4 and "<td>baseline</td>" in arms and " ms</td>" in arms
    # session, user, memberships, the two runs, their decisions
    assert len(captured) <= 6, [q["sql"][:120] for q in captured.captured_queries]


def test_a_customer_of_another_organization_gets_404_for_history_and_compare(
    client, other_owner, two_attempts, actor, vendor_viewer, other_engagement
):
    first, second = two_attempts
    theirs = record_g3_decision(actor, vendor_viewer, other_engagement, repetitions=4)
    client.force_login(other_owner)
    assert client.get(reverse("gates:gate-history", args=[first.gate_id])).status_code == 404
    assert client.get(reverse("gates:run-compare", args=[first.pk, second.pk])).status_code == 404
    mixed = reverse("gates:run-compare", args=[theirs.runs.get().pk, second.pk])
    assert client.get(mixed).status_code == 404
    across = client.get(reverse("gates:clause-history")).content.decode()
    assert "Contoso chat" in across and "480B long context" not in across


def test_the_clause_history_spans_every_engagement_a_vendor_user_sees(
    client, vendor_engineer, two_attempts, actor, vendor_viewer, other_engagement
):
    record_g3_decision(actor, vendor_viewer, other_engagement, repetitions=4)
    client.force_login(vendor_engineer)
    url = reverse("gates:clause-history") + "?clause=output_throughput:offload/baseline:gain"
    html = client.get(url).content.decode()
    assert "480B long context: output throughput gain" in html
    assert "Contoso chat: output throughput gain" in html
    assert "TTFT p50 reduction" in html  # offered in the clause picker


def test_the_api_gives_the_history_and_the_comparison_as_json(
    vendor_admin, vendor_org, two_attempts
):
    first, second = two_attempts
    api = token_client(vendor_admin, vendor_org)
    history = api.get(reverse("api:gate-history", args=[first.gate_id])).json()
    assert history["kind"] == "G3" and len(history["cells"]) == 8
    cell = history["cells"][0]
    assert [p["attempt"] for p in cell["points"]] == [1, 2]
    assert cell["bar"] and cell["points"][0]["shown"]["estimate"].endswith(" %")
    compared = api.get(reverse("api:run-compare", args=[first.pk, second.pk])).json()
    assert compared["comparable"] and len(compared["cells"]) == 8
    row = compared["cells"][0]
    assert row["change"]["low"] <= row["change"]["log_change"] <= row["change"]["high"]
    assert [arm["arm"] for arm in row["arms"]] == row["key"].split(":")[1].split("/")
    assert all(arm["before"] > 0 and arm["change"] is not None for arm in row["arms"])
    across = api.get(reverse("api:clause-history") + "?clause=nonsense").json()
    assert across["clause"] == across["choices"][0]["clause"]


def test_the_api_answers_404_for_a_run_of_another_organization(
    other_owner, other_customer_org, two_attempts
):
    first, second = two_attempts
    api = token_client(other_owner, other_customer_org)
    assert api.get(reverse("api:run-compare", args=[first.pk, second.pk])).status_code == 404
    assert api.get(reverse("api:gate-history", args=[first.gate_id])).status_code == 404


def test_a_gate_without_decisions_says_so_and_loads_no_chart_script(
    client, customer_viewer, engagement
):
    client.force_login(customer_viewer)
    gate = engagement.gates.get(kind="G3")
    html = client.get(reverse("gates:gate-history", args=[gate.pk])).content.decode()
    assert "No decision of this gate has a number yet." in html and "plotly" not in html
    across = client.get(reverse("gates:clause-history")).content.decode()
    assert "No decision you may see has a number yet." in across


def test_the_g2_history_draws_each_check_against_its_bar(
    client, customer_viewer, actor, vendor_viewer, engagement
):
    open_g3(actor, vendor_viewer, engagement)
    g2 = engagement.gates.get(kind="G2")
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:gate-history", args=[g2.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-figure="figure-history-') == 4
    assert "seconds until the offload server was healthy" in html
    assert "A/A noise floor (TTFT p50)" in html
    health = embedded(response, "figure-history-0")
    points = [y for trace in health["data"] if trace["mode"] == "markers" for y in trace["y"]]
    assert points == [40.0]  # g2_observed: healthy after 40 s
    bar = next(t for t in health["data"] if t["name"] == "bar")
    assert bar["y"][0] == 900.0  # the template's health timeout
