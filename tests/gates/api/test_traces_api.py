"""/api/v1/engagements/{id}/traces/ and /api/v1/traces/{id}/: upload with the line and field of a
refusal, the digest to name in a spec, the characterisation with the planner's prediction, and
another organization that can neither see nor name the trace."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates import services
from gates.models import Engagement, WorkloadTrace
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
MOONCAKE = Path(__file__).resolve().parents[2] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
LLAMA_70B = {
    "model": "llama-3.1-70b",
    "gpus": 8,
    "gpu_mem_gib": 80,
    "concurrency": 64,
    "context_tokens": 32000,
}
BAD = (
    b'{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}\n'
    b'{"timestamp": 10, "input_length": 2000, "output_length": 5, "hash_ids": [1, 3]}\n'
)


@pytest.fixture
def api(customer_owner, customer_org):
    return token_client(customer_owner, customer_org, scopes=["read", "run"])


@pytest.fixture
def other_api(other_owner, other_customer_org):
    return token_client(other_owner, other_customer_org, scopes=["read", "run"])


def send(client, engagement, content: bytes, name: str = "trace.jsonl", **fields):
    body = {"file": SimpleUploadedFile(name, content), "format": "mooncake"} | fields
    url = reverse("api:engagement-traces", args=[engagement.pk])
    return client.post(url, body, format="multipart")


def characterise(trace_id: int) -> None:
    assert services.trace_claim(trace_id)
    services.trace_characterize(trace_id)


def test_an_upload_answers_the_digest_to_name_in_a_spec(api, engagement):
    response = send(api, engagement, MOONCAKE.read_bytes())
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["requests"] == 3993 and body["state"] == "characterizing"
    assert body["progress"] == {"done": 0, "total": 3993}
    assert body["spec_reference"] == {
        "sha256": WorkloadTrace.objects.get().sha256,
        "format": "mooncake",
        "block_tokens": 512,
    }
    listed = api.get(reverse("api:engagement-traces", args=[engagement.pk])).json()["results"]
    assert [trace["id"] for trace in listed] == [body["id"]]


def test_a_bad_line_is_a_400_naming_line_and_field_and_nothing_is_stored(api, engagement):
    response = send(api, engagement, BAD)
    assert response.status_code == 400
    assert response.json()["field"] == "hash_ids"
    assert response.json()["detail"].startswith("line 2, field hash_ids:")
    assert not WorkloadTrace.objects.exists()


def test_a_read_token_cannot_upload(customer_owner, customer_org, engagement):
    reader = token_client(customer_owner, customer_org, scopes=["read"])
    assert send(reader, engagement, MOONCAKE.read_bytes()).status_code == 403
    assert not WorkloadTrace.objects.exists()


def test_the_detail_holds_the_figures_and_the_prediction_per_tier(api, engagement):
    trace_id = send(api, engagement, MOONCAKE.read_bytes()).json()["id"]
    characterise(trace_id)
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=LLAMA_70B)
    url = reverse("api:trace-detail", args=[trace_id])
    body = api.get(url, {"dram_gib": 1024, "prefill_tokens_per_s": 5000}).json()
    assert body["state"] == "ready" and body["progress"] == {"done": 3993, "total": 3993}
    assert body["profile"]["requests"] == 3993
    gpu, dram, ssd = body["prediction"]["tiers"]
    assert [gpu["tier"], dram["tier"], ssd["tier"]] == ["gpu", "dram", "ssd"]
    assert gpu["capacity_tokens"] == 59_670_984_704 // 40_960
    assert dram["capacity_tokens"] == 1024 * 1024**3 // 327_680
    assert 0 < dram["low"] <= dram["high"]
    assert body["prediction"]["ttft_saving"]["low"] <= body["prediction"]["ttft_saving"]["high"]
    assert body["prediction"]["recommendation"] in (
        "offload_worth_testing",
        "offload_will_not_help",
    )
    assert body["prediction"]["reason"]


def test_without_a_kv_plan_the_detail_says_what_is_missing(api, engagement):
    trace_id = send(api, engagement, MOONCAKE.read_bytes()).json()["id"]
    characterise(trace_id)
    body = api.get(reverse("api:trace-detail", args=[trace_id])).json()
    assert body["prediction"] is None
    assert "KV plan" in body["prediction_missing"]


def test_another_organization_can_neither_see_nor_name_the_trace(
    api, other_api, actor, engagement, other_engagement
):
    trace_id = send(api, engagement, MOONCAKE.read_bytes()).json()["id"]
    assert other_api.get(reverse("api:trace-detail", args=[trace_id])).status_code == 404
    url = reverse("api:engagement-traces", args=[engagement.pk])
    assert other_api.get(url).status_code == 404
    assert send(other_api, engagement, MOONCAKE.read_bytes()).status_code == 404
    # Naming its digest in their own engagement's spec is refused: they have no such upload.
    gate = other_engagement.gates.get(kind="G3")
    document = copy.deepcopy(gate.current_spec.document)
    document["workload"]["trace"] = {
        "sha256": WorkloadTrace.objects.get().sha256,
        "format": "mooncake",
    }
    vendor = token_client(actor.user, actor.user.memberships.get().organization, ["read", "run"])
    response = vendor.put(reverse("api:gate-spec", args=[gate.pk]), document, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "workload.trace.sha256"
