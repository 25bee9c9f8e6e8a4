"""The gate read CI polls is served from Gate.readout, stored when a spec, signature or decision
is created. Each kind of write moves it; an older shape is rebuilt on read. (tests/conftest.py
also checks every gate's readout against a fresh computation after every database test.)"""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates import services
from gates.api.engagements import ClauseSerializer
from gates.models import Gate
from gates.selectors import READOUT_SHAPE, api_clause, clause_rows, gate_readout
from gates.specs import validation as specs
from tests.contract import sign_as_both
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


def read(api, gate) -> dict:
    response = api.get(reverse("api:gate-detail", args=[gate.pk]))
    assert response.status_code == 200
    return response.json()


def decide(actor, viewer, gate, host, verdict: str) -> None:
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clauses = [{"check": "gpu_count", "verdict": verdict, "expected": 8, "observed": 8}]
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": clauses})


def test_each_write_that_changes_a_gate_read_changes_the_stored_readout(
    vendor_admin, vendor_org, actor, vendor_viewer, engagement, host
):
    api = token_client(vendor_admin, vendor_org)
    gate = engagement.gates.get(kind="G1")
    fresh = read(api, gate)
    assert (fresh["spec_version"], fresh["in_force_version"], fresh["latest_decision"]) == (
        1,
        None,
        None,
    )

    decide(actor, vendor_viewer, gate, host, "pass")  # unsigned: a rehearsal
    rehearsal = read(api, gate)
    assert rehearsal["latest_decision"]["rehearsal"] is True
    assert rehearsal["clauses"][0]["metric"] == "gpu_count"

    document = specs.default_spec("G1")
    document["expect"]["gpu_count"] = 4
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    assert read(api, gate)["spec_version"] == 2

    sign_as_both(Gate.objects.get(pk=gate.pk))
    signed = read(api, gate)
    assert (signed["spec_version"], signed["in_force_version"]) == (2, 2)

    decide(actor, vendor_viewer, gate, host, "fail")
    counted = read(api, gate)
    assert counted["latest_decision"]["rehearsal"] is False
    assert (counted["verdict"], counted["latest_decision"]["verdict"]) == ("fail", "fail")
    assert counted["latest_decision"]["spec_version"] == 2
    assert Gate.objects.get(pk=gate.pk).readout == gate_readout(gate.pk)


def test_a_readout_of_an_older_shape_or_none_is_rebuilt_on_read_and_stored(
    vendor_admin, vendor_org, actor, vendor_viewer, engagement, host
):
    api = token_client(vendor_admin, vendor_org)
    gate = engagement.gates.get(kind="G1")
    decide(actor, vendor_viewer, gate, host, "pass")
    expected = read(api, gate)
    for stale in (None, {"shape": READOUT_SHAPE - 1, "clauses": []}):
        Gate.objects.filter(pk=gate.pk).update(readout=stale)
        assert read(api, gate) == expected
        assert Gate.objects.get(pk=gate.pk).readout == gate_readout(gate.pk)


def test_the_stored_clauses_are_what_the_documented_clause_serializer_gives():
    cells = [
        {"metric": "ttft_p50", "compare": "offload/baseline", "change": "reduction", "tier": 4,
         "threshold": 25, "estimate": 30, "low": 27.5, "high": 33, "verdict": "pass",
         "cause": "clears"},
        {"metric": "ttft_p50", "compare": "recompute/offload", "change": "ratio", "tiers": [8, 16],
         "threshold": 8.6, "estimate": None, "verdict": "inconclusive", "cause": None},
        {"check": "gpu_count", "expected": 8, "observed": 8, "verdict": "pass", "cause": "ok"},
        {"check": "vllm_version", "expected": "0.20.1", "observed": "0.20.1", "verdict": "pass"},
    ]  # fmt: skip
    rows = clause_rows(cells)
    assert [api_clause(row) for row in rows] == ClauseSerializer(rows, many=True).data


def test_the_gate_read_carries_a_replayed_runs_fidelity_for_the_customer(
    customer_owner, customer_org, actor, vendor_viewer, engagement, host
):
    # A G2 or G3 replay records it; the read passes on whatever the latest decision holds.
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    fidelity = {"reasons": [], "cells": [{"cell": "offload c=8 r1", "valid": True}]}
    result = {"verdict": "inconclusive", "clauses": [], "replay_fidelity": fidelity}
    services.decision_record(run_id=run.pk, result=result)
    body = read(token_client(customer_owner, customer_org), gate)
    assert body["latest_decision"]["replay_fidelity"] == fidelity
