"""Workload traces: validated line by line before anything is stored, kept with their SHA-256,
characterised once (a second poke does nothing), and named by digest in specs."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest

from gates import services
from gates.errors import DuplicateError, NotAllowedError, ServiceError
from gates.models import AuditEvent, WorkloadTrace
from gates.tenancy import viewer_for_user
from worker.tasks import characterize_trace

pytestmark = pytest.mark.django_db
MOONCAKE = Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
GOOD = (
    b'{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}\n'
    b'{"timestamp": 10, "input_length": 600, "output_length": 5, "hash_ids": [1, 3]}\n'
)


def upload(actor, engagement, content: bytes = GOOD, **overrides) -> WorkloadTrace:
    values = {"name": "trace.jsonl", "content": content, "trace_format": "mooncake"}
    return services.trace_upload(
        actor=actor,
        viewer=viewer_for_user(actor.user),
        engagement=engagement,
        **(values | overrides),
    )


def characterised(trace: WorkloadTrace) -> WorkloadTrace:
    assert services.trace_claim(trace.pk)
    services.trace_characterize(trace.pk)
    trace.refresh_from_db()
    return trace


def test_an_upload_is_stored_with_its_sha256_and_counted(actor, engagement):
    trace = upload(actor, engagement)
    assert trace.sha256 == hashlib.sha256(GOOD).hexdigest()
    assert bytes(trace.content) == GOOD and trace.size == len(GOOD)
    assert (trace.requests, trace.block_tokens, trace.state) == (2, 512, "characterizing")
    assert AuditEvent.objects.filter(action="trace.upload").count() == 1


@pytest.mark.parametrize(
    ("line", "field", "content"),
    [
        (
            2,
            "hash_ids",
            GOOD.splitlines()[0] + b'\n{"timestamp": 5, "input_length": 1500, '
            b'"output_length": 1, "hash_ids": [1]}\n',
        ),
        (2, "timestamp", GOOD.splitlines()[1] + b"\n" + GOOD.splitlines()[0] + b"\n"),
        (
            1,
            "input_length",
            b'{"timestamp": 0, "input_length": -3, "output_length": 1, "hash_ids": []}\n',
        ),
        (3, "output_length", GOOD + b'{"timestamp": 20, "input_length": 10, "hash_ids": [9]}\n'),
    ],
)
def test_a_bad_line_is_refused_by_line_and_field_and_nothing_is_stored(
    actor, engagement, line, field, content
):
    with pytest.raises(ServiceError) as refused:
        upload(actor, engagement, content)
    assert refused.value.field == field
    assert refused.value.detail.startswith(f"line {line}, field {field}:")
    assert not WorkloadTrace.objects.exists()
    assert not AuditEvent.objects.filter(action="trace.upload").exists()


def test_text_that_is_not_utf8_is_refused_naming_the_file(actor, engagement):
    with pytest.raises(ServiceError) as refused:
        upload(actor, engagement, b"\xff\xfe{")
    assert refused.value.field == "file"
    assert not WorkloadTrace.objects.exists()


def test_the_same_file_twice_is_a_duplicate(actor, engagement):
    upload(actor, engagement)
    with pytest.raises(DuplicateError):
        upload(actor, engagement)
    assert WorkloadTrace.objects.count() == 1


def test_a_customer_viewer_may_not_upload(customer_viewer, engagement):
    with pytest.raises(NotAllowedError):
        upload(services.Actor(user=customer_viewer), engagement)


def test_a_customer_owner_may_upload_their_own_traffic(customer_owner, engagement):
    assert upload(services.Actor(user=customer_owner), engagement).requests == 2


def test_characterisation_stores_the_figures_and_full_progress(actor, engagement):
    trace = characterised(upload(actor, engagement, MOONCAKE.read_bytes()))
    assert trace.state == "ready" and trace.progress_done == trace.requests == 3993
    assert trace.profile["requests"] == 3993
    assert round(trace.profile["infinite_cache_hit_ratio"], 3) == 0.651  # docs/workloads.md
    assert trace.profile["hit_ratio_curve"][-1][1] == trace.profile["infinite_cache_hit_ratio"]


def test_a_second_poke_finds_the_characterisation_done(actor, engagement):
    trace = characterised(upload(actor, engagement))
    assert not services.trace_claim(trace.pk)
    assert services.traces_to_characterize() == []


def test_a_live_claim_is_not_taken_twice(actor, engagement):
    trace = upload(actor, engagement)
    assert services.traces_to_characterize() == [trace.pk]
    assert services.trace_claim(trace.pk)
    assert not services.trace_claim(trace.pk)
    assert services.traces_to_characterize() == []


def test_a_load_shape_trace_is_characterised_without_hit_figures(actor, engagement):
    burst = b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    burst += b"5,GPT-4,100,20,120,Conversation log\n7,GPT-4,300,10,310,Conversation log\n"
    trace = characterised(upload(actor, engagement, burst, trace_format="burstgpt"))
    assert trace.block_tokens is None
    assert trace.profile["prefix_information"] is False
    assert trace.profile["notice"] == "load shape only, no prefix information"


# ---- the digest in the spec --------------------------------------------------------------------


def g3_with_trace(engagement, trace_ref: dict) -> dict:
    document = copy.deepcopy(engagement.gates.get(kind="G3").current_spec.document)
    document["workload"]["trace"] = trace_ref
    return document


def test_a_spec_names_an_uploaded_trace_by_digest(actor, engagement):
    trace = upload(actor, engagement)
    gate = engagement.gates.get(kind="G3")
    reference = {"sha256": trace.sha256, "format": "mooncake", "block_tokens": 512}
    spec = services.gate_spec_update(
        actor=actor, gate=gate, document=g3_with_trace(engagement, reference)
    )
    assert spec.document["workload"]["trace"]["sha256"] == trace.sha256


def test_a_spec_naming_a_digest_the_engagement_lacks_is_refused_naming_the_field(
    actor, engagement, other_engagement
):
    elsewhere = upload(actor, other_engagement)  # another engagement's trace does not count
    gate = engagement.gates.get(kind="G3")
    document = g3_with_trace(engagement, {"sha256": elsewhere.sha256, "format": "mooncake"})
    with pytest.raises(ServiceError) as refused:
        services.gate_spec_update(actor=actor, gate=gate, document=document)
    assert refused.value.field == "workload.trace.sha256"
    assert gate.specs.count() == 1


def test_a_spec_naming_the_trace_with_another_block_size_is_refused(actor, engagement):
    trace = upload(actor, engagement)
    gate = engagement.gates.get(kind="G3")
    reference = {"sha256": trace.sha256, "format": "mooncake", "block_tokens": 16}
    with pytest.raises(ServiceError) as refused:
        services.gate_spec_update(
            actor=actor, gate=gate, document=g3_with_trace(engagement, reference)
        )
    assert refused.value.field == "workload.trace.block_tokens"


def test_the_worker_task_characterises_once_and_the_sweep_finds_nothing_left(actor, engagement):
    trace = upload(actor, engagement)
    characterize_trace(trace.pk)
    characterize_trace(trace.pk)  # a redelivered poke: already done, nothing happens
    trace.refresh_from_db()
    assert trace.state == "ready" and trace.profile["requests"] == 2
    assert services.traces_to_characterize() == []
