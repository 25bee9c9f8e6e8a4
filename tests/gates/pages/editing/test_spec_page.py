"""Editing a gate's spec from its page: every error the validation names is listed with its
field path and nothing is saved; a valid edit stores the very version `PUT .../spec/` would; a
signed version is never changed; customers are refused and another organization's gate is a
404."""

from __future__ import annotations

import copy
import json

import pytest
from django.urls import reverse

from gates.models import AuditEvent, GateSpec
from tests.contract import sign_as_both
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def engineer(client, vendor_engineer):
    client.force_login(vendor_engineer)
    return client


def url(gate) -> str:
    return reverse("gates:spec-edit", args=[gate.pk])


def post(client, gate, document, **inputs):
    spec = gate.current_spec
    repetitions = spec.document.get("repetitions") or {}
    fields = {"document": json.dumps(document), "digest": spec.digest}
    if gate.kind == "G3":  # the inputs as the page shows them, unless the test changes one
        fields |= {
            "tiers": ", ".join(str(tier) for tier in spec.document["tiers"]),
            "repetitions_min": repetitions.get("min"),
            "repetitions_max": repetitions.get("max"),
        }
    return client.post(url(gate), fields | inputs)


def test_the_gate_page_links_the_editor_and_the_editor_shows_the_latest_version(
    engineer, engagement
):
    g3 = engagement.gates.get(kind="G3")
    assert (
        f'href="{url(g3)}"'
        in engineer.get(reverse("gates:gate-detail", args=[g3.pk])).content.decode()
    )
    page = engineer.get(url(g3)).content.decode()
    assert "csrfmiddlewaretoken" in page and 'class="json-edit"' in page
    assert '<label for="id_document">Spec document (JSON)</label>' in page
    assert "&quot;at_least_pct&quot;: 25" in page  # indented JSON, one field a line
    assert 'value="4, 8, 16"' in page and 'name="repetitions_min"' in page
    assert '<code class="field-path">clauses[].at_least_pct</code>' in page  # meanings


def test_a_schema_error_is_listed_on_its_path_and_nothing_is_saved(engineer, engagement):
    g3 = engagement.gates.get(kind="G3")
    document = copy.deepcopy(g3.current_spec.document)
    document["clauses"][0]["at_least_pct"] = 0
    response = post(engineer, g3, document)
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="clauses[0].at_least_pct"' in page
    assert '<code class="field-path">clauses[0].at_least_pct</code>: 0 is less than' in page
    assert "Nothing was saved." in page
    assert g3.specs.count() == 1 and not AuditEvent.objects.filter(action="spec.update").exists()
    assert "&quot;at_least_pct&quot;: 0" in page  # the document comes back as typed


def test_an_error_at_an_inputs_path_is_shown_on_that_input_too(engineer, engagement):
    g3 = engagement.gates.get(kind="G3")
    response = post(engineer, g3, g3.current_spec.document, repetitions_min="1")
    page = response.content.decode()
    assert response.status_code == 400
    assert 'data-field="repetitions.min"' in page
    assert page.count("repetitions.min") >= 2  # in the list and on the input
    assert g3.specs.count() == 1


def test_json_that_does_not_parse_names_its_line(engineer, engagement):
    g1 = engagement.gates.get(kind="G1")
    response = engineer.post(url(g1), {"document": '{"gate": "G1",\n oops}', "digest": "x"})
    assert response.status_code == 400
    assert "document: not JSON: " in response.content.decode()
    assert "line 2" in response.content.decode()
    assert g1.specs.count() == 1


def test_a_valid_edit_of_a_signed_version_stores_the_version_the_api_would(
    engineer, engagement, other_engagement, vendor_admin, vendor_org
):
    g3 = engagement.gates.get(kind="G3")
    signed = sign_as_both(g3, acknowledge_underpowered=True)
    response = post(engineer, g3, signed.document, tiers="4, 8, 16, 32")
    assert response.status_code == 302
    assert response["Location"] == reverse("gates:gate-detail", args=[g3.pk]) + "#contract"
    made = g3.specs.get(version=2)
    assert made.document["tiers"] == [4, 8, 16, 32] and not made.in_force
    signed.refresh_from_db()
    assert signed.document["tiers"] == [4, 8, 16] and signed.in_force  # never changed in place
    # The same edit through the API, on another engagement whose v1 is signed the same way.
    other = other_engagement.gates.get(kind="G3")
    sign_as_both(other, acknowledge_underpowered=True)
    edited = copy.deepcopy(other.current_spec.document) | {"tiers": [4, 8, 16, 32]}
    api = token_client(vendor_admin, vendor_org, ["run"])
    assert api.put(f"/api/v1/gates/{other.pk}/spec/", edited, format="json").status_code == 201
    assert other.current_spec.digest == made.digest
    event = AuditEvent.objects.filter(action="spec.update", target_id=str(made.pk)).get()
    assert event.detail["version"] == 2
    page = engineer.get(response["Location"]).content.decode()
    assert "Saved G3 spec v2: " in page and "not in force until both parties sign" in page


def test_a_stale_digest_is_refused_and_saves_nothing(engineer, engagement):
    g1 = engagement.gates.get(kind="G1")
    response = engineer.post(
        url(g1), {"document": json.dumps(g1.current_spec.document), "digest": "0" * 64}
    )
    assert response.status_code == 400
    assert "the spec changed since you read it" in response.content.decode()
    assert g1.specs.count() == 1


@pytest.mark.parametrize("role", ["customer_owner", "customer_viewer"])
def test_customers_may_not_edit_a_spec(client, request, role, engagement):
    client.force_login(request.getfixturevalue(role))
    g1 = engagement.gates.get(kind="G1")
    assert client.get(url(g1)).status_code == 403
    assert post(client, g1, g1.current_spec.document).status_code == 403
    page = client.get(reverse("gates:gate-detail", args=[g1.pk])).content.decode()
    assert url(g1) not in page


def test_another_organizations_gate_is_a_404(client, customer_owner, other_engagement):
    client.force_login(customer_owner)
    theirs = other_engagement.gates.get(kind="G1")
    assert client.get(url(theirs)).status_code == 404
    assert post(client, theirs, theirs.current_spec.document).status_code == 404
    assert GateSpec.objects.filter(gate=theirs).count() == 1
