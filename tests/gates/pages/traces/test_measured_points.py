"""The trace page's hit-ratio curve marks what this engagement's G2 and G3 runs measured
replaying the trace, at the capacity each cell ran with; the API's trace read gives the same
points. A viewer of another organization sees neither the trace nor its runs."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from gates import services
from gates.charts.traces import hit_curve_figure
from gates.history.trace_points import cell_points
from gates.models import Measurement
from tests.contract import sign_as_both
from tests.gates.planner.test_replay_hit_band import KV_PLAN, PROFILE, characterised_trace
from tests.gates.services.test_uploads import pass_gate
from tests.gates.test_tenancy import token_client
from tests.simhosts import g3_spec

LABEL = {"run": 7, "gate": "G3", "attempt": 2, "sample": 1.0}


def test_a_cell_has_its_gpu_point_and_an_offload_arm_its_tiers_point():
    # c=1 on the saved plan: a 41,233-token GPU pool; 25 GiB of DRAM holds 81,920 tokens.
    rates = {"gpu": [0.5, 0.6], "external": [0.2, 0.4]}
    gpu, tiers = cell_points(LABEL, KV_PLAN, 25.0, 1, "offload", "offload", rates)
    assert (gpu["kind"], gpu["capacity_tokens"]) == ("gpu", 41_233)
    assert gpu["hit"] == pytest.approx(0.55) and gpu["repetitions"] == 2
    # 55 % on the GPU, and the tier 30 % of the 45 % it missed: 68.5 % of input tokens.
    assert (tiers["kind"], tiers["capacity_tokens"]) == ("tiers", 81_920)
    assert tiers["hit"] == pytest.approx(0.55 + 0.3 * 0.45)
    (resident,) = cell_points(LABEL, KV_PLAN, 25.0, 1, "baseline", "resident", rates)
    assert resident["kind"] == "gpu"
    assert cell_points(LABEL, KV_PLAN, 25.0, 1, "recompute", "recompute", rates) == []
    assert cell_points(LABEL, {**KV_PLAN, "gpus": 3}, 25.0, 1, "offload", "offload", rates) == []


def test_the_figure_has_a_legend_entry_per_run_and_kind_and_names_the_run_on_hover():
    points = cell_points(LABEL, KV_PLAN, 25.0, 1, "offload", "offload", {"gpu": [0.5]})
    points += cell_points(
        {**LABEL, "run": 8, "attempt": 3, "sample": 0.5},
        KV_PLAN,
        25.0,
        1,
        "offload",
        "offload",
        {"gpu": [0.4], "external": [0.5]},
    )
    figure = hit_curve_figure(PROFILE, (), points)
    names = [trace["name"] for trace in figure["data"]]
    assert names == [
        "LRU hit ratio",
        "G3 run #2: GPU cache, measured",
        "G3 run #3: GPU cache, measured",
        "G3 run #3: GPU + offload tier, measured",
    ]
    hover = figure["data"][3]["text"][0]
    assert hover.startswith("G3 run #3, offload c=1: GPU + offload tier hit 70.0% of input")
    assert "replayed 50% of the sessions" in hover


@pytest.fixture
def measured_trace(actor, vendor_viewer, engagement, host):
    """A characterised trace replayed by a G2 hit cell (external 20 %) and a G3 at c=1 (GPU
    50 % on both arms, the offload arm's tier 40 % of what the GPU missed)."""
    trace, reference = characterised_trace(actor, engagement)
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    g3 = engagement.gates.get(kind="G3")
    workload = {"dataset": "random", "input_len": 10, "output_len": 1, "num_prompts": 40}
    document = g3_spec(workload={**workload, "seed": 5, "trace": reference}, tiers=[1])
    document["server"] = {"offload_gib": 25}
    services.gate_spec_update(actor=actor, gate=g3, document=document)
    sign_as_both(g3)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=g3, host=host)
    for arm, server in (
        ("baseline", {"prefix_cache_hit_rate": 0.5}),
        ("offload", {"prefix_cache_hit_rate": 0.5, "external_hit_rate": 0.4}),
    ):
        Measurement.objects.create(
            run=run, arm=arm, tier=1, repetition=1, metrics={}, server=server
        )
    # The passed G2's hit cell replayed the trace (its spec edited in place to say so).
    (run,) = engagement.gates.get(kind="G2").runs.all()
    document = run.spec.document
    document["offload_hit"].update(
        tier=1, workload={**document["offload_hit"]["workload"], "trace": reference}
    )
    document["server"] = {"offload_gib": 25}
    type(run.spec).objects.filter(pk=run.spec.pk).update(document=document)
    Measurement.objects.update_or_create(
        run=run,
        arm="offload_hit",
        tier=1,
        repetition=1,
        defaults={"metrics": {}, "server": {"external_hit_rate": 0.2}},
    )
    return trace


@pytest.mark.django_db
def test_the_trace_page_and_api_mark_the_measured_points(
    measured_trace, customer_owner, other_owner, customer_org, other_customer_org
):
    client = Client()
    client.force_login(customer_owner)
    html = client.get(reverse("gates:trace-detail", args=[measured_trace.pk])).content.decode()
    figure = json.loads(html.split('id="figure-curve" type="application/json">')[1].split("<")[0])
    names = [trace["name"] for trace in figure["data"]]
    assert "G2 run #1: GPU + offload tier, measured" in names
    assert "G3 run #1: GPU cache, measured" in names
    assert "G3 run #1: GPU + offload tier, measured" in names
    table = html[html.index('aria-label="Measured hit rates"') :]
    assert table.count("<tr data-run=") == 4  # G2's tier point, G3's two GPU and one tier point
    assert "offload c=1" in table and "0.700" in table  # 50 % + 40 % of the other 50 %
    api = token_client(customer_owner, customer_org, scopes=["read"])
    body = api.get(reverse("api:trace-detail", args=[measured_trace.pk])).json()
    kinds = sorted((p["gate"], p["arm"], p["kind"]) for p in body["measured"]["points"])
    assert kinds == [
        ("G2", "offload_hit", "tiers"),
        ("G3", "baseline", "gpu"),
        ("G3", "offload", "gpu"),
        ("G3", "offload", "tiers"),
    ]
    # Another organization sees neither the trace nor, through it, the runs.
    stranger = Client()
    stranger.force_login(other_owner)
    assert stranger.get(reverse("gates:trace-detail", args=[measured_trace.pk])).status_code == 404
    other = token_client(other_owner, other_customer_org, scopes=["read"])
    assert other.get(reverse("api:trace-detail", args=[measured_trace.pk])).status_code == 404


@pytest.mark.django_db
def test_without_a_saved_kv_plan_the_page_says_why_there_are_no_points(
    measured_trace, customer_owner
):
    engagement = measured_trace.engagement
    type(engagement).objects.filter(pk=engagement.pk).update(kv_plan={})
    client = Client()
    client.force_login(customer_owner)
    html = client.get(reverse("gates:trace-detail", args=[measured_trace.pk])).content.decode()
    assert "No measured points: the engagement has no saved KV plan" in html
