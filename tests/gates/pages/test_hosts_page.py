"""The hosts page: the list with lease and last runs (constant queries), adding a host by
scan, confirm and test against a real sshd, editing with each error on its field, and never a
key, fencing token or lease field in a form."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from gates import services
from gates.models import AuditEvent, Host
from gates.tenancy import viewer_for_user
from tests.conftest import HOST_KEY, PRIVATE_KEY, make_host
from tests.sshd import free_port, loopback_sshd

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def engineer(client, vendor_engineer):
    client.force_login(vendor_engineer)
    return client


@pytest.fixture
def sshd(tmp_path):
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server


def scan(client, organization, address, port, name="gpu-07"):
    return client.post(
        reverse("gates:host-add"),
        {
            "step": "scan",
            "organization": organization.pk,
            "name": name,
            "address": address,
            "port": port,
        },
    )


def register(client, fingerprint, **fields):
    data = {
        "step": "register",
        "fingerprint": fingerprint,
        "confirmed": "on",
        "username": "root",
        "profile": "simhost",
        **fields,
    }
    return client.post(reverse("gates:host-add"), data)


def test_the_list_shows_each_host_with_its_lease_and_last_runs(
    engineer, actor, vendor_viewer, engagement, host
):
    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    Host.objects.filter(pk=host.pk).update(lease_run=run)
    page = engineer.get(reverse("gates:host-list")).content.decode()
    assert 'data-host="gpu-1"' in page and "bench@10.0.0.5:22" in page
    assert f"G1 run {run.pk}" in page and "held" in page
    assert HOST_KEY.split()[1] not in page  # the fingerprint, never the key


def test_the_list_costs_the_same_queries_for_two_hosts_or_twelve(
    engineer, actor, vendor_viewer, engagement, customer_org
):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert engineer.get(reverse("gates:host-list")).status_code == 200
        return len(queries)

    gate = engagement.gates.get(kind="G1")

    def add_hosts(first: int, last: int) -> None:
        for index in range(first, last):
            host = make_host(customer_org, name=f"gpu-{index}")
            services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
            services.run_cancel(
                actor=actor,
                viewer=vendor_viewer,
                run=host.runs.get(),
                reason="the test stops this run",
            )

    add_hosts(0, 2)
    count()  # the session's first read also pushes its idle expiry (once a minute)
    few = count()
    add_hosts(2, 12)
    assert count() == few


def test_customers_are_refused_the_hosts_pages(client, customer_owner, host):
    client.force_login(customer_owner)
    assert client.get(reverse("gates:host-list")).status_code == 403
    assert client.get(reverse("gates:host-detail", args=[host.pk])).status_code == 403


@pytest.mark.slow
def test_an_engineer_scans_confirms_registers_and_tests_a_host(engineer, sshd, customer_org):
    scanned = scan(engineer, customer_org, sshd.address, sshd.port)
    page = scanned.content.decode()
    assert scanned.status_code == 200 and "SHA256:" in page
    assert sshd.host_key_line.split()[1] not in page  # only the fingerprint is shown
    assert not Host.objects.exists()  # scanning pins nothing
    fingerprint = page.split('id="scanned-fingerprint">')[1].split("<")[0]
    response = register(engineer, fingerprint, private_key=sshd.user_key_text)
    host = Host.objects.get()
    assert response["Location"] == reverse("gates:host-detail", args=[host.pk])
    assert host.host_key.split()[:2] == sshd.host_key_line.split()[:2]
    assert host.host_key_fingerprint == fingerprint and host.has_stored_credential
    checked = engineer.post(reverse("gates:host-check", args=[host.pk])).content.decode()
    for name in ("reachable", "host key", "authentication", "python3", "run directory writable"):
        assert f'class="ok" data-check="{name}"' in checked, name
    assert "Every check passed." in checked
    assert AuditEvent.objects.filter(action="host.check", detail__ok=True).exists()


@pytest.mark.slow
def test_a_host_whose_key_changed_since_the_scan_fails_the_key_check(engineer, sshd, customer_org):
    page = scan(engineer, customer_org, sshd.address, sshd.port).content.decode()
    fingerprint = page.split('id="scanned-fingerprint">')[1].split("<")[0]
    register(engineer, fingerprint, private_key=sshd.user_key_text)
    sshd.regenerate_host_key()
    checked = engineer.post(reverse("gates:host-check", args=[Host.objects.get().pk]))
    text = checked.content.decode()
    assert 'class="failed" data-check="host key"' in text and "A check failed" in text
    assert 'data-check="authentication"' not in text  # nothing after the failed check ran


@pytest.mark.slow
def test_scanning_a_closed_port_names_the_address(engineer, customer_org):
    response = scan(engineer, customer_org, "127.0.0.1", free_port())
    assert response.status_code == 400 and "address: " in response.content.decode()


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"port": "99999"}, "port: a TCP port from 1 to 65535"),
        ({"port": "0"}, "port: a TCP port from 1 to 65535"),
        ({"name": "has space"}, "name: Enter a valid"),
        ({"address": ""}, "address: This field is required."),
    ],
)
def test_the_scan_form_names_the_bad_field(engineer, customer_org, fields, error):
    data = {"step": "scan", "organization": customer_org.pk, "name": "gpu-7", "port": "22"}
    data.update({"address": "10.0.0.9", **fields})
    response = engineer.post(reverse("gates:host-add"), data)
    assert response.status_code == 400 and error in response.content.decode()


def test_registering_without_a_scan_pins_nothing(engineer):
    response = register(engineer, "SHA256:made-up", key_file_path="/etc/tollgate/key")
    assert response["Location"] == reverse("gates:host-add") and not Host.objects.exists()


def fake_scan(engineer, customer_org, monkeypatch, fingerprint="SHA256:scanned"):
    monkeypatch.setattr(
        "gates.services.hosts.onboarding.scan_host_key", lambda *a, **k: (HOST_KEY, fingerprint)
    )
    assert scan(engineer, customer_org, "10.0.0.9", 22).status_code == 200


def test_an_unconfirmed_fingerprint_is_refused(engineer, customer_org, monkeypatch):
    fake_scan(engineer, customer_org, monkeypatch)
    response = register(engineer, "SHA256:scanned", confirmed="", key_file_path="/etc/tollgate/key")
    assert response.status_code == 400
    assert "confirmed: confirm the fingerprint with the host" in response.content.decode()
    assert not Host.objects.exists()


def test_a_fingerprint_other_than_the_scanned_one_is_refused(engineer, customer_org, monkeypatch):
    fake_scan(engineer, customer_org, monkeypatch)
    response = register(engineer, "SHA256:another", key_file_path="/etc/tollgate/key")
    assert response.status_code == 400 and "scanned again" in response.content.decode()
    assert not Host.objects.exists()


def test_a_refused_private_key_is_never_echoed_back(engineer, customer_org, monkeypatch):
    fake_scan(engineer, customer_org, monkeypatch)
    pasted = "not a key but a secret 7f3a9c"
    response = register(engineer, "SHA256:scanned", private_key=pasted)
    page = response.content.decode()
    assert "private_key: not a PEM or OpenSSH private key" in page
    assert pasted not in page and not Host.objects.exists()


def edit(client, host, **fields):
    data = {
        "name": host.name,
        "address": host.address,
        "port": host.port,
        "username": host.username,
        "profile": host.profile.name,
        "key_file_path": host.key_file_path,
        "parameters": "{}",
        **fields,
    }
    return client.post(reverse("gates:host-detail", args=[host.pk]), data)


def test_editing_saves_and_is_audited(engineer, host, vendor_engineer):
    response = edit(engineer, host, port="2222", parameters='{"run_root": "/srv/tollgate"}')
    assert response["Location"] == reverse("gates:host-detail", args=[host.pk])
    host.refresh_from_db()
    assert host.port == 2222 and host.parameters == {"run_root": "/srv/tollgate"}
    event = AuditEvent.objects.get(action="host.update")
    assert event.actor == vendor_engineer and event.detail == {
        "changed": ["address", "key_file_path", "name", "parameters", "port", "profile", "username"]
    }


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"port": "99999"}, "port: a TCP port from 1 to 65535"),
        ({"username": "Root User"}, "username: a POSIX user name is required"),
        ({"parameters": "[1, 2]"}, "parameters: a JSON object"),
        ({"parameters": '{"run_root": "/tmp/../etc"}'}, "parameters: "),
        # JSON escapes that spell what PostgreSQL cannot store (a 500 before issue 27).
        ({"parameters": '{"run_root": "/srv\\u0000x"}'}, "parameters: run_root: the string holds"),
        ({"parameters": '{"note": "\\ud800"}'}, "note: the string holds a lone surrogate U+D800"),
        ({"key_file_path": "relative/key"}, "private_key: a private key or an absolute"),
        ({"private_key": PRIVATE_KEY}, "private_key: give a private key or a key file path"),
    ],
)
def test_a_bad_edit_names_its_field_and_changes_nothing(engineer, host, fields, error):
    before = Host.objects.filter(pk=host.pk).values().get()
    response = edit(engineer, host, **fields)
    page = response.content.decode()
    assert response.status_code == 400 and error in page, page[page.find("error") :][:400]
    assert "is violated" not in page
    assert Host.objects.filter(pk=host.pk).values().get() == before


def test_a_taken_name_is_a_field_error(engineer, host, customer_org):
    make_host(customer_org, name="gpu-2")
    response = edit(engineer, host, name="gpu-2")
    assert response.status_code == 400 and "name: another host is named" in (
        response.content.decode()
    )


def test_forms_never_offer_key_material_lease_or_fencing_fields(engineer, host):
    page = engineer.get(reverse("gates:host-detail", args=[host.pk])).content.decode()
    for name in ("host_key", "fencing_token", "lease_run", "lease_acquired_at", "credential"):
        assert f'name="{name}"' not in page, name
    assert HOST_KEY.split()[1] not in page and 'name="private_key"' in page


def test_a_refusal_is_a_page_that_says_why(client, customer_owner):
    client.force_login(customer_owner)
    response = client.get(reverse("gates:host-list"))
    page = response.content.decode()
    assert response.status_code == 403 and "hosts are managed by vendor staff" in page
    assert "You may not open this page" in page


def onboarded(engineer, sshd, customer_org) -> Host:
    page = scan(engineer, customer_org, sshd.address, sshd.port).content.decode()
    fingerprint = page.split('id="scanned-fingerprint">')[1].split("<")[0]
    register(engineer, fingerprint, private_key=sshd.user_key_text)
    return Host.objects.get()


@pytest.mark.slow
def test_a_reinstalled_hosts_new_key_is_pinned_after_a_scan_and_a_confirmation(
    engineer, sshd, customer_org
):
    host = onboarded(engineer, sshd, customer_org)
    old = host.host_key_fingerprint
    url = reverse("gates:host-key", args=[host.pk])
    same = engineer.post(url, {"step": "scan"}).content.decode()
    assert "same key" in same and "Pin the new key?" not in same
    sshd.regenerate_host_key()
    page = engineer.post(url, {"step": "scan"}).content.decode()
    new = page.split('id="scanned-fingerprint">')[1].split("<")[0]
    assert new != old and "different key" in page
    unconfirmed = engineer.post(url, {"step": "pin", "fingerprint": new})
    assert "confirmed: confirm the new fingerprint" in unconfirmed.content.decode()
    host.refresh_from_db()
    assert host.host_key_fingerprint == old
    response = engineer.post(url, {"step": "pin", "fingerprint": new, "confirmed": "on"})
    assert response["Location"] == reverse("gates:host-detail", args=[host.pk])
    host.refresh_from_db()
    assert host.host_key_fingerprint == new
    assert AuditEvent.objects.get(action="host.key_pin").detail == {
        "previous": old,
        "fingerprint": new,
    }
    checked = engineer.post(reverse("gates:host-check", args=[host.pk])).content.decode()
    assert "Every check passed." in checked


def test_pinning_without_a_scan_changes_nothing(engineer, host):
    url = reverse("gates:host-key", args=[host.pk])
    response = engineer.post(url, {"step": "pin", "fingerprint": "SHA256:x", "confirmed": "on"})
    assert response["Location"] == url
    assert Host.objects.get(pk=host.pk).host_key == HOST_KEY


def test_an_edit_never_writes_back_a_lease_taken_meanwhile(host, vendor_engineer):
    stale = Host.objects.get(pk=host.pk)
    Host.objects.filter(pk=host.pk).update(fencing_token=41)  # a run leased it meanwhile
    services.host_update(
        actor=services.Actor(user=vendor_engineer),
        viewer=viewer_for_user(vendor_engineer),
        host=stale,
        port=2200,
    )
    fresh = Host.objects.get(pk=host.pk)
    assert fresh.port == 2200 and fresh.fencing_token == 41


def test_a_key_file_path_replaces_a_stored_key(engineer, customer_org):
    host = make_host(customer_org, name="gpu-k", key_file_path="")
    services.host_set_credential(host=host, private_key=PRIVATE_KEY)
    response = edit(engineer, host, key_file_path="/etc/tollgate/other-key")
    assert response.status_code == 302
    host.refresh_from_db()
    assert not host.has_stored_credential and host.key_file_path == "/etc/tollgate/other-key"
