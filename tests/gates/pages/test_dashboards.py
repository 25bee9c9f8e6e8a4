"""Gate and run pages embed the figures of the latest decision and of the run's measurements,
recorded through the services and decided by the engine; other organizations still get 404. A
run's per-request records are plotted per tier from the measurements the page already reads."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from gates import services
from gates.decisions import decide_g1, decide_g2, decide_g3
from gates.models import Decision, Gate, Measurement, Run
from gates.pages.dashboards import chart_metrics, gate_dashboard, run_panels
from runners.program.perform import StepProgress
from tests.contract import sign_as_both
from tests.gates.charts.test_charts import (
    CONTEXT,
    estimate_traces,
    synthetic_measurements,
    template,
)

GIB = 2**30
# What a host that meets the G1 template reports (an "80 GB" H100 is 81559 MiB).
G1_FACTS = {
    "gpu_inventory": {
        "tool": "gpu-inventory",
        "source": "nvidia-smi-xml",
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "rocm_version": None,
        "gpus": [
            {"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0}
            for i in range(8)
        ],
    },
    "vllm_version": "0.20.1",
    "host_memory_bytes": 2048 * GIB,
    "free_disk_bytes": 3000 * GIB,
    "kernel": "6.8.0-49-generic",
    "offload_tier": {"present": True, "capacity_gib": 1024.0},
}


def g2_observed(a_b: list[tuple[float, float]], hit_rate: float = 0.63) -> dict:
    def run(ttft: float) -> dict:
        return {"completed": 32, "failed": 0, "ttft_ms": {"median": ttft}}

    return {
        "health": {"healthy": True, "seconds": 40.0},
        "equivalence": [{"prompt": i, "reference": "x", "offload": "x"} for i in range(5)],
        "external_hit_rate": hit_rate,
        "aa_pairs": [
            {"repetition": i, "a": run(a), "b": run(b)} for i, (a, b) in enumerate(a_b, start=1)
        ],
    }


def uploaded_run(actor, viewer, gate: Gate) -> Run:
    """A run of uploaded results (running from the start): no host and no broker message, as
    for an air-gapped host, so these tests need no worker."""
    sign_as_both(gate)
    return services.run_create(
        actor=actor, viewer=viewer, gate=gate, host=None, source=Run.Source.UPLOAD
    )


def decide_uploaded(actor, viewer, gate: Gate, decide) -> Decision:
    run = uploaded_run(actor, viewer, gate)
    return services.decision_record(run_id=run.pk, result=decide(gate.current_spec.document))


def open_g3(actor, viewer, engagement) -> Gate:
    """Pass G1 and G2 through the engine, which opens G3 (and sends no alert)."""
    g1, g2 = engagement.gates.get(kind="G1"), engagement.gates.get(kind="G2")
    assert decide_uploaded(actor, viewer, g1, lambda s: decide_g1(s, G1_FACTS)).verdict == "pass"
    aa = g2_observed([(1000.0, 1010.0), (1030.0, 1005.0), (990.0, 1000.0)])
    assert decide_uploaded(actor, viewer, g2, lambda s: decide_g2(s, aa)).verdict == "pass"
    return engagement.gates.get(kind="G3")


def record_measurements(run: Run, rows: list[dict], planned: int | None = None) -> None:
    """Record rows as a driver does: one bench step each, through a RunSession."""
    session = services.RunSession.claim(run.pk)
    steps = [
        {"name": f"bench {r['arm']} c={r['tier']} r{r['repetition']}", "kind": "bench"}
        for r in rows
    ]
    extra = [{"name": f"later step {i}", "kind": "bench"} for i in range(len(rows), planned or 0)]
    session.append_steps(steps + extra)
    for row in rows:
        step, _ = session.next_step()
        session.record(step, StepProgress(True, {}, [], measurement=row, log=f"{step['name']}\n"))
    session.release()


def record_g3_decision(actor, viewer, engagement, repetitions: int = 8) -> Decision:
    """A G3 run with synthetic measurements, decided by the engine over what was recorded."""
    gate = open_g3(actor, viewer, engagement)
    run = uploaded_run(actor, viewer, gate)
    rows = synthetic_measurements(repetitions)
    record_measurements(run, rows)
    result = decide_g3(gate.current_spec.document, rows, CONTEXT)
    return services.decision_record(run_id=run.pk, result=result)


def embedded(response, key: str) -> dict:
    match = re.search(
        rf'<script id="{key}" type="application/json">(.*?)</script>', response.content.decode()
    )
    assert match, f"no figure {key} on the page"
    return json.loads(match.group(1))


@pytest.mark.django_db
def test_a_g3_gate_page_embeds_the_forest_plot_above_the_clause_table_and_the_measurements(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:gate-detail", args=[decision.gate_id]))
    assert response.status_code == 200
    forest = embedded(response, "figure-forest")
    points = [x for trace in estimate_traces(forest) for x in trace["x"]]
    assert sorted(points) == sorted(cell["estimate"] for cell in decision.result["clauses"])
    measurements = embedded(response, "figure-measurements")
    assert len(measurements["data"]) == 3 * 3 * 2  # arms x tiers x (TTFT p50, throughput)
    html = response.content.decode()
    assert html.index('data-figure="figure-forest"') < html.index("Latest verdict by clause")
    assert html.index("Latest verdict by clause") < html.index('data-figure="figure-measurements"')
    assert "/static/vendor/plotly.min.js" in html and "/static/gates/charts.js" in html


@pytest.mark.django_db
def test_a_customer_of_another_organization_still_gets_404_for_the_gate_and_the_run(
    client, actor, vendor_viewer, engagement, other_owner
):
    decision = record_g3_decision(actor, vendor_viewer, engagement, repetitions=3)
    client.force_login(other_owner)
    assert client.get(reverse("gates:gate-detail", args=[decision.gate_id])).status_code == 404
    run = decision.runs.get()
    assert client.get(reverse("gates:run-detail", args=[run.pk])).status_code == 404


@pytest.mark.django_db
def test_a_page_without_figures_does_not_load_plotly(client, engagement, customer_viewer):
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:gate-detail", args=[engagement.gates.get(kind="G3").pk]))
    html = response.content.decode()
    assert "data-figure" not in html and "plotly.min.js" not in html


@pytest.mark.django_db
def test_a_g1_decision_keeps_its_check_table_and_draws_no_chart(actor, vendor_viewer, engagement):
    g1 = engagement.gates.get(kind="G1")
    decide_uploaded(actor, vendor_viewer, g1, lambda s: decide_g1(s, G1_FACTS))
    assert not gate_dashboard(g1).has_figures


@pytest.mark.django_db
def test_a_g2_gate_page_shows_the_aa_noise_floor_and_the_hit_rate(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    open_g3(actor, vendor_viewer, engagement)
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:gate-detail", args=[engagement.gates.get(kind="G2").pk]))
    noise = embedded(response, "figure-noise-floor")
    assert [trace["name"] for trace in noise["data"]][:2] == ["run A", "run B"]
    assert noise["data"][0]["y"] == [1000.0, 1030.0, 990.0]
    hit = embedded(response, "figure-hit-rate")
    assert hit["data"][0]["x"] == [pytest.approx(63.0)]


@pytest.mark.django_db
def test_a_run_page_shows_its_measurements_once_it_has_any(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    gate = open_g3(actor, vendor_viewer, engagement)
    run = uploaded_run(actor, vendor_viewer, gate)
    client.force_login(customer_viewer)
    url = reverse("gates:run-detail", args=[run.pk])
    assert "data-figure" not in client.get(url).content.decode()
    record_measurements(run, synthetic_measurements(2), planned=72)
    response = client.get(url)
    figure = embedded(response, "figure-run-measurements")
    assert sum(len(trace["x"]) for trace in figure["data"]) == 2 * 9 * 2  # reps x cells x metrics
    assert 'value="18"' in response.content.decode()  # progress 18 of 72 steps
    assert len(run_panels(run)) == 1


def test_runs_plot_their_clause_metrics_topped_up_to_two():
    assert chart_metrics(template("G3")) == ["ttft_p50", "output_throughput"]
    assert chart_metrics(template("G2")) == ["ttft_p50", "output_throughput"]
    tpot = {"clauses": [{"metric": "tpot_p99"}, {"metric": "made_up"}]}
    assert chart_metrics(tpot) == ["tpot_p99", "ttft_p50"]
    many = {
        "clauses": [
            {"metric": m} for m in ("ttft_p50", "ttft_p99", "itl_p50", "e2el_p50", "tpot_p50")
        ]
    }
    assert len(chart_metrics(many)) == 4
    assert (
        chart_metrics(None) == chart_metrics({"clauses": "x"}) == ["ttft_p50", "output_throughput"]
    )


@pytest.mark.django_db
def test_gate_and_run_pages_open_with_what_happened_and_who_acts_next(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    client.force_login(customer_viewer)
    gate_page = client.get(reverse("gates:gate-detail", args=[decision.gate_id])).content.decode()
    summary = gate_page[gate_page.index('id="summary"') :].split("</section>", 1)[0]
    assert gate_page.index('id="summary"') < gate_page.index('id="clauses"')
    assert "What happened" in summary and 'data-who="' in summary
    if decision.verdict in ("fail", "inconclusive"):
        deciding = next(c for c in decision.clauses if c["verdict"] == decision.verdict)
        assert f"at c={deciding['tier']}" in summary and "bar " in summary
    run = decision.runs.first()
    run_page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert f"This run&#x27;s verdict: {decision.verdict}" in run_page


# --- per-request plots: from the measurements the page reads, never the raw files -----------


def replay_metrics(ttft: list[float], late_ms: float = 2.0) -> dict:
    at = [float(i) for i in range(len(ttft))]
    per_request = {
        "count": len(ttft),
        "errors": 0,
        "sent_s": [a + late_ms / 1000 for a in at],
        "send_at_s": at,
        "ttft_ms": ttft,
        "e2el_ms": [t + 50 for t in ttft],
    }
    fidelity = {"valid": True, "reasons": [], "requests": len(ttft), "sent": len(ttft)}
    fidelity |= {"arrival_error_ms": {"p50": late_ms, "p99": late_ms, "max": late_ms}}
    fidelity |= {"prompt_token_mismatches": 0, "output_token_mismatches": 0}
    fidelity |= {"arrival_bar_ms": 10.0}
    return {
        "completed": len(ttft),
        "ttft_ms": {"median": sorted(ttft)[len(ttft) // 2]},
        "per_request": per_request,
        "replay": {"digest": "d" * 64, "fidelity": fidelity},
    }


def measure(run: Run, cells: list[tuple[str, int, int]], *, without: str = "") -> None:
    for arm, tier, repetition in cells:
        metrics = {"completed": 3} if arm == without else replay_metrics([10.0, 30.0, 20.0])
        Measurement.objects.create(
            run=run, arm=arm, tier=tier, repetition=repetition, metrics=metrics
        )


@pytest.fixture
def g3_run(actor, vendor_viewer, engagement) -> Run:
    return uploaded_run(actor, vendor_viewer, open_g3(actor, vendor_viewer, engagement))


@pytest.mark.django_db
def test_each_tier_gets_its_per_request_plots_with_arms_overlaid(client, g3_run, customer_viewer):
    measure(
        g3_run,
        [("baseline", 8, 1), ("offload", 8, 1), ("offload", 8, 2), ("recompute", 8, 1)],
        without="recompute",
    )
    client.force_login(customer_viewer)
    response = client.get(reverse("gates:run-detail", args=[g3_run.pk]))
    page = response.content.decode()

    scatter = embedded(response, "figure-requests-c8-ttft")
    assert [trace["name"] for trace in scatter["data"]] == ["baseline", "offload"]
    assert len(scatter["data"][1]["y"]) == 6  # two repetitions, pooled
    notes = scatter["layout"]["annotations"][0]["text"]
    assert "no per-request TTFTs kept for recompute" in notes
    ecdf = embedded(response, "figure-requests-c8-ecdf")
    assert ecdf["data"][0]["x"] == [10.0, 20.0, 30.0]
    arrival = embedded(response, "figure-requests-c8-arrival")
    assert sorted(shape["y0"] for shape in arrival["layout"]["shapes"]) == [-10.0, 10.0]
    assert "TTFT by send time, c=8" in page and "Arrival-time error of the replay, c=8" in page
    assert "TTFT by send time, c=8 in numbers" in page  # the numbers under the figure
    assert "Trace replay fidelity" in page  # each cell's verdict stays


@pytest.mark.django_db
def test_a_run_without_per_request_records_has_no_request_plots(client, g3_run, customer_viewer):
    for arm in ("baseline", "offload"):
        Measurement.objects.create(
            run=g3_run, arm=arm, tier=8, repetition=1, metrics={"ttft_ms": {"median": 5.0}}
        )
    client.force_login(customer_viewer)
    page = client.get(reverse("gates:run-detail", args=[g3_run.pk])).content.decode()
    assert "figure-run-measurements" in page and "figure-requests" not in page


@pytest.mark.django_db
def test_the_run_page_costs_the_same_queries_with_one_cell_or_twenty_four(
    client, g3_run, customer_viewer, django_assert_num_queries
):
    client.force_login(customer_viewer)
    url = reverse("gates:run-detail", args=[g3_run.pk])
    measure(g3_run, [("offload", 8, 1)])
    client.get(url)  # warm the per-process caches (sessions, the service banner's probe)
    with CaptureQueriesContext(connection) as one_cell:
        assert client.get(url).status_code == 200
    cells = [
        (arm, tier, rep)
        for arm in ("baseline", "recompute")
        for tier in (4, 8, 16)
        for rep in (1, 2, 3, 4)
    ]
    measure(g3_run, cells + [("offload", tier, rep) for tier in (4, 16) for rep in (1, 2, 3, 4)])
    with django_assert_num_queries(len(one_cell.captured_queries)):
        response = client.get(url)
    assert "figure-requests-c16-arrival" in response.content.decode()
