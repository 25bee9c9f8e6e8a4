"""An upload run that names its profile: the side services' pages sent with each bench cell
are read as the bench step reads its scrapes, so a customer who benched an LMCache deployment
themselves proves hits by LMCache's own counters, and the evidence bundle verifies."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.models import Artifact, Run
from tests.gates.services.test_uploads import bench_file, g3_upload_gate, scrapes, send
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
LMCACHE = Path(__file__).resolve().parents[2] / "fixtures" / "lmcache-metrics"
LMCACHE_RUN = {"upload": True, "profile": "simhost", "parameters": {"offload_backend": "lmcache"}}
# tests/fixtures/lmcache-metrics/PROVENANCE.md: 36704 of 55204 tokens looked up were hit.
LMCACHE_RATE = 36704 / 55204


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


def page(name: str) -> bytes:
    return (LMCACHE / f"simhost__{name}.txt").read_bytes()


def lmcache_scrapes(*, drop: str | None = None) -> dict:
    """The offload arm's engine pages and LMCache's, captured around one simhost bench."""
    files = {
        "metrics_before": page("vllm_offload_lmcache_before"),
        "metrics_after": page("vllm_offload_lmcache_after"),
        "lmcache_metrics_before": page("lmcache_server_before"),
        "lmcache_metrics_after": page("lmcache_server_after"),
    }
    return {
        name: SimpleUploadedFile(f"{name}.txt", content)
        for name, content in files.items()
        if name != drop
    }


def start(api, gate, body: dict):
    return api.post(reverse("api:gate-runs", args=[gate.pk]), body, format="json")


def upload_cell(api, run_id: int, arm: str, repetition: int, pages: dict):
    ttft, throughput = {"baseline": (1000.0, 100.0), "offload": (600.0, 140.0)}[arm]
    result = bench_file(ttft_ms=ttft * (1 + 0.02 * repetition), throughput=throughput, tier=8)
    fields = {"kind": "bench", "arm": arm, "tier": 8, "repetition": repetition, "file": result}
    return send(api, run_id, **fields, **pages)


def lmcache_gate(actor, vendor_viewer, engagement, host):
    return g3_upload_gate(actor, vendor_viewer, engagement, host, min_hit_rate=0.5)


def test_an_upload_naming_an_lmcache_profile_proves_hits_by_lmcaches_counters(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    response = start(api, gate, LMCACHE_RUN)
    assert response.status_code == 202, response.json()
    run = response.json()
    assert run["profile"]["name"] == "simhost"
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            pages = lmcache_scrapes() if arm == "offload" else scrapes(arm)
            response = upload_cell(api, run["id"], arm, repetition, pages)
            assert response.status_code == 201, response.json()
    decided = api.post(reverse("api:run-decide", args=[run["id"]]))
    assert decided.json()["verdict"] == "pass", gate.decisions.get().result["reasons"]
    stored = Run.objects.get(pk=run["id"])
    for measurement in stored.measurements.filter(arm="offload"):
        assert measurement.server["hit_proof"] == "lmcache"
        facts = measurement.server["side_services"]["lmcache"]
        assert facts["lookup_hit_rate"] == pytest.approx(LMCACHE_RATE)
        assert facts["hit_l1_tokens"] == facts["hit_tokens"] == 36704
    assert "side_services" not in stored.measurements.filter(arm="baseline").first().server
    kept = Artifact.objects.filter(run=stored, tool="lmcache-metrics", uploaded=True)
    assert set(kept.filter(name__startswith="offload-c8-r2/").values_list("name", flat=True)) == {
        "offload-c8-r2/lmcache-metrics-before.txt",
        "offload-c8-r2/lmcache-metrics-after.txt",
    }
    decision = gate.decisions.get()
    hit_checks = [c for c in decision.result["validity"] if c["check"] == "external_hit_rate"]
    assert len(hit_checks) == 4
    assert all(c["ok"] and "lmcache lookup hit rate 0.665" in c["reason"] for c in hit_checks)
    assert [c["observed"] for c in hit_checks] == [pytest.approx(LMCACHE_RATE)] * 4
    report = verify_bundle(bundle_for_decision(decision)[0])
    assert report.ok, report.problems


def test_the_hit_rate_validity_reads_is_lmcaches_not_the_engines(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    run = start(api, gate, LMCACHE_RUN).json()
    # The engine's pages: a real vLLM 0.25.1 server's, whose external prefix cache counted
    # nothing (its own hit rate is not reported); LMCache's pages say 0.665.
    pages = {**lmcache_scrapes(), **scrapes("offload")}
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            response = upload_cell(
                api, run["id"], arm, repetition, pages if arm == "offload" else scrapes(arm)
            )
            assert response.status_code == 201, response.json()
            pages = {**lmcache_scrapes(), **scrapes("offload")}  # files are read once
    decided = api.post(reverse("api:run-decide", args=[run["id"]]))
    assert decided.json()["verdict"] == "pass", gate.decisions.get().result["reasons"]
    offload = Run.objects.get(pk=run["id"]).measurements.filter(arm="offload")
    assert all(m.server["external_hit_rate"] is None for m in offload)
    validity = gate.decisions.get().result["validity"]
    hit_checks = [c for c in validity if c["check"] == "external_hit_rate"]
    assert [c["observed"] for c in hit_checks] == [pytest.approx(LMCACHE_RATE)] * 4


@pytest.mark.parametrize(
    "missing", ["lmcache_metrics_before", "lmcache_metrics_after", "metrics_before"]
)
def test_a_missing_page_of_the_hit_proof_is_a_400_naming_the_field(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
    missing,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    run = start(api, gate, LMCACHE_RUN).json()
    response = upload_cell(api, run["id"], "offload", 1, lmcache_scrapes(drop=missing))
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == missing
    assert not Artifact.objects.filter(run_id=run["id"]).exists()


def test_a_page_of_a_service_the_profile_does_not_run_is_a_400_naming_it(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    # The simhost profile's own default is offload_backend native: no LMCache beside vLLM.
    run = start(api, gate, {"upload": True, "profile": "simhost"}).json()
    response = upload_cell(api, run["id"], "offload", 1, lmcache_scrapes())
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == "lmcache_metrics_before"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"upload": True, "profile": "no-such-profile"}, "profile"),
        ({"upload": True, "profile": "simhost", "parameters": {"offload_backend": "x"}}, None),
        ({"upload": True, "parameters": {"offload_backend": "lmcache"}}, "parameters"),
    ],
)
def test_an_unknown_profile_or_bad_parameters_are_a_400_naming_the_field(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
    body,
    field,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    response = start(api, gate, body)
    assert response.status_code == 400, response.json()
    said = response.json()
    assert (said.get("field") or next(iter(said))) == (field or "parameters.offload_backend")
    assert not gate.runs.exists()


def test_an_upload_without_a_profile_reads_no_side_service(
    api,
    actor,
    vendor_viewer,
    engagement,
    host,
):
    gate = lmcache_gate(actor, vendor_viewer, engagement, host)
    run = start(api, gate, {"upload": True}).json()
    assert run["profile"] is None
    assert upload_cell(api, run["id"], "offload", 1, lmcache_scrapes()).status_code == 201
    stored = Run.objects.get(pk=run["id"])
    assert stored.profile_snapshot is None and stored.upload_parameters == {}
    server = stored.measurements.get().server
    assert "side_services" not in server and "hit_proof" not in server
    assert not Artifact.objects.filter(run=stored, tool="lmcache-metrics").exists()
