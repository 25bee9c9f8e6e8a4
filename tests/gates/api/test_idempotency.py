"""Idempotency-Key on creating POSTs: a retry gets the first response, another body a 422, the
key lives 24 h per token, and concurrent twins (real threads, real connections) make one run."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.models import Engagement, IdempotencyKey, Run
from gates.tenancy import viewer_for_user
from tests.celeryproc import purge_broker
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def vendor_api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


def start(api, gate, host_name: str, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    url = reverse("api:gate-runs", args=[gate.pk])
    return api.post(url, {"host": host_name}, format="json", **headers)


def new_engagement(api, key: str, title: str = "T"):
    body = {"organization": "northwind", "title": title, "model_name": "m"}
    return api.post(reverse("api:engagement-list"), body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_retried_start_returns_the_first_run(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G1")
    first = start(vendor_api, gate, host.name, "ci-build-41")
    again = start(vendor_api, gate, host.name, "ci-build-41")
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Run.objects.count() == 1


def test_without_a_key_a_second_start_is_refused_as_busy(vendor_api, engagement, host):
    gate = engagement.gates.get(kind="G1")
    assert start(vendor_api, gate, host.name, None).status_code == 202
    assert start(vendor_api, gate, host.name, None).status_code == 409


def test_the_same_key_with_another_body_is_a_422_naming_the_header(vendor_api, customer_org):
    assert new_engagement(vendor_api, "k1", title="first").status_code == 201
    response = new_engagement(vendor_api, "k1", title="second")
    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused"
    assert response.json()["field"] == "Idempotency-Key"
    assert list(Engagement.objects.values_list("title", flat=True)) == ["first"]


def test_the_same_key_on_another_endpoint_is_a_422(vendor_api, customer_org, engagement, host):
    assert new_engagement(vendor_api, "k1").status_code == 201
    response = start(vendor_api, engagement.gates.get(kind="G1"), host.name, "k1")
    assert response.status_code == 422 and Run.objects.count() == 0


def test_keys_are_per_token(vendor_admin, vendor_org, customer_org):
    first, second = (token_client(vendor_admin, vendor_org, scopes=["run"]) for _ in range(2))
    assert new_engagement(first, "shared").status_code == 201
    assert new_engagement(second, "shared").status_code == 201
    assert Engagement.objects.count() == 2


def test_a_refused_request_keeps_no_key_so_the_fixed_retry_runs(vendor_api, customer_org):
    bad = vendor_api.post(
        reverse("api:engagement-list"),
        {"organization": "northwind", "model_name": "m"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k2",
    )
    assert bad.status_code == 400 and not IdempotencyKey.objects.exists()
    assert new_engagement(vendor_api, "k2").status_code == 201


def test_a_key_expires_after_24_hours(vendor_api, customer_org):
    assert new_engagement(vendor_api, "k3").status_code == 201
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = new_engagement(vendor_api, "k3", title="a day later")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again.headers
    assert Engagement.objects.count() == 2
    assert IdempotencyKey.objects.get().expires_at > timezone.now() + timedelta(hours=23)


def test_an_unprintable_or_huge_key_is_a_400(vendor_api, customer_org):
    for key in ("", "x" * 256, "caf\u00e9"):
        response = new_engagement(vendor_api, key)
        assert response.status_code == 400 and response.json()["field"] == "Idempotency-Key"
    assert Engagement.objects.count() == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_with_one_key_make_one_run(live_server, vendor_admin, vendor_org, host):
    engagement = services.engagement_create(
        actor=services.Actor(user=vendor_admin),
        organization=host.organization,
        title="T",
        model_name="m",
    )
    _, secret = services.api_token_create(
        actor=services.Actor(user=vendor_admin),
        viewer=viewer_for_user(vendor_admin),
        organization=vendor_org,
        name="ci",
        scopes=["read", "run"],
    )
    url = live_server.url + reverse("api:gate-runs", args=[engagement.gates.get(kind="G1").pk])
    twins, barrier, answers = 6, threading.Barrier(6), []

    def post() -> None:
        request = urllib.request.Request(
            url,
            data=json.dumps({"host": host.name}).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {secret}",
                "Content-Type": "application/json",
                "Idempotency-Key": "race",
            },
        )
        barrier.wait(timeout=30)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answers.append((response.status, json.loads(response.read())["id"]))
        except urllib.error.HTTPError as error:
            answers.append((error.code, error.read().decode()))

    threads = [threading.Thread(target=post) for _ in range(twins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    purge_broker()
    run = Run.objects.get()
    assert sorted(answers) == [(202, run.pk)] * twins
