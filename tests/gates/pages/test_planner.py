"""The /planner/ page: plan from a form, the figure JSON, engagement prefill, audited saving."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from gates import services
from gates.errors import NotAllowedError, ServiceError
from gates.models import AuditEvent, Engagement
from gates.tenancy import viewer_for_user

pytestmark = pytest.mark.django_db

FORM = {
    "model": "llama-3.1-70b",
    "kv_dtype": "bf16",
    "gpus": "8",
    "gpu_mem_gib": "80",
    "reserved_fraction": "0.1",
    "concurrency": "64",
    "context_tokens": "32000",
    "reuse_ratio": "0.8",
}
SAVED = {
    "model": "llama-3.1-70b",
    "gpus": 8,
    "gpu_mem_gib": 80.0,
    "kv_dtype": "bf16",
    "reserved_fraction": 0.1,
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
}


def planner_url(engagement: Engagement | None = None) -> str:
    url = reverse("gates:planner")
    return f"{url}?engagement={engagement.pk}" if engagement else url


def save_url(engagement: Engagement) -> str:
    return reverse("gates:planner-save", args=[engagement.pk])


def embedded_figure(page: str) -> dict:
    found = re.search(r'<script id="planner-figure" type="application/json">(.*?)</script>', page)
    assert found, "the page embeds no figure"
    return json.loads(found.group(1))


def test_the_page_needs_a_login(client):
    response = client.get(planner_url())
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_blank_page_offers_the_presets_and_plans_nothing(client, customer_viewer):
    client.force_login(customer_viewer)
    page = client.get(planner_url()).content.decode()
    assert 'value="deepseek-v3"' in page and 'value="llama-3.1-70b" selected' in page
    assert "planner-figure" not in page and "plotly.min.js" not in page
    assert "gates/planner.js" in page


def test_a_submitted_form_shows_the_recommendation_numbers_and_figure(client, customer_viewer):
    client.force_login(customer_viewer)
    response = client.post(planner_url(), FORM)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Offload is worth a joint test" in page and "327,680 bytes" in page
    assert "55.6 GiB per GPU" in page  # the capacity of the docs' worked example
    assert "/static/vendor/plotly.min.js" in page and "cdn" not in page.lower()
    figure = embedded_figure(page)
    assert [trace["type"] for trace in figure["data"]] == ["heatmap", "scatter", "scatter"]
    assert figure["data"][1]["name"] == "fit boundary"


def test_bad_input_is_shown_on_its_field_and_nothing_is_planned(client, customer_viewer):
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, "gpus": "0"}).content.decode()
    assert 'data-error-for="gpus">gpus: must be at least 1' in page
    assert "planner-figure" not in page
    page = client.post(planner_url(), {**FORM, "tensor_parallel_size": "3"}).content.decode()
    assert 'data-error-for="tensor_parallel_size"' in page


def test_a_pasted_config_json_plans_with_its_weight_size(client, customer_viewer):
    client.force_login(customer_viewer)
    form = {**FORM, "model": "", "config_text": json.dumps(LLAMA_CONFIG)}
    page = client.post(planner_url(), form).content.decode()
    assert 'data-error-for="weight_gib">weight_bytes: required' in page
    page = client.post(planner_url(), {**form, "weight_gib": "131.4"}).content.decode()
    assert "327,680 bytes" in page and "planner-figure" in page


def test_architecture_fields_may_be_pasted_instead(client, customer_viewer):
    client.force_login(customer_viewer)
    fields = {"name": "tiny", "layers": 2, "kv_heads": 8, "head_dim": 128, "parameters": 10**9}
    form = {**FORM, "model": "", "config_text": json.dumps(fields)}
    page = client.post(planner_url(), form).content.decode()
    assert "8,192 bytes" in page  # 2 x 8 x 128 x 2 x 2


def test_an_uploaded_config_json_is_read_and_a_broken_one_is_named(client, customer_viewer):
    client.force_login(customer_viewer)
    upload = SimpleUploadedFile("config.json", json.dumps(LLAMA_CONFIG).encode())
    form = {**FORM, "model": "", "weight_gib": "131.4", "config_file": upload}
    assert "327,680 bytes" in client.post(planner_url(), form).content.decode()
    broken = SimpleUploadedFile("config.json", b'{"num_hidden_layers": 80,')
    page = client.post(planner_url(), {**form, "config_file": broken}).content.decode()
    assert 'data-error-for="config_file">config.json is not valid JSON' in page


def test_a_preset_and_a_config_together_are_refused(client, customer_viewer):
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, "config_text": "{}"}).content.decode()
    assert 'data-error-for="model">Choose a preset or give a config.json, not both.' in page


def test_an_engagement_with_saved_inputs_prefills_and_plans_at_once(
    client, customer_viewer, engagement
):
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=SAVED)
    client.force_login(customer_viewer)
    page = client.get(planner_url(engagement)).content.decode()
    assert "Prefilled from the inputs saved" in page
    assert 'name="concurrency" value="64"' in page and "Offload is worth a joint test" in page
    assert embedded_figure(page)["data"]
    assert "Save these inputs" not in page  # a customer viewer may not save


def test_a_saved_config_json_is_prefilled_as_text_with_its_weights_in_gib(
    client, vendor_admin, engagement
):
    saved = {**SAVED, "config": LLAMA_CONFIG, "weight_bytes": 141_107_412_992}
    del saved["model"]
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=saved)
    client.force_login(vendor_admin)
    page = client.get(planner_url(engagement)).content.decode()
    weight_gib = 141_107_412_992 / 2**30  # 131.4165...
    assert "&quot;num_hidden_layers&quot;: 80" in page and f'value="{weight_gib}"' in page
    assert "327,680 bytes" in page
    form = {**FORM, "model": "", "config_text": json.dumps(LLAMA_CONFIG)}
    client.post(save_url(engagement), {**form, "weight_gib": str(weight_gib)})
    engagement.refresh_from_db()
    assert engagement.kv_plan == saved  # the round trip through GiB keeps every byte


def test_an_engagement_model_name_preselects_its_preset(client, customer_viewer, engagement):
    Engagement.objects.filter(pk=engagement.pk).update(model_name="Qwen/Qwen3-32B")
    client.force_login(customer_viewer)
    page = client.get(planner_url(engagement)).content.decode()
    assert 'value="qwen3-32b" selected' in page and "planner-figure" not in page


def test_another_organizations_engagement_is_a_404(client, other_owner, engagement):
    client.force_login(other_owner)
    assert client.get(planner_url(engagement)).status_code == 404
    assert client.get(reverse("gates:planner") + "?engagement=x").status_code == 400
    assert client.post(save_url(engagement), FORM).status_code == 404


def test_a_vendor_engineer_saves_the_inputs_and_it_is_audited(client, vendor_engineer, engagement):
    client.force_login(vendor_engineer)
    assert "Save these inputs" in client.get(planner_url(engagement)).content.decode()
    response = client.post(save_url(engagement), FORM)
    assert response.status_code == 302 and response["Location"] == planner_url(engagement)
    engagement.refresh_from_db()
    assert engagement.kv_plan == SAVED
    event = AuditEvent.objects.get(action="engagement.kv_plan_save")
    assert event.actor == vendor_engineer and event.target_id == str(engagement.pk)
    assert event.detail == {"before": {}, "after": SAVED}
    assert "Planner inputs saved" in client.get(response["Location"]).content.decode()


@pytest.mark.parametrize("role", ["customer_viewer", "customer_owner"])
def test_customers_cannot_save(client, request, role, engagement):
    client.force_login(request.getfixturevalue(role))
    response = client.post(save_url(engagement), FORM, follow=True)
    engagement.refresh_from_db()
    assert engagement.kv_plan == {}
    assert not AuditEvent.objects.filter(action="engagement.kv_plan_save").exists()
    assert "only vendor engineers and admins may save" in response.content.decode()


def test_the_save_form_needs_a_csrf_token(vendor_admin, engagement):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(vendor_admin)
    assert strict.post(save_url(engagement), FORM).status_code == 403
    engagement.refresh_from_db()
    assert engagement.kv_plan == {}


def test_invalid_inputs_are_not_saved(client, vendor_admin, engagement):
    client.force_login(vendor_admin)
    response = client.post(save_url(engagement), {**FORM, "gpus": "0"})
    assert response.status_code == 400 and 'data-error-for="gpus"' in response.content.decode()
    engagement.refresh_from_db()
    assert engagement.kv_plan == {}


def test_a_saved_config_is_audited_by_its_digest(actor, vendor_viewer, engagement):
    inputs = {**SAVED, "model": None, "config": LLAMA_CONFIG, "weight_bytes": 141_107_412_992}
    services.engagement_kv_plan_save(
        actor=actor, viewer=vendor_viewer, engagement=engagement, inputs=inputs
    )
    engagement.refresh_from_db()
    assert engagement.kv_plan["config"] == LLAMA_CONFIG and "model" not in engagement.kv_plan
    after = AuditEvent.objects.get(action="engagement.kv_plan_save").detail["after"]
    assert after["config"].startswith("sha256:") and len(after["config"]) == 71


def test_the_service_names_the_bad_field_and_checks_the_role(
    actor, vendor_viewer, customer_owner, engagement
):
    with pytest.raises(ServiceError) as refused:
        services.engagement_kv_plan_save(
            actor=actor, viewer=vendor_viewer, engagement=engagement, inputs={**SAVED, "gpus": 0}
        )
    assert refused.value.field == "gpus"
    with pytest.raises(NotAllowedError):
        services.engagement_kv_plan_save(
            actor=actor,
            viewer=viewer_for_user(customer_owner),
            engagement=engagement,
            inputs=SAVED,
        )


def test_the_kv_warning_include_renders_only_with_a_warning(engagement):
    html = render_to_string(
        "gates/_kv_warning.html", {"kv_warning": "It fits.", "engagement": engagement}
    )
    assert "It fits." in html and planner_url(engagement) in html
    assert render_to_string("gates/_kv_warning.html", {"kv_warning": ""}).strip() == ""
