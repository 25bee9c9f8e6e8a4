"""G3 attempts spend the spec's error budget: counted, told to the engine, capped; an
inconclusive one's repetitions carried into the next where the spec says so."""

from __future__ import annotations

import copy

import pytest
from django.urls import reverse

from documents.profile import profile_digest, profile_snapshot
from gates import services
from gates.errors import IllegalTransitionError, ServiceError
from gates.models import AuditEvent, Gate, Measurement, Profile, Run
from gates.services.contract.power import UnderpoweredSpecError
from gates.services.runs.attempts import (
    AttemptsSpentError,
    g3_decision_context,
    gate_attempts_spent,
    gate_check_attempts_left,
)
from gates.services.runs.carrying import CarryRefusedError
from gates.services.runs.evaluation import run_evaluate
from tests.contract import sign_as_both
from tests.gates.services.test_uploads import g3_upload_gate
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


def ready_g3(engagement, *, signed: bool = True) -> Gate:
    gate = engagement.gates.get(kind="G3")
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    if signed:  # a run on an unsigned version is a rehearsal
        sign_as_both(gate)
    return gate


def upload(actor, viewer, gate, host=None) -> Run:
    return services.run_create(
        actor=actor, viewer=viewer, gate=gate, host=host, source=Run.Source.UPLOAD
    )


def decided_attempt(actor, viewer, gate: Gate, verdict: str) -> None:
    run = upload(actor, viewer, gate)
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": []})


def test_verdict_bearing_attempts_count_and_tell_the_engine_which_attempt_is_next(
    actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement)
    assert g3_decision_context(gate) == {"attempt": 1, "noise_floor": None}
    decided_attempt(actor, vendor_viewer, gate, "invalid")  # tested nothing: spends nothing
    assert gate_attempts_spent(gate) == 0
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    assert g3_decision_context(gate)["attempt"] == 2


def test_spending_the_last_attempt_without_a_pass_opens_review_and_refuses_another_run(
    actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement)
    assert gate.current_spec.document["statistics"]["attempts"] == 2
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    gate.refresh_from_db()
    assert not gate.stop_loss_review
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    gate.refresh_from_db()
    assert gate.stop_loss_review
    with pytest.raises(AttemptsSpentError) as refused:
        gate_check_attempts_left(gate)
    assert refused.value.field == "statistics.attempts" and "2 of the 2" in str(refused.value)
    with pytest.raises(IllegalTransitionError):
        services.run_create(
            actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
        )
    assert gate.runs.count() == 2


def test_a_rehearsal_spends_no_attempt(actor, vendor_viewer, engagement):
    """A run on a version not signed by both counts for nothing, so it spends nothing."""
    gate = ready_g3(engagement, signed=False)
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    assert gate.runs.get().rehearsal
    assert gate_attempts_spent(gate) == 0
    assert g3_decision_context(gate)["attempt"] == 1


def test_a_spec_that_requires_power_it_cannot_reach_refuses_the_run_and_writes_nothing(
    actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement, signed=False)
    document = gate.current_spec.document
    # Claims on their bars (power cannot exceed the error rate there) at a 10 % noise: the
    # shipped template's claims clear their bars, so this spec is made underpowered on purpose.
    document["statistics"]["require_power"] = True
    document["statistics"]["noise_cv_pct"] = 10
    for clause in document["clauses"]:
        if clause["change"] == "ratio":
            clause["claimed"] = clause["at_least"]
        else:
            clause["claimed_pct"] = clause["at_least_pct"]
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    with pytest.raises(UnderpoweredSpecError) as refused:
        services.run_create(
            actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
        )
    assert refused.value.field == "statistics.require_power" and "requires 80%" in str(
        refused.value
    )
    assert not gate.runs.exists()
    for clause in document["clauses"]:  # claims far beyond the bars: the gate can show them
        key = "claimed" if clause["change"] == "ratio" else "claimed_pct"
        clause[key] = clause.get("at_least", 0) * 3 or min(clause["at_least_pct"] * 2.4, 80)
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    services.run_create(
        actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
    )


def measured_repetitions(run: Run, repetitions: int) -> None:
    """Every cell (arm x tier) of the run's spec measured in repetitions 1..N, as an interim
    look would see them."""
    document = run.spec.document
    for repetition in range(1, repetitions + 1):
        for arm in document["arms"]:
            for tier in document["tiers"]:
                Measurement.objects.create(
                    run=run, arm=arm, tier=tier, repetition=repetition, metrics={"ttft_p50": 1.0}
                )


def ended_attempt(actor, viewer, gate: Gate, repetitions: int, end: str = "cancel") -> Run:
    """A run with `repetitions` complete, then canceled or failed with the outcome `end`."""
    run = upload(actor, viewer, gate)
    measured_repetitions(run, repetitions)
    if end == "cancel":
        services.run_cancel(actor=actor, viewer=viewer, run=run, reason="the interim looked weak")
    else:
        services.run_fail(run_id=run.pk, outcome=end, reason="the host went away")
    run.refresh_from_db()
    return run


@pytest.mark.parametrize(
    ("repetitions", "end", "spent"),
    [
        (0, "cancel", False),  # no data seen: nothing to act on, nothing spent
        (1, "cancel", True),  # one repetition, before the first look: its numbers were visible
        (0, Run.Outcome.INFRA_ERROR, False),  # an infrastructure failure before any data
        (1, Run.Outcome.INFRA_ERROR, True),
    ],
)
def test_an_ended_run_spends_its_attempt_from_its_first_complete_repetition(
    actor, vendor_viewer, engagement, repetitions, end, spent
):
    """Canceling when the interim numbers look weak, before the first look too, must not buy
    a fresh draw (issue 26)."""
    gate = ready_g3(engagement)
    assert gate.current_spec.document["repetitions"]["min"] > repetitions  # before the look
    run = ended_attempt(actor, vendor_viewer, gate, repetitions, end)
    assert run.is_ended and not run.rehearsal  # its repetitions stay on record:
    assert run.measurements.values("repetition").distinct().count() == repetitions
    assert services.run_spent_attempt(run) is spent and gate_attempts_spent(gate) == int(spent)
    assert g3_decision_context(gate)["attempt"] == 1 + spent


def test_a_cancel_records_whether_it_spent_the_attempt_and_a_partial_repetition_does_not(
    actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement)
    partial = upload(actor, vendor_viewer, gate)
    measured_repetitions(partial, 1)
    partial.measurements.first().delete()  # one cell of repetition 1 never measured
    services.run_cancel(actor=actor, viewer=vendor_viewer, run=partial, reason="host rebooted")
    ended_attempt(actor, vendor_viewer, gate, 1)
    cancels = AuditEvent.objects.filter(action="run.cancel").order_by("id")
    assert [event.detail["attempt_spent"] for event in cancels] == [False, True]
    assert gate_attempts_spent(gate) == 1


def test_a_rehearsal_never_spends_its_attempt_however_it_ends(actor, vendor_viewer, engagement):
    gate = ready_g3(engagement, signed=False)
    canceled = ended_attempt(actor, vendor_viewer, gate, 2)
    failed = ended_attempt(actor, vendor_viewer, gate, 2, Run.Outcome.INFRA_ERROR)
    assert canceled.rehearsal and failed.rehearsal and gate_attempts_spent(gate) == 0
    assert not services.run_spent_attempt(canceled) and not services.run_spent_attempt(failed)
    assert AuditEvent.objects.get(action="run.cancel").detail["attempt_spent"] is False


def test_canceling_the_last_attempt_after_a_repetition_opens_review_and_refuses_another_run(
    actor, vendor_viewer, engagement
):
    gate = ready_g3(engagement)
    decided_attempt(actor, vendor_viewer, gate, "inconclusive")
    ended_attempt(actor, vendor_viewer, gate, 1)  # before the first look: spent all the same
    gate.refresh_from_db()
    assert gate.stop_loss_review
    with pytest.raises(AttemptsSpentError):
        gate_check_attempts_left(gate)


def test_a_cancel_without_a_reason_is_refused_and_changes_nothing(actor, vendor_viewer, engagement):
    gate = ready_g3(engagement, signed=False)
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
    )
    with pytest.raises(ServiceError) as refused:
        services.run_cancel(actor=actor, viewer=vendor_viewer, run=run, reason="  no  ")
    assert refused.value.field == "reason"
    run.refresh_from_db()
    assert not run.is_ended


# Repetitions carried into the next attempt (statistics.carry_repetitions).


def carrying_gate(actor, vendor_viewer, engagement, host):
    """The upload tests' one-cell G3 (tier 8, 4 repetitions, one look), carrying repetitions."""
    gate = g3_upload_gate(actor, vendor_viewer, engagement, host)
    document = gate.current_spec.document
    document["statistics"]["carry_repetitions"] = True
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    return gate


def measured(run: Run, ratios: dict[int, float]) -> None:
    """Baseline and offload TTFT p50 at tier 8, offload/baseline as given per repetition."""
    for repetition, ratio in ratios.items():
        base = 1000.0 * (1 + 0.01 * repetition)
        for arm, ttft in (("baseline", base), ("offload", base * ratio)):
            Measurement.objects.create(
                run=run,
                arm=arm,
                tier=8,
                repetition=repetition,
                metrics={"ttft_ms": {"median": ttft}, "failed": 0, "completed": 64},
            )


def test_an_inconclusive_attempt_carries_its_repetitions_and_the_next_decides_on_the_union(
    client, vendor_admin, vendor_org, actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    first = upload(actor, vendor_viewer, gate)
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})  # at the bar: inconclusive
    assert run_evaluate(first).verdict == "inconclusive"

    second = upload(actor, vendor_viewer, gate)
    assert (second.carried_from, second.carried_repetitions) == (first, 4)
    assert second.first_repetition == 5 and second.attempt == 2
    early = run_evaluate(second)  # the union's only look is at 8: four of its own first
    assert not early.decided and early.first == 5 and early.more == 4
    measured(second, {5: 0.40, 6: 0.41, 7: 0.39, 8: 0.40})
    assert run_evaluate(second).verdict == "pass"
    result = gate.decisions.get(runs=second).result
    (cell,) = result["clauses"]
    assert [pair["repetition"] for pair in cell["pairs"]] == list(range(1, 9))
    assert result["inputs"]["plan"]["looks"] == [8]
    assert result["inputs"]["context"]["carried_repetitions"] == 4
    assert result["inputs"]["attempt"] == 2  # its own share of the budget, once

    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[second.pk])).content.decode()
    assert "This attempt carries 4 repetitions from" in page and "run #1</a>" in page
    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    record = api.get(reverse("api:run-detail", args=[second.pk])).json()
    assert (record["carried_from"], record["carried_repetitions"]) == (first.pk, 4)
    assert record["first_repetition"] == 5
    (listed,) = [
        row
        for row in api.get(reverse("api:gate-runs", args=[gate.pk])).json()["results"]
        if row["id"] == second.pk
    ]
    assert listed["carried_from"] == first.pk


def test_a_carry_onto_another_host_is_refused_with_the_reason(
    actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    first = upload(actor, vendor_viewer, gate)
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})
    run_evaluate(first)
    with pytest.raises(CarryRefusedError) as refused:
        upload(actor, vendor_viewer, gate, host)
    assert "run #1 ran on uploaded results" in str(refused.value)
    assert refused.value.field == "host" and gate.runs.count() == 1


def test_a_carry_onto_an_edited_profile_is_refused_naming_both_digests(
    actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    first = upload(actor, vendor_viewer, gate, host)
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})
    assert run_evaluate(first).verdict == "inconclusive"
    profile = host.profile
    profile.commands["serve"]["offload"].append("--kv-offloading-size=64")
    profile.save(update_fields=["commands"])
    now = profile_digest(profile_snapshot(profile.name, profile.commands, profile.parameters))
    assert now != first.profile_digest
    with pytest.raises(CarryRefusedError) as refused:
        upload(actor, vendor_viewer, gate, host)
    assert refused.value.field == "profile" and gate.runs.count() == 1
    assert str(refused.value) == (
        f"the spec carries repetitions, but run #1 ran profile vllm (digest "
        f"{first.profile_digest[:12]}) and this run would run profile vllm (digest "
        f"{now[:12]}): repetitions carry only with the same profile (its name, commands and "
        "parameters)"
    )


def test_a_run_that_kept_no_profile_snapshot_cannot_be_carried_from(
    actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    first = upload(actor, vendor_viewer, gate, host)
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})
    run_evaluate(first)
    # As a run made before migration 0027 reads.
    Run.objects.filter(pk=first.pk).update(profile_snapshot=None, profile_digest="")
    with pytest.raises(CarryRefusedError) as refused:
        upload(actor, vendor_viewer, gate, host)
    assert refused.value.field == "profile"
    assert "run #1 kept no profile snapshot" in str(refused.value)


def test_uploads_naming_a_profile_carry_only_with_the_same_parameters(
    actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    simhost = Profile.objects.get(name="simhost")

    def upload_naming(backend: str) -> Run:
        named = services.UploadProfile(simhost, {"offload_backend": backend})
        return services.run_create(
            actor=actor,
            viewer=vendor_viewer,
            gate=gate,
            host=None,
            source=Run.Source.UPLOAD,
            upload=named,
        )

    first = upload_naming("lmcache")
    assert (
        first.profile_name == "simhost" and first.upload_parameters["offload_backend"] == "lmcache"
    )
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})
    assert run_evaluate(first).verdict == "inconclusive"
    with pytest.raises(CarryRefusedError) as refused:
        upload_naming("native")
    assert refused.value.field == "parameters" and gate.runs.count() == 1
    second = upload_naming("lmcache")
    assert (second.carried_from, second.carried_repetitions) == (first, 4)


def test_the_same_profile_on_the_same_host_carries(actor, vendor_viewer, engagement, host):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    first = upload(actor, vendor_viewer, gate, host)
    measured(first, {1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77})
    run_evaluate(first)
    second = upload(actor, vendor_viewer, gate, host)
    assert (second.carried_from, second.carried_repetitions) == (first, 4)
    assert second.profile_digest == first.profile_digest != ""


def test_a_runs_profile_snapshot_survives_a_later_edit_and_repointing_of_the_profile(
    client, vendor_admin, vendor_org, actor, vendor_viewer, engagement, host
):
    gate = carrying_gate(actor, vendor_viewer, engagement, host)
    run = upload(actor, vendor_viewer, gate, host)
    kept = copy.deepcopy(run.profile_snapshot)
    assert kept["name"] == "vllm" and kept["commands"] == host.profile.commands
    assert run.profile_digest == profile_digest(kept)
    profile = host.profile
    profile.commands["serve"]["offload"].append("--edited")
    profile.parameters["python"] = "/opt/other/python"
    profile.save(update_fields=["commands", "parameters"])
    host.profile = Profile.objects.get(name="simhost")
    host.save(update_fields=["profile"])
    run.refresh_from_db()
    assert run.profile_snapshot == kept and run.profile_digest == profile_digest(kept)

    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    assert f"profile vllm <code>{run.profile_digest[:12]}</code>" in page
    api = token_client(vendor_admin, vendor_org, scopes=["read"])
    record = api.get(reverse("api:run-detail", args=[run.pk])).json()
    assert record["profile"] == {
        "name": "vllm",
        "digest": run.profile_digest,
        "short_digest": run.profile_digest[:12],
    }
