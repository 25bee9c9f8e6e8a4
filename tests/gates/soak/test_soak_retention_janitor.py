"""The janitor's retention on a soak stored through the models (no host): it waits for every
decision's seal and the spec's grace, keeps the telling windows' raw files, every window's line
and every sample, counts what it freed, is claimed by id, and does nothing the second time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.evidence import keys
from gates.models import Artifact, Decision, EvidenceSeal, Run, Soak, SoakSample
from gates.services.runs.readouts import gate_readout_refresh
from gates.services.runs.results import run_artifacts_store
from gates.specs import validation as specs
from runners.artifact import Artifact as RawFile
from runners.soak import collector
from tests.gates.test_tenancy import token_client
from worker import tasks

pytestmark = pytest.mark.django_db
WINDOWS = 20
POLICY = {"keep_every_nth_window": 10, "keep_after_sealed_days": 2}
CLAUSES = [{"check": "throughput_drift", "change_points": [{"seq": 11}]}, {"check": "crashes"}]
TELLING = {0, 5, 7, 10, 11, 19}  # first, crashed, failed requests, the sample, change point, last


def metrics(seq: int) -> dict:
    return {"crashed": seq == 5, "failed": 3 if seq == 7 else 0, "notes": []}


def soak_run(actor, engagement, *, policy: dict | None = POLICY) -> Run:
    gate = engagement.gates.get(kind="G4")
    document = specs.default_spec("G4")
    document.pop("retention")
    if policy is not None:
        document["retention"] = policy
    spec = services.gate_spec_update(actor=actor, gate=gate, document=document)
    now = datetime.now(tz=UTC)
    run = Run.objects.create(
        gate=gate,
        spec=spec,
        attempt=1,
        state=Run.State.FINISHED,
        outcome="completed",
        started_at=now,
        finished_at=now,
    )
    Soak.objects.create(run=run, run_dir="/tmp/s", agent_sha256="0" * 64, state=Soak.State.ENDED)
    SoakSample.objects.bulk_create(
        SoakSample.of_window(
            run=run,
            seq=seq,
            metrics=metrics(seq),
            window_start=now + timedelta(seconds=seq),
            window_end=now + timedelta(seconds=seq + 1),
        )
        for seq in range(WINDOWS)
    )
    files = []
    for seq in range(WINDOWS):
        folder = collector.window_folder(seq)
        files.append(RawFile(f"{folder}bench.json", "vllm-bench", b"b" * (100 + seq)))
        files.append(RawFile(f"{folder}smi.txt", "gpu-inventory", b"s" * 50))
        files.append(RawFile(f"{folder}{collector.LINE_FILE}", "soak-window", b"{}"))
    run_artifacts_store(run_id=run.pk, artifacts=files)
    decision = Decision.objects.create(
        gate=gate, spec=spec, verdict="pass", clauses=CLAUSES, result={"clauses": CLAUSES}
    )
    decision.runs.add(run)
    gate_readout_refresh(gate.pk)
    return run


def seal(run: Run, at: datetime) -> None:
    for decision in run.decisions.all():
        EvidenceSeal.objects.create(
            decision=decision, key=keys.key_active(), payload=b"{}", signature=b"", created_at=at
        )


def windows_with_raw_files(run: Run) -> set[int]:
    names = Artifact.objects.filter(run=run).exclude(name__endswith=collector.LINE_FILE)
    return {int(name[6:12]) for name in names.values_list("name", flat=True)}


def test_a_soak_waits_for_its_seal_and_the_grace_after_it(actor, engagement):
    run = soak_run(actor, engagement)
    now = timezone.now()
    assert services.soaks_to_prune(now=now + timedelta(days=30)) == [], "not sealed yet"
    assert services.soak_prune(run_id=run.pk, budget_s=60) is None
    seal(run, now)
    assert services.soaks_to_prune(now=now + timedelta(days=1)) == [], "within the grace"
    assert services.soaks_to_prune(now=now + timedelta(days=2, seconds=1)) == [run.pk]
    assert windows_with_raw_files(run) == set(range(WINDOWS))


def test_a_spec_without_a_retention_policy_keeps_every_raw_file(actor, engagement):
    run = soak_run(actor, engagement, policy=None)
    seal(run, timezone.now() - timedelta(days=365))
    assert services.soaks_to_prune() == []
    assert services.soak_prune(run_id=run.pk, budget_s=60) is None


def test_pruning_keeps_the_telling_windows_every_line_and_sample_and_counts_the_bytes(
    actor, engagement
):
    run = soak_run(actor, engagement, policy={**POLICY, "keep_after_sealed_days": 0})
    seal(run, timezone.now())
    dropped = set(range(WINDOWS)) - TELLING
    freed = sum(100 + seq + 50 for seq in dropped)
    result = services.soak_prune(run_id=run.pk, budget_s=60, chunk=3)
    assert result == services.PruneResult(
        run_id=run.pk,
        windows=WINDOWS,
        dropped_windows=len(dropped),
        files=2 * len(dropped),
        bytes=freed,
        done=True,
    )
    assert windows_with_raw_files(run) == TELLING
    lines = Artifact.objects.filter(run=run, name__endswith=collector.LINE_FILE).count()
    assert (lines, run.soak_samples.count()) == (WINDOWS, WINDOWS)
    soak = Soak.objects.get(run=run)
    assert (soak.pruned_files, soak.pruned_bytes, soak.prune_until) == (
        2 * len(dropped),
        freed,
        None,
    )
    assert soak.retention["dropped"] == [[1, 4], [6, 6], [8, 9], [12, 18]]
    assert soak.retention["policy"] == {**POLICY, "keep_after_sealed_days": 0}
    # Safe twice: the service and the janitor's task find nothing more to do.
    assert services.soak_prune(run_id=run.pk, budget_s=60) is None
    tasks.prune_soaks()
    soak.refresh_from_db()
    assert (soak.pruned_files, soak.pruned_bytes) == (2 * len(dropped), freed)


def test_a_janitor_out_of_time_records_first_and_the_next_one_finishes(actor, engagement):
    run = soak_run(actor, engagement, policy={**POLICY, "keep_after_sealed_days": 0})
    seal(run, timezone.now())
    first = services.soak_prune(run_id=run.pk, budget_s=0)
    assert first is not None and not first.done and first.files == 0
    soak = Soak.objects.get(run=run)
    assert soak.retention["dropped_windows"] == WINDOWS - len(TELLING), "recorded before deleting"
    assert soak.pruned_at is None and soak.prune_until is None, "the claim is released"
    assert services.soaks_to_prune() == [run.pk]
    tasks.prune_soaks()
    assert windows_with_raw_files(run) == TELLING
    assert Soak.objects.get(run=run).pruned_at is not None


def test_a_soak_another_janitor_holds_is_left_alone(actor, engagement):
    run = soak_run(actor, engagement, policy={**POLICY, "keep_after_sealed_days": 0})
    seal(run, timezone.now())
    Soak.objects.filter(run=run).update(prune_until=timezone.now() + timedelta(minutes=5))
    assert services.soaks_to_prune() == []
    assert services.soak_prune(run_id=run.pk, budget_s=60) is None
    assert windows_with_raw_files(run) == set(range(WINDOWS))


def test_the_run_page_and_the_api_show_the_policy_then_what_was_kept_and_freed(
    actor, engagement, client, vendor_admin, vendor_org
):
    run = soak_run(actor, engagement, policy={**POLICY, "keep_after_sealed_days": 0})
    client.force_login(vendor_admin)
    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert "0 days after, only the telling windows" in page and "every 10th window" in page
    assert "windows kept (" not in page
    retention = api.get(reverse("api:run-detail", args=[run.pk])).json()["soak"]["retention"]
    assert (retention["state"], retention["policy"]["keep_every_nth_window"]) == ("waiting", 10)

    seal(run, timezone.now())
    services.soak_prune(run_id=run.pk, budget_s=60)
    freed = sum(100 + seq + 50 for seq in set(range(WINDOWS)) - TELLING)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    shown = f"Raw files of 6 of 20 windows kept ({freed / 2**20:.1f} MiB of raw files removed)"
    assert shown in page
    retention = api.get(reverse("api:run-detail", args=[run.pk])).json()["soak"]["retention"]
    assert retention["state"] == "pruned" and retention["pruned_at"]
    assert (retention["kept_windows"], retention["windows"]) == (len(TELLING), WINDOWS)
    assert (retention["bytes_freed"], retention["files_deleted"]) == (freed, 28)


def test_a_soak_without_a_policy_says_every_raw_file_is_kept(
    actor, engagement, client, vendor_admin
):
    run = soak_run(actor, engagement, policy=None)
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert "the spec states no retention policy: every window's raw files are kept" in page
