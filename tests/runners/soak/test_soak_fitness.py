"""The host watched for fitness DURING a compressed G4 soak (real sshd, simhost, the real agent;
the task code run here tick after tick): a GPU fault that appears after a few windows ends the
run infra_error naming window, GPU and code, never a fail; throttled clocks are notes and the
soak finishes. On an AMD host (rocm-smi's inventory, amd-smi's health) an ECC rise ends it the
same way. The host's faults are made by rewriting simhost's host config mid-soak."""

from __future__ import annotations

import re
import time

import pytest
from django.urls import reverse

from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.models import Artifact, Decision, Gate, Run, Soak, SoakSample
from tests.runners.program.test_gate_programs import host_processes_gone
from tests.runners.soak.test_soak import (
    LOOSE_DRIFT,
    assert_every_seq_once,
    begin,
    g4_spec,
    soak_host,
    tasks_run_here,  # noqa: F401 (the autouse fixture: ticks run in this process)
    tick_until_ended,
)
from tests.simhosts import set_gpu_health
from tests.sshd import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
FAULT_AFTER_WINDOWS = 3
FAULTS = {
    "xid": ({"xid_events": [{"gpu": 0, "code": 79}]}, r"GPU 0: XID 79 \(GPU has fallen off"),
    "ecc": ({"ecc_uncorrectable": 2}, r"GPU 0: uncorrectable ECC errors rose from 0 \(window 0\)"),
}


def after_windows(count: int, action):
    """A `during` hook for tick_until_ended: do `action` once `count` windows are stored."""
    done: list[int] = []

    def hook(run: Run) -> None:
        stored = SoakSample.objects.filter(run=run).count()
        if not done and stored >= count:
            action()
            done.append(stored)

    hook.done = done
    return hook


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_gpu_fault_mid_soak_ends_it_infra_error_naming_window_gpu_and_code(
    fault, actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    health, named = FAULTS[fault]
    host = soak_host(customer_org, own_sshd, tmp_path)
    run = begin(actor, vendor_viewer, engagement, host, g4_spec(seconds=60, **LOOSE_DRIFT))
    hook = after_windows(FAULT_AFTER_WINDOWS, lambda: set_gpu_health(host, health))
    begun = time.monotonic()
    run = tick_until_ended(run, timeout=60, during=hook)
    assert hook.done, "the soak ended before the fault was injected"
    assert time.monotonic() - begun < 45  # at the window that showed it, not after 60 s
    assert (run.state, run.outcome) == ("finished", "infra_error"), run.reason
    found = re.search(r"unfit to measure in window (\d+): ", run.reason)
    assert found and re.search(named, run.reason), run.reason
    window = int(found[1])
    assert window >= hook.done[0]  # a window after the rewrite, not one stored before it
    # Every window up to the faulty one stayed stored, each once; the earlier ones are clean.
    seqs = assert_every_seq_once(run)
    assert window in seqs
    for sample in SoakSample.objects.filter(run=run, seq__lt=hook.done[0]):
        assert len(sample.metrics["health"]["gpus"]) == 8, sample.metrics
        assert sample.metrics["health"]["xid_events"] == [], sample.metrics
    faulty = SoakSample.objects.get(run=run, seq=window).metrics["health"]
    if fault == "xid":
        assert [event["code"] for event in faulty["xid_events"]] == [79]
    else:
        assert {gpu["ecc_uncorrectable"] for gpu in faulty["gpus"]} == {2}
    # No verdict, nothing toward stop-loss: the gate is open for another run.
    assert not Decision.objects.filter(gate=run.gate).exists()
    assert Gate.objects.get(pk=run.gate_id).verdict != "fail"
    soak = Soak.objects.get(run=run)
    assert soak.state == "ended" and soak.health["fault"] in run.reason
    # The agent and its server were stopped, and what it left on the host removed.
    assert wait_for(lambda: host_processes_gone(run), timeout=15)
    # An NVIDIA host's agent never ran amd-smi: no files of it, no notes about it.
    assert not Artifact.objects.filter(run=run, name__contains="amd-").exists()
    notes = [note for s in SoakSample.objects.filter(run=run) for note in s.metrics["notes"]]
    assert not [note for note in notes if "amd-smi" in note], notes


def test_an_ecc_rise_on_an_amd_host_mid_soak_ends_it_infra_error_naming_window_and_gpu(
    actor, vendor_viewer, engagement, customer_org, own_sshd, tmp_path
):
    """rocm-smi's inventory carries no ECC count: the agent reads it from amd-smi metric."""
    host = soak_host(customer_org, own_sshd, tmp_path, preset="mi300x8-rocm")
    run = begin(actor, vendor_viewer, engagement, host, g4_spec(seconds=60, **LOOSE_DRIFT))
    hook = after_windows(
        FAULT_AFTER_WINDOWS, lambda: set_gpu_health(host, {"ecc_uncorrectable": 2})
    )
    run = tick_until_ended(run, timeout=60, during=hook)
    assert hook.done, "the soak ended before the fault was injected"
    assert (run.state, run.outcome) == ("finished", "infra_error"), run.reason
    found = re.search(
        r"unfit to measure in window (\d+): GPU 0: uncorrectable ECC errors rose ", run.reason
    )
    assert found and "from 0 (window 0) to 2" in run.reason, run.reason
    window = int(found[1])
    assert window >= hook.done[0] and window in assert_every_seq_once(run)
    # The windows before it were read in full through amd-smi, GPUs named by rocm-smi's addresses.
    for sample in SoakSample.objects.filter(run=run, seq__lt=hook.done[0]):
        health = sample.metrics["health"]
        assert [gpu["pci_bus_id"] for gpu in health["gpus"]][:2] == ["0000:18:00.0", "0000:28:00.0"]
        assert {gpu["ecc_uncorrectable"] for gpu in health["gpus"]} == {0}
        assert health["notes"] == [], health["notes"]
    kept = set(Artifact.objects.filter(run=run).values_list("name", "tool"))
    folder = f"soak/w{window:06d}/"
    assert {
        (folder + "amd-metric.txt", "amd-smi-metric"),
        (folder + "amd-process.txt", "amd-smi-process"),
    } <= kept
    assert not Decision.objects.filter(gate=run.gate).exists()
    assert Soak.objects.get(run=run).health["fault"] in run.reason
    assert wait_for(lambda: host_processes_gone(run), timeout=15)


def test_throttled_clocks_mid_soak_are_notes_and_the_soak_still_finishes(
    actor,
    vendor_viewer,
    vendor_admin,
    vendor_org,
    engagement,
    customer_org,
    own_sshd,
    tmp_path,
    client,
):
    from tests.gates.test_tenancy import token_client

    host = soak_host(customer_org, own_sshd, tmp_path)
    run = begin(actor, vendor_viewer, engagement, host, g4_spec(seconds=12, **LOOSE_DRIFT))
    throttle = {"throttle_reasons": ["hw_thermal_slowdown"]}
    hook = after_windows(2, lambda: set_gpu_health(host, throttle))
    run = tick_until_ended(run, during=hook)
    assert hook.done, "the soak ended before the clocks were held down"
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    decision = run.decisions.get()
    assert decision.verdict == "pass", decision.result["reasons"]
    note = "GPU 3: clocks held down (hw_thermal_slowdown)"
    noted = [s.seq for s in SoakSample.objects.filter(run=run) if note in s.metrics["notes"]]
    assert noted and min(noted) >= hook.done[0], noted  # from the rewrite on
    finding = next(f for f in decision.result["soak"]["health"]["findings"] if f["note"] == note)
    assert (finding["first_seq"], finding["windows"]) == (min(noted), len(noted))
    # Shown where people look: the run's API, its samples, and the run page.
    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    detail = api.get(reverse("api:run-detail", args=[run.pk])).json()
    assert finding in detail["soak"]["health"]["findings"]
    samples = api.get(reverse("api:run-samples", args=[run.pk]), {"after": min(noted) - 1})
    assert note in samples.json()["results"][0]["metrics"]["health"]["notes"]
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert "Host health" in page and note in page
    # Offline, the notes and the health summary are found again from the windows' files.
    evidence = verify_bundle(bundle_for_decision(decision)[0])
    assert evidence.ok, evidence.problems
    assert_every_seq_once(run)
