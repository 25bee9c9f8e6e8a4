"""G3 on a replayed trace: each offload cell's achieved external hit rate against the planner's
band for its tier, the same band function G2's hit cell uses. Advisory: shown on the gate and
run pages, the PDF report's table and the REST decision, never the verdict; the band travels
in the decision context, so the offline verifier decides the row again."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from gates import services
from gates.evidence import bundle_for_decision, layout
from gates.evidence.verify import verify_bundle
from gates.pages.report.tables import clause_table
from gates.services.runs import evaluation
from gates.services.runs.evaluation import run_decision_context
from tests.contract import sign_as_both
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.planner.test_replay_hit_band import characterised_trace
from tests.gates.services.test_uploads import (
    bench_file,
    g3_upload_gate,
    scrapes,
    send,
    upload_cell,
    upload_run,
)
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


@pytest.fixture
def replayed_g3(api, actor, vendor_viewer, engagement, host):
    """An uploaded G3 whose workload replays a characterised trace at c=8 on 25 GiB of DRAM,
    decided on four repetitions of each arm (the captured servers' counters)."""
    _, reference = characterised_trace(actor, engagement)
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host)
    document = gate.current_spec.document
    document["workload"] = {**document["workload"], "trace": reference}
    document["server"] = {**(document.get("server") or {}), "offload_gib": 25}
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    return decided_upload(api, gate)


def decided_upload(api, gate):
    """Four repetitions of each arm uploaded and decided; the offload tier served 20 %."""
    run = upload_run(api, gate)
    for repetition in (1, 2, 3, 4):
        assert upload_cell(api, run["id"], "baseline", repetition).status_code == 201
        ttft = 600.0 * (1 + 0.02 * repetition)
        cell = bench_file(ttft_ms=ttft, throughput=140.0, tier=8)
        where = {"arm": "offload", "tier": 8, "repetition": repetition}
        sent = send(api, run["id"], kind="bench", file=cell, **where, **offload_scrapes())
        assert sent.status_code == 201, sent.json()
    assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200
    return gate.decisions.get()


def offload_scrapes() -> dict:
    """The captured offload server's /metrics, its tier having served 20 % of 100,000 queried
    tokens over the bench (the capture's own counters stay at 0: it had no tier)."""
    found = scrapes("offload")
    after = found["metrics_after"].read()
    for counter, value in (("queries", b"100000.0"), ("hits", b"20000.0")):
        line = (
            f'vllm:external_prefix_cache_{counter}_total{{engine="0",model_name="opt-125m-tp2"}} '
        )
        after = after.replace(line.encode() + b"0.0", line.encode() + value)
    found["metrics_after"] = SimpleUploadedFile("after.txt", after)
    return found


def test_the_offload_cell_is_held_to_the_band_and_never_changes_the_verdict(replayed_g3):
    decision = replayed_g3
    (run,) = decision.runs.all()
    band = run_decision_context(run)["replay_external_bands"]
    # c=8 on the saved plan: the band G2's hit cell would get at the same tier.
    assert [item["tier"] for item in band] == [8] and "band" in band[0], band
    result = decision.result
    assert result["inputs"]["context"]["replay_external_bands"] == band
    (row,) = result["replay_bands"]
    assert (row["arm"], row["tier"], row["advisory"]) == ("offload", 8, True)
    # c=8 holds 64,000 tokens in flight, more than the GPU's 41,233: its cache holds 0 to
    # 41,233 tokens (F 0 to 60 %) and 25 GiB of DRAM 81,920 (F 70 %): 25 % to 70 %.
    assert row["band_low"] == pytest.approx(0.25) and row["band_high"] == pytest.approx(0.7)
    assert row["rates"] == [0.2] * 4 and row["external_hit_rate"] == pytest.approx(0.2)
    assert row["position"] == "below" and "a model error, not a tier defect" in row["cause"]
    assert [note for note in result["notes"] if note.startswith("replay_band offload c=8: ")]
    # The verdict is the clauses' own: the same spec decided without the band agrees.
    assert decision.verdict == "pass" and result["reasons"] == [
        reason for reason in result["reasons"] if not reason.startswith("replay_band")
    ]


def test_an_edited_band_or_rate_signed_again_is_named_by_the_offline_verifier(
    api, actor, vendor_viewer, engagement, host, monkeypatch
):
    # The verifier reads the band from the bundle's decision/context.json alone (it has no KV
    # plan or characterisation). The spec here is synthetic, so the bundle needs no replay
    # records; the band is put in the context as the service puts a replay's.
    band = [{"tier": 8, "band": [0.25, 0.7]}]
    monkeypatch.setattr(evaluation, "g3_external_bands", lambda run: band)
    decision = decided_upload(api, g3_upload_gate(actor, vendor_viewer, engagement, host))
    assert decision.result["replay_bands"][0]["position"] == "below"
    data, _ = bundle_for_decision(decision)
    report = verify_bundle(data)
    assert report.ok, report.problems

    def narrower(members):
        edited_json(
            members,
            layout.CONTEXT,
            lambda context: context["replay_external_bands"][0].update(band=[0.99, 1.0]),
        )

    problems = verify_bundle(resealed(data, narrower)).problems
    assert any(
        p.startswith("decision/decision.json result.replay_bands[0].band_low: recorded")
        for p in problems
    ), problems

    def rate(members):
        edited_json(
            members,
            layout.DECISION,
            lambda d: d["result"]["replay_bands"][0].update(external_hit_rate=0.5),
        )

    problems = verify_bundle(resealed(data, rate)).problems
    assert any(
        p.startswith("decision/decision.json result.replay_bands[0].external_hit_rate: recorded")
        for p in problems
    ), problems


def test_the_row_is_on_the_gate_and_run_pages_the_report_and_the_api(
    replayed_g3, vendor_admin, api
):
    (row,) = replayed_g3.result["replay_bands"]
    (run,) = replayed_g3.runs.all()
    client = Client()
    client.force_login(vendor_admin)
    shown = f"{row['band_low']:.1%} to {row['band_high']:.1%}"
    for page in (
        reverse("gates:gate-detail", args=[replayed_g3.gate_id]),
        reverse("gates:run-detail", args=[run.pk]),
    ):
        html = client.get(page).content.decode()
        section = html[html.index('id="replay-bands"') :]
        assert f"{row['position']} the band" in section and shown in section, page
        assert "advisory: never the verdict" in section and "offload c=8" in section, page
    # The report (its HTML and the PDF render one template) lists it after the clauses.
    (table_row,) = [r for r in clause_table([row]) if r.name.startswith("replay")]
    assert table_row.name == "replay_band offload, c=8" and table_row.bar == shown
    report = client.get(reverse("gates:gate-report", args=[replayed_g3.gate_id]))
    assert "replay_band offload, c=8" in report.content.decode()
    # The REST gate read: its latest decision carries the rows as decided.
    body = api.get(reverse("api:gate-detail", args=[replayed_g3.gate_id])).json()
    assert body["latest_decision"]["replay_bands"] == [row]
