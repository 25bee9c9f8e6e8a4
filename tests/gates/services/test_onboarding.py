"""Host onboarding through the API against a real sshd: scan, confirm and pin, test."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.models import AuditEvent, Host
from tests.gates.test_tenancy import token_client
from tests.sshd import loopback_sshd

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture
def sshd(tmp_path):
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])


def register(api, sshd, host_key: str) -> dict:
    response = api.post(
        reverse("api:host-list"),
        {
            "organization": "northwind",
            "name": "gpu-01",
            "profile": "simhost",
            "address": sshd.address,
            "port": sshd.port,
            "username": sshd.username,
            "host_key": host_key,
            "private_key": sshd.user_key_text,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def test_scan_then_pin_then_check(api, sshd, customer_org):
    scanned = api.post(
        reverse("api:host-scan"), {"address": sshd.address, "port": sshd.port}, format="json"
    ).json()
    assert scanned["host_key"].split()[:2] == sshd.host_key_line.split()[:2]
    assert scanned["fingerprint"].startswith("SHA256:")
    assert not Host.objects.exists()  # scanning pins nothing
    host = register(api, sshd, scanned["host_key"])
    assert host["host_key_fingerprint"] == scanned["fingerprint"]
    report = api.post(reverse("api:host-check", args=[host["id"]])).json()
    assert report["ok"], report
    names = [check["name"] for check in report["checks"]]
    assert names[:3] == ["reachable", "host key", "authentication"] and "python3" in names
    assert AuditEvent.objects.filter(action="host.check").count() == 1


def test_a_host_pinned_with_another_key_fails_the_check_and_says_why(api, sshd, customer_org):
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    host = register(api, sshd, other)
    report = api.post(reverse("api:host-check", args=[host["id"]])).json()
    assert not report["ok"]
    failed = next(check for check in report["checks"] if not check["ok"])
    assert failed["name"] == "host key" and "host key changed" in failed["message"]


def test_scanning_a_closed_port_is_a_clear_error(api):
    from tests.sshd import free_port

    response = api.post(
        reverse("api:host-scan"), {"address": "127.0.0.1", "port": free_port()}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"] == "unreachable"
