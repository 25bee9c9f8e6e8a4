"""Schemathesis against the live OpenAPI schema, in-process over WSGI: generated requests to
every operation, none answered 5xx, every answer as documented (status, content type, body,
nullable fields), schema-valid input accepted and schema-invalid input refused."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import positive_data_acceptance

from config.wsgi import application
from tests.conftest import make_host
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db
CASES_PER_OPERATION = 30
MIN_CASES = 500
# These reach out to the address they are given (a key scan, an SSH login): a fuzzer must
# not scan the network. tests/gates/services/test_onboarding.py drives them against a real sshd.
NETWORK_OPERATIONS = {"POST /api/v1/hosts/scan/", "POST /api/v1/hosts/{id}/check/"}
# Where the server's rules go beyond what OpenAPI can state, a schema-valid body may still be
# refused with a 400 naming the field; "positive data acceptance" is not checked there:
# - a spec document: the gate kind's JSON Schema plus semantic rules (gates/specs/validation.py,
# tested
#   in tests/gates/specs/test_specs.py); signing names a version of it;
# - a host: credentials and transport fields depend on each other (an SSH host needs a parsable
#   pinned key, and one of a key or a key file);
# - the planner: an architecture must be a known preset or a complete set of fields;
# - a results upload: which form fields it needs depends on its kind;
# - a signing key: an OpenSSH Ed25519 public key line, parsed; a reset: a reason in words for
#   a gate that has counted failures to reset; a cancel: a reason of 10 characters once runs of
#   whitespace count as one;
# - an inventory amendment: it names a run of the engagement that its host check ended
#   invalid, and signing names an amendment of the engagement;
# - a trace upload: every line must be a valid row of the named format (refused naming the
#   line and field: tests/gates/api/test_traces_api.py);
# - an upload run: the profile it names must exist and its parameters pass that profile's
#   value checks (tests/gates/api/test_upload_side_services.py).
SEMANTIC_OPERATIONS = {
    "POST /api/v1/gates/{id}/runs/",
    "POST /api/v1/engagements/{id}/traces/",
    "POST /api/v1/engagements/{id}/inventory/amend/",
    "POST /api/v1/engagements/{id}/inventory/sign/",
    "POST /api/v1/keys/signing/",
    "POST /api/v1/gates/{id}/spec/reset/",
    "POST /api/v1/runs/{id}/cancel/",
    "POST /api/v1/runs/{id}/results/",
    "PUT /api/v1/gates/{id}/spec/",
    "POST /api/v1/gates/{id}/spec/sign/",
    "POST /api/v1/hosts/",
    "POST /api/v1/planner/",
}
# Strings holding U+0000 are refused everywhere (PostgreSQL cannot store them; the API
# description says so); schemathesis would otherwise put them in any string.
CONFIG = schemathesis.config.SchemathesisConfig.from_dict({"generation": {"allow-x00": False}})


@pytest.fixture
def wsgi_in_test_transaction():
    """Requests through the real WSGI app share the test's transaction; Django's own test
    client also keeps request signals from closing that connection."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield application
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def world(vendor_admin, vendor_org, engagement, customer_org, settings):
    """A vendor admin's token and the ids of real objects, so some paths hit them."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": "100000/minute"},
    }
    host = make_host(customer_org)
    client = token_client(vendor_admin, vendor_org, scopes=["read", "run", "sign"])
    headers = {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}
    ids = [*engagement.gates.values_list("pk", flat=True), host.pk, engagement.pk]
    return headers, ids


class Outcomes:
    def __init__(self) -> None:
        self.cases: Counter = Counter()
        self.failures: Counter = Counter()
        self.examples: dict = {}

    def exercise(self, operation, headers: dict, ids: list[int]) -> None:
        @given(case=operation.as_strategy(), pk=st.sampled_from([None, *ids]))
        @settings(
            max_examples=CASES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,  # the same cases every run: make test never flakes on a new one
            suppress_health_check=list(HealthCheck),
        )
        def run(case, pk):
            if pk is not None and "id" in (case.path_parameters or {}):
                case.path_parameters["id"] = pk
            self.cases[operation.label] += 1
            excluded = [positive_data_acceptance] if operation.label in SEMANTIC_OPERATIONS else []
            try:
                case.call_and_validate(headers=headers, excluded_checks=excluded)
            except (Exception, BaseExceptionGroup) as failure:
                self.record(operation.label, failure)

        run()

    def record(self, label: str, failure: BaseException) -> None:
        # Collected rather than raised: one report names every operation's failures.
        for found in getattr(failure, "exceptions", [failure]):
            title = str(found).strip().splitlines()[0]
            self.failures[(label, title)] += 1
            self.examples.setdefault((label, title), str(failure)[:1500])

    def report(self) -> str:
        lines = [f"{n:4d}  {label}: {title}" for (label, title), n in self.failures.items()]
        return "\n".join([*lines, "", *self.examples.values()])


def test_generated_requests_get_no_server_error_and_match_the_schema(
    world, wsgi_in_test_transaction
):
    headers, ids = world
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/", wsgi_in_test_transaction, headers=headers, config=CONFIG
    )
    outcomes = Outcomes()
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.label not in NETWORK_OPERATIONS:
            outcomes.exercise(operation, headers, ids)
    assert not outcomes.failures, outcomes.report()
    total = sum(outcomes.cases.values())
    assert total >= MIN_CASES, outcomes.cases
    print(f"\nschemathesis: {total} cases over {len(outcomes.cases)} operations")
    assert len(outcomes.cases) >= 15, sorted(outcomes.cases)


def test_the_schema_marks_what_can_be_null_and_documents_every_error(vendor_admin, vendor_org):
    client = token_client(vendor_admin, vendor_org)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    assert components["Run"]["properties"]["host"]["nullable"] is True
    for party in ("vendor", "customer"):
        assert components["Spec"]["properties"][f"{party}_signed_by"]["nullable"] is True
    assert components["Error"]["properties"]["field"]["nullable"] is True
    start = schema["paths"]["/api/v1/gates/{id}/runs/"]["post"]
    assert {"400", "401", "403", "404", "409", "415", "429"} <= set(start["responses"])
    assert start["requestBody"]["required"] is True
