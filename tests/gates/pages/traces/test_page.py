"""The trace pages: upload from the engagement page (a refused line is shown and nothing is
stored), the characterisation with its three pictures and the prediction per tier, and no way
in for another organization."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates import services
from gates.models import Engagement, WorkloadTrace
from gates.tenancy import viewer_for_user

pytestmark = pytest.mark.django_db
MOONCAKE = Path(__file__).resolve().parents[3] / "fixtures/traces/mooncake-synthetic_trace.jsonl"
LLAMA_70B = {
    "model": "llama-3.1-70b",
    "gpus": 8,
    "gpu_mem_gib": 80,
    "concurrency": 64,
    "context_tokens": 32000,
}


def upload(client, engagement, content: bytes, name: str = "trace.jsonl"):
    url = reverse("gates:trace-upload", args=[engagement.pk])
    body = {"file": SimpleUploadedFile(name, content), "format": "mooncake"}
    return client.post(url, body, follow=True)


def figure(page: str, name: str) -> dict:
    match = re.search(rf'<script id="figure-{name}" type="application/json">(.*?)</script>', page)
    assert match, f"no figure {name}"
    return json.loads(match.group(1))


def test_the_engagement_page_offers_the_upload_to_a_customer_owner(
    client, customer_owner, engagement
):
    client.force_login(customer_owner)
    page = client.get(reverse("gates:engagement-detail", args=[engagement.pk])).content.decode()
    assert 'aria-label="Upload a trace"' in page and "No trace uploaded." in page


def test_a_customer_viewer_sees_no_upload_form(client, customer_viewer, engagement):
    client.force_login(customer_viewer)
    page = client.get(reverse("gates:engagement-detail", args=[engagement.pk])).content.decode()
    assert 'aria-label="Upload a trace"' not in page


def test_a_bad_line_is_shown_with_its_line_and_field_and_nothing_is_stored(
    client, customer_owner, engagement
):
    client.force_login(customer_owner)
    bad = b'{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1]}\n'
    page = upload(client, engagement, bad).content.decode()
    assert "trace.jsonl was not stored: line 1, field hash_ids:" in page
    assert not WorkloadTrace.objects.exists()


def test_an_upload_shows_its_digest_and_then_its_figures_and_prediction(
    client, customer_owner, engagement
):
    client.force_login(customer_owner)
    response = upload(client, engagement, MOONCAKE.read_bytes())
    trace = WorkloadTrace.objects.get()
    page = response.content.decode()
    assert trace.sha256 in page and "characterizing" in page
    assert services.trace_claim(trace.pk)
    services.trace_characterize(trace.pk)
    Engagement.objects.filter(pk=engagement.pk).update(kv_plan=LLAMA_70B)
    url = reverse("gates:trace-detail", args=[trace.pk])
    page = client.get(url, {"dram_gib": "1024", "prefill_tokens_per_s": "5000"}).content.decode()
    curve = figure(page, "curve")
    assert curve["data"][0]["name"] == "LRU hit ratio"
    marked = [shape["x0"] for shape in curve["layout"]["shapes"] if shape["type"] == "line"]
    assert 59_670_984_704 // 40_960 in marked  # the GPU KV pool, from the saved plan
    assert figure(page, "reuse")["data"] and figure(page, "arrivals")["data"][0]["y"]
    assert 'data-tier="dram"' in page and 'data-field="ttft-band"' in page
    assert 'data-field="recommendation"' in page
    assert "65.1%" in page  # the infinite-cache ceiling of docs/workloads.md


def test_another_organization_cannot_see_or_upload(client, other_owner, actor, engagement):
    trace = services.trace_upload(
        actor=actor,
        viewer=viewer_for_user(actor.user),
        engagement=engagement,
        name="t.jsonl",
        content=MOONCAKE.read_bytes(),
        trace_format="mooncake",
    )
    client.force_login(other_owner)
    assert client.get(reverse("gates:trace-detail", args=[trace.pk])).status_code == 404
    response = client.post(
        reverse("gates:trace-upload", args=[engagement.pk]),
        {"file": SimpleUploadedFile("x.jsonl", b"{}"), "format": "mooncake"},
    )
    assert response.status_code == 404
    assert WorkloadTrace.objects.count() == 1
