"""Air-gapped hosts: results uploaded by a person go through the same adapters, validity rules
and decision engine, and are kept marked as uploaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates import services
from gates.models import Artifact, Run
from gates.specs import validation as specs
from tests.contract import sign_as_both
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BENCH = json.loads(
    (FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_text()
)
METRICS = {
    name: (FIXTURES / f"vllm-metrics/er0080__metrics_vllm_0.25.1_{name}.txt").read_bytes()
    for name in ("idle", "loaded_128conc")
}
OFFLOAD_ON = b'kv_offloading_size="64.0"'


def scrapes(arm: str, offload_label_says: bytes | None = None) -> dict:
    """Real /metrics before and after; the offload arm's cache_config says offload is on
    (the captured server had none, which the validity rules would rightly refuse)."""
    before, after = METRICS["idle"], METRICS["loaded_128conc"]
    label = (
        offload_label_says
        if offload_label_says is not None
        else (OFFLOAD_ON if arm == "offload" else b'kv_offloading_size="None"')
    )
    before, after = (text.replace(b'kv_offloading_size="None"', label) for text in (before, after))
    return {
        "metrics_before": SimpleUploadedFile("before.txt", before),
        "metrics_after": SimpleUploadedFile("after.txt", after),
    }


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


def upload_run(api, gate) -> dict:
    response = api.post(reverse("api:gate-runs", args=[gate.pk]), {"upload": True}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["state"] == "running" and response.json()["host"] is None
    return response.json()


def send(api, run_id: int, **fields):
    return api.post(reverse("api:run-results", args=[run_id]), fields, format="multipart")


def bench_file(*, ttft_ms: float, throughput: float, tier: int) -> SimpleUploadedFile:
    """A real `vllm bench serve` result with the numbers of one arm (same key set)."""
    payload = {
        **BENCH,
        "max_concurrency": tier,
        "median_ttft_ms": ttft_ms,
        "output_throughput": throughput,
    }
    return SimpleUploadedFile("result.json", json.dumps(payload).encode())


def probe_file(path: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(Path(path).name, (FIXTURES / path).read_bytes())


def g1_upload(api, actor, engagement):
    """A signed G1 spec the real A100 probe files meet, an upload run on it, and those files:
    (gate, run, {probe: file})."""
    gate = engagement.gates.get(kind="G1")
    document = specs.default_spec("G1")
    document["expect"].update(
        gpu_model_pattern="A100",
        gpu_count=1,
        gpu_memory_min_gib=79,
        vllm_min="0.20.1",
        host_memory_min_gib=16,
        offload_tier={"required": False, "min_capacity_gib": None},
        free_disk_min_gib=1,
    )
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    run = upload_run(api, gate)
    uploads = {
        "gpu_nvidia": probe_file("nvidia-smi/telegraf__a100-sxm4-v12.xml"),
        "meminfo": probe_file("meminfo/debian12-firecracker-vm__proc_meminfo.txt"),
        "disk": probe_file("df/debian12-firecracker-vm__df_B1.txt"),
        "vllm_version": SimpleUploadedFile("version.txt", b"0.25.1\n"),
    }
    return gate, run, uploads


def test_a_g1_upload_of_real_tool_outputs_is_decided_by_the_engine(api, actor, engagement):
    gate, run, uploads = g1_upload(api, actor, engagement)
    for done, (probe, upload) in enumerate(uploads.items(), start=1):
        response = send(api, run["id"], kind="probe", probe=probe, file=upload)
        assert response.status_code == 201, response.json()
        assert response.json()["progress"] == {"done": done, "total": done}
    decided = api.post(reverse("api:run-decide", args=[run["id"]]))
    assert decided.status_code == 200, decided.json()
    decision = gate.decisions.get()
    rows = {row["check"]: row for row in decision.clauses}
    assert rows["gpu_model"]["ok"] and rows["gpu_count"]["ok"] and rows["vllm_min"]["ok"]
    assert Artifact.objects.filter(run_id=run["id"], uploaded=True).count() == 4
    assert Run.objects.get(pk=run["id"]).outcome == "completed"


def test_an_unreadable_probe_file_is_refused_naming_the_file(api, engagement):
    run = upload_run(api, engagement.gates.get(kind="G1"))
    response = send(
        api,
        run["id"],
        kind="probe",
        probe="gpu_nvidia",
        file=SimpleUploadedFile("smi.xml", b"<not-nvidia/>"),
    )
    assert response.status_code == 400
    assert response.json()["field"] == "file" and "smi.xml" in response.json()["detail"]
    assert not Artifact.objects.filter(run_id=run["id"]).exists()


def g3_upload_gate(
    actor,
    vendor_viewer,
    engagement,
    host,
    passed=("G1", "G2"),
    acknowledged_underpowered=False,
    min_hit_rate=0,
):
    for kind in passed:
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    document = specs.default_spec("G3")
    document.update(tiers=[8], repetitions={"min": 4, "max": 4})
    document["arms"] = {"baseline": "resident", "offload": "offload"}
    document["clauses"] = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        }
    ]
    document["validity"].update(require_kv_exceeds_vram=False, min_external_hit_rate=min_hit_rate)
    # Hand-made numbers with one exact ratio per cell, four repetitions: this gate proves the
    # upload path, not the power or spread rules (tests/gates/decisions hold those to account).
    # Or, to show an underpowered spec signed knowingly: its one clause claims no effect, so
    # its power at the claim is at most its error rate, and both parties acknowledge it.
    document["statistics"]["require_power"] = acknowledged_underpowered
    document["statistics"].pop("sd_floor_fraction", None)
    document["statistics"].pop("spread_level", None)
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate, acknowledge_underpowered=acknowledged_underpowered)
    return gate


def upload_cell(api, run_id, arm, repetition, **scrape_options):
    ttft, throughput = {"baseline": (1000.0, 100.0), "offload": (600.0, 140.0)}[arm]
    return send(
        api,
        run_id,
        kind="bench",
        arm=arm,
        tier=8,
        repetition=repetition,
        file=bench_file(ttft_ms=ttft * (1 + 0.02 * repetition), throughput=throughput, tier=8),
        **scrapes(arm, **scrape_options),
    )


def test_a_g3_upload_needs_every_cell_then_decides_with_intervals(
    api, actor, vendor_viewer, engagement, host
):
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host)
    run = upload_run(api, gate)
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            response = upload_cell(api, run["id"], arm, repetition)
            assert response.status_code == 201, response.json()
        if repetition == 1:
            early = api.post(reverse("api:run-decide", args=[run["id"]]))
            assert early.status_code == 409 and early.json()["error"] == "more_repetitions"
    again = send(
        api,
        run["id"],
        kind="bench",
        arm="offload",
        tier=8,
        repetition=1,
        file=bench_file(ttft_ms=1.0, throughput=1.0, tier=8),
    )
    assert again.status_code == 409 and again.json()["error"] == "already_uploaded"
    decided = api.post(reverse("api:run-decide", args=[run["id"]]))
    assert decided.status_code == 200
    assert decided.json()["verdict"] == "pass", gate.decisions.get().result["reasons"]
    cell = gate.decisions.get().clauses[0]
    assert 35 < cell["estimate"] < 45 and cell["low"] > 25
    measurement = Run.objects.get(pk=run["id"]).measurements.get(arm="offload", repetition=2)
    assert measurement.artifact.uploaded and measurement.server["offload_enabled"] is True


def test_an_offload_arm_whose_server_ran_without_offload_is_invalid_not_failed(
    api, actor, vendor_viewer, engagement, host
):
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host)
    run = upload_run(api, gate)
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            upload_cell(
                api, run["id"], arm, repetition, offload_label_says=b'kv_offloading_size="None"'
            )
    assert api.post(reverse("api:run-decide", args=[run["id"]])).json()["verdict"] == "invalid"
    reasons = gate.decisions.get().result["reasons"]
    assert any("offload_enabled=False" in reason for reason in reasons)


def test_uploads_go_only_to_upload_runs_of_ones_own_organization(
    api, customer_owner, customer_org, engagement, other_engagement, host, actor, vendor_viewer
):
    driven = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    response = send(api, driven.pk, kind="health", seconds=3)
    assert response.status_code == 409
    foreign = upload_run(api, other_engagement.gates.get(kind="G1"))
    customer = token_client(customer_owner, customer_org, scopes=["run"])
    assert send(customer, foreign["id"], kind="health", seconds=3).status_code == 404


def pass_gate(actor, viewer, engagement, kind, host):
    sign_as_both(engagement.gates.get(kind=kind))
    run = services.run_create(
        actor=actor, viewer=viewer, gate=engagement.gates.get(kind=kind), host=host
    )
    services.run_claim(run_id=run.pk)
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": []})


def test_a_retried_upload_with_its_idempotency_key_is_recorded_once(api, engagement):
    run = upload_run(api, engagement.gates.get(kind="G1"))
    url = reverse("api:run-results", args=[run["id"]])

    def upload(content: bytes):
        fields = {"kind": "probe", "probe": "vllm_version"}
        fields["file"] = SimpleUploadedFile("version.txt", content)
        return api.post(url, fields, format="multipart", HTTP_IDEMPOTENCY_KEY="up-1")

    first, again = upload(b"0.25.1\n"), upload(b"0.25.1\n")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Artifact.objects.filter(run_id=run["id"]).count() == 1
    # Same fields, another file: the body's file content is part of what the key promises.
    assert upload(b"0.26.0\n").status_code == 422
