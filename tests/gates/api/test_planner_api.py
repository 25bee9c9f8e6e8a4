"""POST /api/v1/planner/: the plan as JSON, field errors, and engagement inputs through tenancy."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from gates.models import Engagement
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db

LLAMA_70B = {
    "model": "llama-3.1-70b",
    "gpus": 8,
    "gpu_mem_gib": 80,
    "concurrency": 64,
    "context_tokens": 32000,
    "reuse_ratio": 0.8,
}
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
}


@pytest.fixture
def api(customer_owner, customer_org) -> APIClient:
    """A customer's read-only token: the least a token can do."""
    return token_client(customer_owner, customer_org, scopes=["read"])


def post(client: APIClient, body: object, query: str = ""):
    return client.post(reverse("api:planner") + query, body, format="json")


def test_it_plans_the_worked_example_of_the_docs(api):
    response = post(api, LLAMA_70B)
    assert response.status_code == 200
    body = response.json()
    assert body["kv_bytes_per_token"] == 327_680
    assert body["kv_capacity_per_gpu_bytes"] == 59_670_984_704
    assert body["kv_capacity_bytes"] == 8 * 59_670_984_704
    assert body["kv_demand_bytes"] == 8 * 83_886_080_000
    assert body["fits"] is False
    assert body["recommendation"] == "offload_worth_testing"
    assert body["boundary"] == {
        "max_concurrency_at_context": 45,
        "max_context_at_concurrency": 22_762,
    }
    assert body["reasons"] and body["inputs"] == LLAMA_70B
    assert "figure" not in body


def test_the_figure_comes_only_when_asked_for(api):
    body = post(api, LLAMA_70B, "?figure=1").json()
    names = {trace["name"] for trace in body["figure"]["data"]}
    assert names == {"demand / capacity", "fit boundary", "this workload"}
    assert body["figure"]["data"][0]["type"] == "heatmap"


def test_a_config_json_model_needs_its_weight_size(api):
    body = {**LLAMA_70B, "model": None, "config": LLAMA_CONFIG}
    response = post(api, body)
    assert response.status_code == 400
    assert response.json()["field"] == "weight_bytes"
    ok = post(api, {**body, "weight_bytes": 141_107_412_992}).json()
    assert ok["kv_bytes_per_token"] == 327_680 and ok["weight_bytes"] == 141_107_412_992


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": 8.5}, "gpus"),
        ({"context_tokens": -1}, "context_tokens"),
        ({"kv_dtype": "fp4"}, "kv_dtype"),
        ({"reuse_ratio": True}, "reuse_ratio"),
        ({"reuse_ratio": 1.5}, "reuse_ratio"),
        ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
        ({"model": "llama-9-900b"}, "model"),
        ({"model": None, "config": "{not json"}, "config"),
        ({"model": None, "config": {"num_hidden_layers": "x"}}, "config.num_hidden_layers"),
        ({"model": {"layers": 2}}, "model.kv_heads"),
        ({"gpu_memory": 80}, "gpu_memory"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, change, field):
    body = {**LLAMA_70B, **change}
    response = post(api, {k: v for k, v in body.items() if v is not None})
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == field and error["error"] == "invalid" and error["detail"]


def test_a_missing_field_is_named(api):
    body = {k: v for k, v in LLAMA_70B.items() if k != "gpus"}
    assert post(api, body).json() == {"error": "invalid", "detail": "is required", "field": "gpus"}


def test_a_body_that_is_not_an_object_is_refused_as_json(api):
    response = post(api, [1, 2])
    assert response.status_code == 400 and set(response.json()) >= {"error", "detail"}


def test_anonymous_callers_are_refused(db):
    response = post(APIClient(), LLAMA_70B)
    assert response.status_code in (401, 403) and "error" in response.json()


def test_a_signed_in_browser_session_may_plan(client, customer_viewer):
    client.force_login(customer_viewer)
    response = client.post(reverse("api:planner"), LLAMA_70B, content_type="application/json")
    assert response.status_code == 200


def test_an_engagement_brings_its_saved_inputs_and_fields_override_them(api, engagement):
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=LLAMA_70B)
    saved = post(api, {"engagement": engagement.pk}).json()
    assert saved["concurrency"] == 64 and saved["kv_bytes_per_token"] == 327_680
    lighter = post(api, {"engagement": engagement.pk, "concurrency": 32}).json()
    assert lighter["concurrency"] == 32 and lighter["fits"] is True
    assert lighter["recommendation"] == "keep_resident"


def test_an_engagement_model_name_that_names_a_preset_is_the_starting_model(api, engagement):
    Engagement.objects.filter(pk=engagement.pk).update(model_name="Llama-3.1-8B-Instruct")
    rest = {k: v for k, v in LLAMA_70B.items() if k != "model"}
    body = post(api, {"engagement": engagement.pk, **rest}).json()
    assert body["model"] == "llama-3.1-8b" and body["kv_bytes_per_token"] == 131_072


def test_an_engagement_with_nothing_to_start_from_is_named(api, engagement):
    response = post(api, {"engagement": engagement.pk})
    assert response.status_code == 400 and response.json()["field"] == "engagement"


def test_another_organizations_engagement_is_a_404(api, other_engagement):
    Engagement.objects.filter(pk=other_engagement.pk).update(kv_plan=LLAMA_70B)
    response = post(api, {"engagement": other_engagement.pk})
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert post(api, {"engagement": 10**9}).status_code == 404


def test_vendor_staff_may_plan_from_any_engagement(vendor_admin, vendor_org, other_engagement):
    Engagement.objects.filter(pk=other_engagement.pk).update(kv_plan=LLAMA_70B)
    vendor = token_client(vendor_admin, vendor_org, scopes=["read"])
    assert post(vendor, {"engagement": other_engagement.pk}).status_code == 200


def test_a_token_narrowed_to_one_engagement_sees_no_other(
    customer_owner, customer_org, engagement, actor
):
    from gates import services

    second = services.engagement_create(
        actor=actor, organization=customer_org, title="second", model_name="m"
    )
    Engagement.objects.update(kv_plan=LLAMA_70B)
    narrowed = token_client(customer_owner, customer_org, engagement=engagement)
    assert post(narrowed, {"engagement": engagement.pk}).status_code == 200
    assert post(narrowed, {"engagement": second.pk}).status_code == 404


def test_the_schema_describes_the_planner(api):
    schema = api.get(reverse("api-schema"), HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/planner/"]["post"]
    assert set(operation["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "406",
        "413",
        "415",
        "429",
    }
    result = schema["components"]["schemas"]["PlannerResult"]["properties"]
    assert {"kv_bytes_per_token", "kv_demand_bytes", "kv_capacity_bytes", "fits"} <= set(result)
