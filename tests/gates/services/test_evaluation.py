"""Evaluation: each gate kind's evidence, decided through the one dispatcher."""

from __future__ import annotations

import pytest
from django.utils import timezone

from gates import services
from gates.models import Decision, Engagement, Gate, Run
from gates.services.runs import evaluation
from tests.gates.planner.test_spec_check import LLAMA_8X80

pytestmark = pytest.mark.django_db


def open_run(actor, vendor_viewer, engagement, host, kind: str) -> Run:
    gate = engagement.gates.get(kind=kind)
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
    return services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)


@pytest.fixture
def spy(monkeypatch):
    calls = []

    def decide_gate(spec, evidence, context=None):
        calls.append((spec["gate"], type(evidence), context))
        return {"verdict": "inconclusive", "clauses": []}

    monkeypatch.setattr(evaluation, "decide_gate", decide_gate)
    return calls


@pytest.mark.parametrize("kind, evidence", [("G1", dict), ("G2", dict), ("G3", list)])
def test_every_gate_kind_is_decided_through_the_one_dispatcher(
    spy, actor, vendor_viewer, engagement, host, kind, evidence
):
    run = open_run(actor, vendor_viewer, engagement, host, kind)
    assert evaluation.run_evaluate(run).verdict == "inconclusive"
    assert [(gate, found) for gate, found, _ in spy] == [(kind, evidence)]


def test_an_evaluation_fetches_the_kv_planner_context_itself(
    spy, actor, vendor_viewer, engagement, host
):
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=LLAMA_8X80)
    run = open_run(actor, vendor_viewer, engagement, host, "G3")
    services.RunSession.claim_dispatched(run.pk).evaluate()
    # The first attempt, and no G2 noise floor yet (the fixture's G2 has no engine decision).
    assert spy == [("G3", list, {"kv_exceeds_vram": True, "attempt": 1, "noise_floor": None})]


def test_a_g4_run_is_never_judged_by_another_gate_s_engine(spy, engagement):
    gate = engagement.gates.get(kind="G4")
    run = Run.objects.create(
        gate=gate,
        spec=gate.current_spec,
        attempt=1,
        source=Run.Source.UPLOAD,
        state=Run.State.RUNNING,
        started_at=timezone.now(),
    )
    with pytest.raises(services.GateNotRunnableError):
        evaluation.run_evaluate(run)
    assert not spy and not Decision.objects.exists()


def test_a_g3_decision_carries_the_spec_s_operating_characteristic_into_the_evidence(
    spy, actor, vendor_viewer, engagement, host
):
    run = open_run(actor, vendor_viewer, engagement, host, "G3")
    services.RunSession.claim_dispatched(run.pk).evaluate()
    result = run.gate.decisions.get().result
    oc = result["operating_characteristic"]
    assert oc["available"] and oc["noise"]["source"].startswith("the spec's stated CV 4 % (")
    assert oc["plan"]["looks"] == [8, 18, 28] and "warnings" in oc
