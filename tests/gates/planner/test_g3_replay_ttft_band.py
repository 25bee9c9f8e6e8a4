"""G3 on a replayed trace: each offload cell's measured TTFT p50 against the planner's run of
the replay (gates.planner.replay_band). Advisory: on the gate and run pages, the report and the
REST gate read, never the verdict; the bands travel in the decision context, so the offline
verifier decides the rows again from the bundle's decision/context.json."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from gates.evidence import bundle_for_decision, layout
from gates.evidence.verify import verify_bundle
from gates.services.runs import evaluation
from gates.services.runs.evaluation import run_decision_context
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.planner.test_g3_replay_band import api, decided_upload, replayed_g3
from tests.gates.services.test_uploads import g3_upload_gate

pytestmark = pytest.mark.django_db
__all__ = ["api", "replayed_g3"]

# decided_upload's offload cells measure 612 to 624 ms (600 ms x 1.02 .. 1.08): mean 630 ms
# is above a band of 400 to 500 ms.
PREDICTED = [
    {
        "tier": 8,
        "arms": {"offload": [400.0, 500.0], "resident": [550.0, 650.0]},
        "modelled": 1000,
        "kept": 3993,
        "capped": True,
        "refused": 0,
        "assumes": "the first 1,000 requests of 3,993 (the model's cap)",
    }
]


@pytest.fixture
def predicted_g3(api, actor, vendor_viewer, engagement, host, monkeypatch):
    """A decided G3 whose context carries the planner's TTFT band as the service puts it."""
    monkeypatch.setattr(evaluation, "g3_ttft_predictions", lambda run, gib: PREDICTED)
    return decided_upload(api, g3_upload_gate(actor, vendor_viewer, engagement, host))


def test_the_offload_cell_is_held_to_the_ttft_band_and_the_bundle_carries_it(predicted_g3):
    result = predicted_g3.result
    assert result["inputs"]["context"]["replay_ttft_predictions"] == PREDICTED
    (row,) = result["replay_ttft_bands"]
    assert (row["arm"], row["tier"], row["position"]) == ("offload", 8, "above")
    assert row["verdict"] == "inconclusive" and "a model error, not a tier defect" in row["cause"]
    assert predicted_g3.verdict == "pass"
    data, _ = bundle_for_decision(predicted_g3)
    report = verify_bundle(data)
    assert report.ok, report.problems

    def wider(members):
        edited_json(
            members,
            layout.CONTEXT,
            lambda context: context["replay_ttft_predictions"][0]["arms"].update(
                offload=[100.0, 1000.0]
            ),
        )

    problems = verify_bundle(resealed(data, wider)).problems
    assert any(
        p.startswith("decision/decision.json result.replay_ttft_bands[0].band_low_ms: recorded")
        for p in problems
    ), problems


def test_the_row_is_on_the_gate_and_run_pages_the_report_and_the_api(
    predicted_g3, vendor_admin, api
):
    (row,) = predicted_g3.result["replay_ttft_bands"]
    (run,) = predicted_g3.runs.all()
    client = Client()
    client.force_login(vendor_admin)
    for page in (
        reverse("gates:gate-detail", args=[predicted_g3.gate_id]),
        reverse("gates:run-detail", args=[run.pk]),
    ):
        html = client.get(page).content.decode()
        section = html[html.index('id="replay-ttft-bands"') :]
        assert "above the band" in section and "400.0 to 500.0 ms" in section, page
        assert "advisory: never the verdict" in section and "offload c=8" in section, page
    report = client.get(reverse("gates:gate-report", args=[predicted_g3.gate_id]))
    assert "replay_ttft_band offload, c=8" in report.content.decode()
    body = api.get(reverse("api:gate-detail", args=[predicted_g3.gate_id])).json()
    assert body["latest_decision"]["replay_ttft_bands"] == [row]


def test_an_uploaded_replay_without_a_replay_step_says_why_it_has_no_band(replayed_g3):
    (run,) = replayed_g3.runs.all()
    (band,) = run_decision_context(run)["replay_ttft_predictions"]
    assert band["tier"] == 8 and "missing" in band, band
    (row,) = replayed_g3.result["replay_ttft_bands"]
    assert row["cause"] == f"no TTFT band from the planner at c=8: {band['missing']}"
