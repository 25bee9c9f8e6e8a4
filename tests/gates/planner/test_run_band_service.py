"""A planned G3 run records its predicted TTFT band once, from the host's accepted inventory and
the KV cache size the engagement's G2 server reported; after the decision its API detail and
page show each tier's measurement beside the band."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.models import RunStep
from gates.services.runs import predictions
from tests.contract import sign_as_both
from tests.gates.services.test_uploads import pass_gate
from tests.gates.test_tenancy import token_client
from tests.simhosts import g3_spec

pytestmark = pytest.mark.django_db
H100X8 = {"gpu_models": ["NVIDIA H100 80GB HBM3"], "gpu_count": 8}


@pytest.fixture
def planned_run(actor, vendor_viewer, customer_org, host, monkeypatch):
    # G1's accepted inventory comes from its probes on a host; here G1 is passed without them.
    monkeypatch.setattr(predictions, "accepted_inventory", lambda engagement: H100X8)
    engagement = services.engagement_create(
        actor=actor, organization=customer_org, title="band", model_name="Qwen3-Coder-480B-sim"
    )
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    g2_run = engagement.gates.get(kind="G2").runs.get()
    cache = {"num_gpu_blocks": 4096, "block_size": 16}  # what its server said at start
    RunStep.objects.create(
        run=g2_run, position=1, name="serve offload", detail={"progress": {"cache_config": cache}}
    )
    gate = engagement.gates.get(kind="G3")
    services.gate_spec_update(actor=actor, gate=gate, document=g3_spec(tiers=[16]))
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    services.run_ttft_prediction_record(run_id=run.pk)
    return run, g2_run


def test_creating_a_g3_run_pokes_its_prediction_beside_the_run(
    actor, vendor_viewer, customer_org, host, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(services.pokes, "send", lambda name, *args: sent.append((name, *args)))
    engagement = services.engagement_create(
        actor=actor, organization=customer_org, title="pokes", model_name="m"
    )
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    services.gate_spec_update(actor=actor, gate=gate, document=g3_spec(tiers=[16]))
    sign_as_both(gate)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    assert ("runners.predict_run_ttft", run.pk) in sent and ("runners.advance_run", run.pk) in sent


def test_a_planned_g3_run_stores_its_band_once(planned_run, monkeypatch):
    run, g2_run = planned_run
    run.refresh_from_db()
    (tier,) = run.predicted_ttft["predicted"]
    assert tier["concurrency"] == 16 and tier["low"] < tier["high"] < 0
    assert (
        f"65,536 tokens of GPU KV cache (as the server reported it in run #{g2_run.pk})"
        in (run.predicted_ttft["assumes"])
    )
    monkeypatch.setattr(predictions, "predict_run_band", pytest.fail)
    services.run_ttft_prediction_record(run_id=run.pk)  # recorded: not predicted again


def test_the_detail_and_the_page_show_measured_beside_predicted(
    planned_run, vendor_admin, vendor_org
):
    run, _ = planned_run
    run.refresh_from_db()
    low = run.predicted_ttft["predicted"][0]["low"]
    outside = {"metric": "ttft_p50", "compare": "offload/baseline", "tier": 16}
    outside["ratio"] = {"estimate": 1 + low - 0.1}
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": [outside]})

    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    detail = api.get(reverse("api:run-detail", args=[run.pk])).json()["predicted_ttft_change"]
    (row,) = detail["tiers"]
    assert detail["state"] == "predicted" and row["inside"] is False
    assert row["measured"] == pytest.approx(low - 0.1)

    client = Client()
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert "TTFT saving: predicted and measured" in page
    assert f"at c=16, outside the predicted {row['band_text']}" in page
    chart = re.search(r'<script id="figure-predicted-ttft" type="application/json">(.*?)</', page)
    assert chart, "the band and the measured change as a chart"
    band, measured = json.loads(chart.group(1))["data"]
    assert band["x"] == measured["x"] == ["c=16"]
    assert measured["y"] == [pytest.approx((low - 0.1) * 100)]
    assert "vendor/plotly.min.js" in page


def test_a_run_whose_model_is_unknown_records_why(planned_run):
    run, _ = planned_run
    engagement = run.gate.engagement
    engagement.model_name = "in-house-model"
    engagement.save(update_fields=["model_name"])
    type(run).objects.filter(pk=run.pk).update(predicted_ttft=None)  # as if not planned yet
    run.refresh_from_db()
    services.run_ttft_prediction_record(run_id=run.pk)
    run.refresh_from_db()
    assert run.predicted_ttft == {
        "predicted": None,
        "reason": "the engagement's model names no planner preset and no planner inputs are saved",
    }


def test_a_lost_poke_is_swept_and_a_failing_model_records_why(planned_run, monkeypatch):
    run, _ = planned_run
    long_ago = timezone.now() - predictions.PREDICT_AFTER - timedelta(seconds=1)
    type(run).objects.filter(pk=run.pk).update(predicted_ttft=None, created_at=long_ago)
    assert run.pk in services.runs_to_predict()

    def broken(inputs):
        raise ZeroDivisionError("a bug in the model")

    monkeypatch.setattr(predictions, "predict_run_band", broken)
    services.run_ttft_prediction_record(run_id=run.pk)  # the worker survives it
    run.refresh_from_db()
    assert run.predicted_ttft == {
        "predicted": None,
        "reason": "the performance model failed (worker log)",
    }
    assert run.pk not in services.runs_to_predict()
