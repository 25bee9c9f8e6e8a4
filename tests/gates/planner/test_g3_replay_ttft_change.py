"""G3 on a replayed trace: each offload cell's measured TTFT change over its baseline arm (the
ratio the clause judges) against the planner's paired band. Advisory: on the gate and run pages,
the report and the REST gate read, never the verdict; the band travels in the decision context,
so the offline verifier decides the rows again from the bundle's decision/context.json."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from gates.evidence import bundle_for_decision, layout
from gates.evidence.verify import verify_bundle
from gates.services.runs import evaluation
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.planner.test_g3_replay_band import api, decided_upload
from tests.gates.planner.test_g3_replay_ttft_band import PREDICTED
from tests.gates.services.test_uploads import g3_upload_gate

pytestmark = pytest.mark.django_db
__all__ = ["api"]

# decided_upload's offload cells measure 0.6 of the baseline's TTFT p50 in every repetition:
# below a predicted change of 0.7 to 0.9.
# The p99 band rides along (the clause judges the p50, so the row is the p50's).
CHANGED = [
    {
        **PREDICTED[0],
        "changes": {"offload/resident": [0.7, 0.9]},
        "metric_changes": {"ttft_p99": {"offload/resident": [0.4, 0.8]}},
    }
]


@pytest.fixture
def changed_g3(api, actor, vendor_viewer, engagement, host, monkeypatch):
    """A decided G3 whose context carries the planner's TTFT change band."""
    monkeypatch.setattr(evaluation, "g3_ttft_predictions", lambda run, gib: CHANGED)
    return decided_upload(api, g3_upload_gate(actor, vendor_viewer, engagement, host))


def test_the_offload_cell_s_change_is_held_to_the_band_and_the_bundle_carries_it(changed_g3):
    result = changed_g3.result
    assert result["inputs"]["context"]["replay_ttft_predictions"] == CHANGED
    (row,) = result["replay_ttft_changes"]
    assert (row["arm"], row["baseline"], row["tier"]) == ("offload", "baseline", 8)
    assert row["metric"] == "ttft_p50" and row["cause"].startswith("TTFT p50 offload / baseline")
    assert row["measured_ratio"] == pytest.approx(0.6) and row["position"] == "below"
    assert row["verdict"] == "inconclusive" and "a model error, not a tier defect" in row["cause"]
    assert changed_g3.verdict == "pass"
    data, _ = bundle_for_decision(changed_g3)
    report = verify_bundle(data)
    assert report.ok, report.problems

    def wider(members):
        edited_json(
            members,
            layout.CONTEXT,
            lambda context: context["replay_ttft_predictions"][0]["changes"].update(
                {"offload/resident": [0.5, 0.9]}
            ),
        )

    problems = verify_bundle(resealed(data, wider)).problems
    assert any(
        p.startswith("decision/decision.json result.replay_ttft_changes[0].band_low: recorded")
        for p in problems
    ), problems

    def renamed(members):  # the row's statistic is recorded and decided again
        edited_json(
            members,
            layout.DECISION,
            lambda decision: decision["result"]["replay_ttft_changes"][0].update(
                {"metric": "ttft_p99"}
            ),
        )

    problems = verify_bundle(resealed(data, renamed)).problems
    assert any("result.replay_ttft_changes[0].metric: recorded" in p for p in problems), problems


def test_the_change_row_is_on_the_gate_and_run_pages_the_report_and_the_api(
    changed_g3, vendor_admin, api
):
    (row,) = changed_g3.result["replay_ttft_changes"]
    (run,) = changed_g3.runs.all()
    client = Client()
    client.force_login(vendor_admin)
    for page in (
        reverse("gates:gate-detail", args=[changed_g3.gate_id]),
        reverse("gates:run-detail", args=[run.pk]),
    ):
        html = client.get(page).content.decode()
        section = html[html.index('id="replay-ttft-changes"') :]
        assert "below the band" in section and "0.700 (-30.0 %) to 0.900 (-10.0 %)" in section
        assert "offload/baseline c=8" in section and "advisory: never the verdict" in section
        assert 'data-metric="ttft_p50"' in section and "<td>ttft_p50</td>" in section
    report = client.get(reverse("gates:gate-report", args=[changed_g3.gate_id]))
    assert "replay_ttft_change offload/baseline ttft_p50, c=8" in report.content.decode()
    body = api.get(reverse("api:gate-detail", args=[changed_g3.gate_id])).json()
    assert body["latest_decision"]["replay_ttft_changes"] == [row]


def test_a_context_from_before_the_change_bands_shows_no_change_table(
    api, actor, vendor_viewer, engagement, host, monkeypatch, vendor_admin
):
    monkeypatch.setattr(evaluation, "g3_ttft_predictions", lambda run, gib: PREDICTED)
    decision = decided_upload(api, g3_upload_gate(actor, vendor_viewer, engagement, host))
    assert "replay_ttft_changes" not in decision.result
    client = Client()
    client.force_login(vendor_admin)
    html = client.get(reverse("gates:gate-detail", args=[decision.gate_id])).content.decode()
    assert 'id="replay-ttft-bands"' in html and 'id="replay-ttft-changes"' not in html
    body = api.get(reverse("api:gate-detail", args=[decision.gate_id])).json()
    assert "replay_ttft_changes" not in body["latest_decision"]
