"""Malformed and hostile input (issue 12 item 4): every case is a 4xx JSON error naming the
field (or a form error on a page) and writes nothing; never a 500."""

from __future__ import annotations

import json
import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from gates.models import AuditEvent, GateSpec, Host, Run
from gates.specs import validation as specs
from tests.conftest import HOST_KEY
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def vendor_api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run", "sign"])


def deep(depth: int, key: str | None = None) -> str:
    if key is None:
        return "[" * depth + "1" + "]" * depth
    return f'{{"{key}":' * depth + "1" + "}" * depth


def g2_with_prompt(prompt_json: str) -> str:
    """The G2 default spec as JSON text whose first prompt is the raw JSON string given."""
    document = specs.default_spec("G2")
    document["equivalence"]["prompts"][0] = "PLACEHOLDER"
    return json.dumps({"document": document}).replace('"PLACEHOLDER"', prompt_json)


def g1_with(**expect) -> str:
    document = specs.default_spec("G1")
    document["expect"].update(expect)
    return json.dumps({"document": document})


def g3_without_workload(name: str) -> str:
    document = specs.default_spec("G3")
    del document["workload"][name]
    return json.dumps({"document": document})


HOST_BODY = {
    "organization": "northwind",
    "name": "gpu-1",
    "profile": "vllm",
    "address": "10.0.0.9",
    "username": "bench",
    "host_key": HOST_KEY,
    "key_file_path": "/etc/tollgate/key",
}

# (case, gate kind or None, body as raw JSON text, status, field)
JSON_CASES = [
    ("spec-20000-deep", "G1", '{"document": ' + deep(20_000, "a") + "}", 400, "document.a.a."),
    ("spec-100000-deep-list", "G1", deep(100_000), 400, "[0][0]"),
    (
        "spec-prompt-nul",
        "G2",
        g2_with_prompt('"a\\u0000b"'),
        400,
        "document.equivalence.prompts[0]",
    ),
    ("spec-prompt-lone-surrogate", "G2", g2_with_prompt('"\\ud800"'), 400, "document.equivalence"),
    ("spec-key-lone-surrogate", "G1", '{"document": {"\\udfff": 1}}', 400, "document.\\udfff"),
    ("spec-nan", "G1", '{"document": {"version": NaN}}', 400, None),
    ("spec-bad-regex", "G1", g1_with(gpu_model_pattern="["), 400, "expect.gpu_model_pattern"),
    (
        "spec-huge-repeat",
        "G1",
        g1_with(kernel_pattern="a{4294967296}"),
        400,
        "expect.kernel_pattern",
    ),
    ("spec-workload-field", "G3", g3_without_workload("prefix_len"), 400, "workload.prefix_len"),
    ("spec-not-utf8", "G1", b'{"document": "\xff"}', 400, None),
]


@pytest.mark.parametrize(
    ("kind", "body", "status", "field"),
    [case[1:] for case in JSON_CASES],
    ids=[case[0] for case in JSON_CASES],
)
def test_a_hostile_spec_body_is_a_4xx_naming_the_field_and_stores_nothing(
    vendor_api, engagement, kind, body, status, field
):
    gate = engagement.gates.get(kind=kind)
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), body, content_type="application/json"
    )
    assert response.status_code == status, response.content[:300]
    error = response.json()
    assert error["error"] in ("parse_error", "invalid_spec") and error["detail"]
    if field is not None:
        assert error["field"].startswith(field), error
    assert GateSpec.objects.filter(gate=gate).count() == 1


@pytest.mark.parametrize(
    ("url_name", "body", "field"),
    [
        ("api:host-list", {**HOST_BODY, "labels": {"rack": "a\u0000"}}, "labels.rack"),
        ("api:host-list", {**HOST_BODY, "name": "\ud800"}, "name"),
        ("api:engagement-list", {"organization": "northwind", "title": "\u0000"}, "title"),
        ("api:planner", {"model": deep(70)}, "model[0][0]"),
    ],
    ids=["host-label-nul", "host-name-surrogate", "engagement-title-nul", "planner-deep"],
)
def test_every_json_endpoint_refuses_unstorable_or_deep_json(
    vendor_api, customer_org, url_name, body, field
):
    text = json.dumps(body).replace('"' + deep(70) + '"', deep(70))
    response = vendor_api.post(reverse(url_name), text, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"].startswith(field), response.json()
    assert not Host.objects.exists() and not AuditEvent.objects.filter(action="host.create")


def test_a_duplicate_host_name_is_a_409_naming_the_name(vendor_api, customer_org, host):
    response = vendor_api.post(reverse("api:host-list"), HOST_BODY, format="json")
    assert response.status_code == 409, response.json()
    assert response.json() | {"detail": ""} == {"error": "duplicate", "detail": "", "field": "name"}
    assert Host.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_for_one_host_name_give_one_host_and_one_409(
    vendor_admin, vendor_org, customer_org
):
    clients = [token_client(vendor_admin, vendor_org, scopes=["read", "run"]) for _ in range(2)]
    start, answers = threading.Barrier(2), []

    def register(client):
        start.wait()
        try:
            answers.append(client.post(reverse("api:host-list"), HOST_BODY, format="json"))
        finally:
            connection.close()

    threads = [threading.Thread(target=register, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(a.status_code for a in answers) == [201, 409]
    assert Host.objects.count() == 1
    assert AuditEvent.objects.filter(action="host.create").count() == 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (deep(100_000).encode(), "deeper than 64"),
        (b'{"text": "a\\u0000"}\n', "U+0000"),
        (b'{"text": "\\udbff"}\n', "surrogate"),
    ],
    ids=["100000-deep", "nul", "lone-surrogate"],
)
def test_an_answers_upload_of_hostile_json_is_a_400_naming_the_file(
    vendor_api, engagement, content, problem
):
    gate = engagement.gates.get(kind="G1")
    run = vendor_api.post(reverse("api:gate-runs", args=[gate.pk]), {"upload": True}, format="json")
    response = vendor_api.post(
        reverse("api:run-results", args=[run.json()["id"]]),
        {"kind": "answers", "arm": "offload", "file": SimpleUploadedFile("a.jsonl", content)},
        format="multipart",
    )
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == "file" and problem in response.json()["detail"]


@pytest.mark.parametrize("value", ["abc", "1; drop", "", "9999999999999999999999", "-1"])
def test_the_run_start_page_answers_a_bad_host_with_a_form_error(
    client, vendor_admin, engagement, host, value
):
    client.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G1")
    response = client.post(reverse("gates:run-start", args=[gate.pk]), {"host": value}, follow=True)
    assert response.redirect_chain == [(reverse("gates:gate-detail", args=[gate.pk]), 302)]
    assert "host: choose one of the hosts" in response.content.decode()
    assert not Run.objects.exists()


def test_a_json_body_over_the_size_cap_is_a_413_before_it_is_parsed(
    vendor_api, engagement, settings
):
    settings.TOLLGATE_MAX_JSON_BODY_BYTES = 1000
    gate = engagement.gates.get(kind="G1")
    body = json.dumps({"document": {"padding": "x" * 1000}})
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), body, content_type="application/json"
    )
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert GateSpec.objects.filter(gate=gate).count() == 1


def big_g2_spec() -> dict:
    """A G2 spec the schema allows at its largest: 500 prompts of 19,000 characters (9.5 MB)."""
    document = specs.default_spec("G2")
    document["equivalence"]["prompts"] = [f"prompt {n} " + "y" * 19_000 for n in range(500)]
    return document


def test_a_valid_spec_of_9_mb_is_saved_through_the_api(vendor_api, engagement):
    gate = engagement.gates.get(kind="G2")
    body = json.dumps({"document": big_g2_spec()})
    assert len(body) > 3 * 2.5 * 2**20  # far past the form limit (DATA_UPLOAD_MAX_MEMORY_SIZE)
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), body, content_type="application/json"
    )
    assert response.status_code == 201, response.content[:300]
    assert len(GateSpec.objects.get(gate=gate, version=2).document["equivalence"]["prompts"]) == 500


def test_a_body_past_the_documented_32_mib_is_a_json_413(vendor_api, engagement):
    gate = engagement.gates.get(kind="G2")
    document = {**big_g2_spec(), "padding": "x" * (32 * 2**20)}
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]),
        json.dumps({"document": document}),
        content_type="application/json",
    )
    assert response.status_code == 413
    assert response.json()["error"] == "too_large" and "33554432 bytes" in response.json()["detail"]
    assert GateSpec.objects.filter(gate=gate).count() == 1


def test_a_page_form_past_its_limit_is_a_413_page_that_says_the_limit(
    client, vendor_admin, engagement
):
    gate = engagement.gates.get(kind="G1")
    client.force_login(vendor_admin)
    response = client.post(reverse("gates:spec-sign", args=[gate.pk]), {"note": "x" * 3 * 2**20})
    assert response.status_code == 413
    assert "A form on these pages accepts at most 2.5 MiB" in response.content.decode()


def test_an_upload_form_field_past_the_form_limit_is_a_json_413(vendor_api, engagement):
    gate = engagement.gates.get(kind="G1")
    run = vendor_api.post(reverse("api:gate-runs", args=[gate.pk]), {"upload": True}, format="json")
    response = vendor_api.post(
        reverse("api:run-results", args=[run.json()["id"]]),
        {"kind": "x" * 3 * 2**20, "file": SimpleUploadedFile("a.json", b"{}")},
        format="multipart",
    )
    assert response.status_code == 413 and response.json()["error"] == "too_large"


def test_a_spec_whose_model_path_could_never_start_a_run_is_refused_naming_it(
    vendor_api, engagement
):
    gate = engagement.gates.get(kind="G3")
    document = {**specs.default_spec("G3"), "server": {"model_path": "/models/../../etc"}}
    response = vendor_api.put(
        reverse("api:gate-spec", args=[gate.pk]), {"document": document}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"].endswith("server.model_path")
    assert GateSpec.objects.filter(gate=gate).count() == 1
