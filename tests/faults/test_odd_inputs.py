"""Odd inputs and big bodies in the fault suite (issue 27 items 5 and 6): a valid spec past the
pages' 2.5 MiB limit is saved through the API, one past 32 MiB is a JSON 413, and ids that pass
`isdigit()` but not `int()` are a 400 or a 404 on every page and API route that reads one,
never a 500. The detailed cases live beside each piece (tests/gates/api/test_api_input.py,
tests/gates/pages/test_inputs.py); this is the sweep a tester would run from outside."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from gates.models import GateSpec
from gates.specs import validation as specs
from tests.gates.test_tenancy import token_client

pytestmark = [pytest.mark.fault, pytest.mark.django_db]

ODD_IDS = ["²", "³", "٣", "¹²", "9" * 5000, "1\u00a0", "0x10", "-1"]


@pytest.fixture
def vendor_api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run", "sign"])


def _g2_spec_of(size_bytes: int) -> dict:
    document = specs.default_spec("G2")
    count = size_bytes // 19_000 + 1
    document["equivalence"]["prompts"] = [f"prompt {n} " + "y" * 19_000 for n in range(count)]
    return document


def test_a_valid_spec_past_the_page_limit_is_saved_and_one_past_32_mib_is_a_json_413(
    vendor_api, engagement
):
    gate = engagement.gates.get(kind="G2")
    url = reverse("api:gate-spec", args=[gate.pk])
    body = json.dumps({"document": _g2_spec_of(3 * 2**20)})
    assert len(body) > 2.5 * 2**20
    response = vendor_api.put(url, body, content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    saved = GateSpec.objects.filter(gate=gate).count()
    oversized = {"document": {**_g2_spec_of(2**20), "padding": "x" * (32 * 2**20)}}
    response = vendor_api.put(url, json.dumps(oversized), content_type="application/json")
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    assert response.json()["error"] == "too_large"
    assert GateSpec.objects.filter(gate=gate).count() == saved  # nothing written


@pytest.mark.parametrize("odd", ODD_IDS)
def test_odd_ids_are_a_400_or_404_never_a_500(client, vendor_admin, vendor_api, engagement, odd):
    client.force_login(vendor_admin)
    gate = engagement.gates.get(kind="G1")
    answers = {
        "planner": client.get(reverse("gates:planner"), {"engagement": odd}),
        "run page": client.get(f"/runs/{odd}/"),
        "gate page": client.get(f"/gates/{odd}/"),
        "api run": vendor_api.get(f"/api/v1/runs/{odd}/"),
        "api gate statistics": vendor_api.get(f"/api/v1/gates/{odd}/statistics/"),
        "api runs after": vendor_api.get(reverse("api:gate-runs", args=[gate.pk]), {"after": odd}),
    }
    for where, response in answers.items():
        assert response.status_code in (200, 400, 404), (where, response.status_code)
