"""The package's entry points: the one dispatcher from gate kind to engine, and stop-loss."""

from __future__ import annotations

import pytest

from gates.decisions import EvidenceError, SpecFieldError, decide_gate, stop_loss_review
from tests.gates.decisions.test_g3 import CONTEXT, g3_spec, paired


def test_decide_gate_dispatches_on_the_gate_kind():
    assert decide_gate(g3_spec(), paired([0.6, 0.6, 0.61]), CONTEXT)["gate"] == "G3"
    with pytest.raises(SpecFieldError) as caught:
        decide_gate({"gate": "G9"}, [])
    assert caught.value.field == "gate"


@pytest.mark.parametrize(
    ("verdicts", "review", "left"),
    [
        ([], False, 2),
        (["fail"], False, 1),
        (["fail", "fail"], True, 0),
        (["fail", "infra_error", "invalid", "inconclusive"], False, 1),
        (["invalid", "infra_error", "invalid", "infra_error"], False, 2),
        (["fail", "pass", "fail"], False, 0),
    ],
)
def test_only_product_failures_count_toward_stop_loss(verdicts, review, left):
    decision = stop_loss_review(verdicts, 2)
    assert decision["review"] is review
    assert decision["attempts_left"] == left


def test_stop_loss_refuses_a_nonsense_budget_or_verdict():
    with pytest.raises(SpecFieldError):
        stop_loss_review(["fail"], 0)
    with pytest.raises(EvidenceError) as caught:
        stop_loss_review(["fail", "oops"], 2)
    assert caught.value.field == "verdicts[1]"
