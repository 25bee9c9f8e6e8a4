from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from gates.models import Gate, Host, Profile, Run, Verdict
from tests.conftest import make_host

State = Gate.State


@pytest.mark.parametrize(
    "start, target, allowed",
    [
        (State.LOCKED, State.READY, True),
        (State.LOCKED, State.RUNNING, False),
        (State.READY, State.RUNNING, True),
        (State.READY, State.DECIDED, False),
        (State.RUNNING, State.DECIDED, True),
        (State.RUNNING, State.READY, True),
        (State.DECIDED, State.WAIVED, True),
        (State.WAIVED, State.READY, False),
        (State.WAIVED, State.RUNNING, False),
    ],
)
def test_gate_transitions_follow_the_table(start, target, allowed):
    assert Gate(state=start, verdict=Verdict.PENDING).can_move_to(target) is allowed


@pytest.mark.parametrize(
    "verdict, review, allowed",
    [
        (Verdict.FAIL, False, True),
        (Verdict.INCONCLUSIVE, False, True),
        (Verdict.PASS, False, False),
        (Verdict.FAIL, True, False),
    ],
)
def test_a_decided_gate_reruns_only_without_a_pass_and_outside_review(verdict, review, allowed):
    gate = Gate(state=State.DECIDED, verdict=verdict, stop_loss_review=review)
    assert gate.can_move_to(State.RUNNING) is allowed


@pytest.mark.django_db
def test_the_database_refuses_an_ssh_host_without_a_pinned_key(customer_org):
    with pytest.raises(IntegrityError), transaction.atomic():
        make_host(customer_org, host_key="")
    assert not Host.objects.exists()


@pytest.mark.django_db
def test_a_local_host_needs_no_key(customer_org):
    Host.objects.create(
        organization=customer_org,
        name="local",
        transport="local",
        profile=Profile.objects.get(name="simhost"),
    )


@pytest.mark.django_db
def test_a_finished_run_must_have_an_outcome(engagement):
    gate = engagement.gates.get(kind="G1")
    from django.utils import timezone

    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            gate=gate,
            spec=gate.current_spec,
            attempt=1,
            state="finished",
            finished_at=timezone.now(),
        )


@pytest.mark.django_db
def test_builtin_profiles_are_loaded_as_data_with_all_three_arms():
    for name in ("vllm", "simhost"):
        profile = Profile.objects.get(name=name)
        assert profile.builtin
        assert set(profile.commands["serve"]) == {"resident", "offload", "recompute"}
