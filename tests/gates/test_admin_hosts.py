"""The Django admin's host form: a port out of range and a missing pinned key are refused in
words a person understands, and the lease and fencing token are not on the form."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from gates.models import Host, Profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, customer_org, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-long-1234")
    client.force_login(user)
    return client


def add_host(client, customer_org, **fields):
    data = {
        "organization": customer_org.pk,
        "name": "gpu-9",
        "transport": "ssh",
        "address": "10.0.0.9",
        "port": "22",
        "username": "bench",
        "host_key": "",
        "key_file_path": "/etc/tollgate/key",
        "profile": Profile.objects.get(name="vllm").pk,
        "labels": "{}",
        **fields,
    }
    return client.post(reverse("admin:gates_host_add"), data)


def test_a_port_out_of_range_is_refused(admin_client, customer_org):
    response = add_host(admin_client, customer_org, port="99999", host_key="x")
    assert "a TCP port from 1 to 65535" in response.content.decode()
    assert not Host.objects.exists()


def test_a_missing_pinned_key_is_explained_not_named_by_its_constraint(admin_client, customer_org):
    page = add_host(admin_client, customer_org).content.decode()
    assert "is violated" not in page and "needs its pinned host key" in page
    assert not Host.objects.exists()


def test_the_form_has_no_lease_or_fencing_fields(admin_client):
    page = admin_client.get(reverse("admin:gates_host_add")).content.decode()
    for name in ("fencing_token", "lease_run", "lease_acquired_at", "credential_ciphertext"):
        assert name not in page, name
