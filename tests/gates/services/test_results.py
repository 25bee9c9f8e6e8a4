"""One path from a tool's output to Measurement rows: the same files fetched by a gate program
and uploaded by a person are stored alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from gates import services
from gates.models import Artifact, Measurement, Run
from gates.services.runs.results import run_result_store
from runners.program import perform as steps
from runners.program import sequence
from runners.transport.types import CommandResult, DetachedStatus, Launch
from tests.gates.services.test_uploads import pass_gate, send, upload_run
from tests.gates.test_tenancy import token_client
from tests.simhosts import g3_spec, local_simhost

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BENCH = (FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json").read_bytes()
IDLE = (FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_idle.txt").read_bytes()
LOADED = (FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_loaded_128conc.txt").read_bytes()
TIER = 2  # the captured bench ran at max_concurrency 2
MEASUREMENT_FIELDS = ("arm", "tier", "repetition", "metrics", "server")


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


class CapturedHost:
    """A vLLM host (which cannot run here) replaying captured outputs: its /metrics before and
    after the bench, and the bench's result file."""

    host = "captured"

    def __init__(self, result: bytes, scrapes: list[bytes]):
        self.result, self.scrapes = result, list(scrapes)

    def run(self, argv, *, timeout, **options) -> CommandResult:
        assert "metrics" in argv, argv
        return CommandResult(0, self.scrapes.pop(0).decode(), "", 0.01)

    def launch_detached(self, run_dir, token, argv, **options) -> Launch:
        return Launch(adopted=False, status=self.status(run_dir))

    def status(self, run_dir) -> DetachedStatus:
        return DetachedStatus(run_dir, exists=True, pid=1, exit_code=0)

    def read_from(self, path, offset, **options) -> tuple[bytes, int]:
        return b"", offset

    def get(self, remote_path, local_path) -> str:
        Path(local_path).write_bytes(self.result)
        return local_path


def g3_gate(actor, viewer, customer_org, host, title: str):
    engagement = services.engagement_create(
        actor=actor, organization=customer_org, title=title, model_name="m"
    )
    for kind in ("G1", "G2"):
        pass_gate(actor, viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    services.gate_spec_update(actor=actor, gate=gate, document=g3_spec(tiers=[TIER]))
    return gate


def remote_run(actor, viewer, gate, host, tmp_path) -> Run:
    """The offload arm's bench of repetition 1, as the G3 program plans, performs and records it."""
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    session = services.RunSession.claim_dispatched(run.pk)
    planned = sequence.plan_run(session.spec, [])
    session.append_steps(
        [next(s for s in planned if s["kind"] == "bench" and s["arm"] == "offload")]
    )
    ctx = services.run_execution(session.run).step_context(
        CapturedHost(BENCH, [IDLE, LOADED]), tmp_path
    )
    while (current := session.next_step()) is not None:
        step, detail = current
        session.record(step, steps.perform(step, detail, ctx))
    return run


def test_an_upload_and_a_remote_run_of_the_same_files_store_identical_measurements(
    api, actor, vendor_viewer, customer_org, host, tmp_path
):
    sim_host = local_simhost(customer_org, tmp_path / "host")
    remote = remote_run(
        actor,
        vendor_viewer,
        g3_gate(actor, vendor_viewer, customer_org, host, "fetched"),
        sim_host,
        tmp_path,
    )
    uploaded = upload_run(api, g3_gate(actor, vendor_viewer, customer_org, host, "uploaded"))
    response = send(
        api,
        uploaded["id"],
        kind="bench",
        arm="offload",
        tier=TIER,
        repetition=1,
        file=SimpleUploadedFile("result.json", BENCH),
        metrics_before=SimpleUploadedFile("before.txt", IDLE),
        metrics_after=SimpleUploadedFile("after.txt", LOADED),
    )
    assert response.status_code == 201, response.json()

    fetched_row = Measurement.objects.get(run=remote)
    uploaded_row = Measurement.objects.get(run_id=uploaded["id"])
    for name in MEASUREMENT_FIELDS:
        assert getattr(fetched_row, name) == getattr(uploaded_row, name), name
    assert fetched_row.server["prefix_caching"] is True and fetched_row.metrics["completed"] > 0
    for row, was_uploaded in ((fetched_row, False), (uploaded_row, True)):
        assert row.artifact.sha256 == hashlib.sha256(BENCH).hexdigest()
        assert bytes(row.artifact.content) == BENCH and row.artifact.uploaded is was_uploaded

    def kept(run_id: int) -> set[tuple[str, str]]:
        return set(Artifact.objects.filter(run_id=run_id).values_list("name", "sha256"))

    assert kept(remote.pk) == kept(uploaded["id"])
    assert {name for name, _ in kept(remote.pk)} == {
        "offload-c2-r1/result.json",
        "offload-c2-r1/metrics-before.txt",
        "offload-c2-r1/metrics-after.txt",
    }


def test_storing_a_cell_again_keeps_what_was_stored_first(
    actor, vendor_viewer, customer_org, host, tmp_path
):
    """A redelivered task stores its step again: the run keeps the files and row it had."""
    sim_host = local_simhost(customer_org, tmp_path / "host")
    gate = g3_gate(actor, vendor_viewer, customer_org, host, "fetched")
    run = remote_run(actor, vendor_viewer, gate, sim_host, tmp_path)
    kept = list(Artifact.objects.filter(run=run).values_list("name", "sha256"))
    metrics = Measurement.objects.get(run=run).metrics
    run_result_store(
        step=run.steps.get(),
        artifacts=[steps.Artifact("offload-c2-r1/result.json", "vllm-bench", b"{}")],
        measurement={
            "arm": "offload",
            "tier": TIER,
            "repetition": 1,
            "metrics": {"completed": 0},
            "artifact": "offload-c2-r1/result.json",
        },
    )
    assert list(Artifact.objects.filter(run=run).values_list("name", "sha256")) == kept
    assert Measurement.objects.get(run=run).metrics == metrics
