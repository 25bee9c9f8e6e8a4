"""The hosts, API tokens, audit log and account pages in a real browser (Debian chromium):
a customer owner makes a token and uses it, an engineer onboards a host against a real sshd,
a vendor admin filters the audit log to a waiver, a reset email reaches a real SMTP server,
and every page fits 1280 and 390 px without sideways scrolling (screenshots kept)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from django.urls import reverse
from playwright.sync_api import Page

from gates import services
from gates.tenancy import viewer_for_user
from runners.transport.hostkeys import parse_host_key
from tests.conftest import make_host
from tests.contract import sign_as_both
from tests.gates.alerts.conftest import Inbox, free_port
from tests.gates.test_tenancy_matrix import make_token
from tests.sshd import loopback_sshd

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("TOLLGATE_TEST_ARTIFACTS", ROOT / "var" / "test-artifacts"))
WIDTHS = (1280, 390)
MAIL_DEADLINE_S = 30.0
NEW_PASSWORD = "violet-harbour-92-lantern"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def screenshot(page: Page, name: str) -> None:
    folder = SCREENSHOTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def fits(page: Page) -> tuple[int, int]:
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


def anonymous(live_server) -> dict[str, str]:
    return {"name": "tollgate-test", "value": "anonymous", "url": live_server.url}


def test_a_customer_owner_creates_a_token_and_uses_it_against_the_api(
    chromium_context, session_cookie_for, live_server, customer_owner, engagement
):
    cookie = session_cookie_for(customer_owner)
    with chromium_context(cookie) as context:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
        page = context.new_page()
        page.goto(live_server.url + reverse("gates:token-list"))
        page.get_by_label("Name").fill("nightly CI")
        page.get_by_label("read: read engagements").check()
        page.get_by_role("button", name="Create token").click()
        secret = page.locator("#new-token").input_value()
        page.get_by_role("button", name="Copy").click()
        page.wait_for_selector("[data-copy-status]:has-text('Copied')")
        assert page.evaluate("navigator.clipboard.readText()") == secret
        row = page.locator("#token-table tbody tr", has_text="nightly CI")
        assert "read" in row.inner_text() and "never" in row.inner_text()
        screenshot(page, "tokens-created")
        page.reload()  # the secret was shown once: not on the page again
        assert secret not in page.content()
    request = urllib.request.Request(
        live_server.url + reverse("api:engagement-list"),
        headers={"Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert [row["id"] for row in json.load(response)["results"]] == [engagement.pk]


@pytest.fixture
def sshd(tmp_path):
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server


def test_an_engineer_adds_a_host_by_scan_confirm_and_test(
    chromium_context, session_cookie_for, live_server, vendor_engineer, customer_org, sshd
):
    cookie = session_cookie_for(vendor_engineer)
    expected = parse_host_key(sshd.host_key_line).fingerprint
    with chromium_context(cookie) as context:
        page = context.new_page()
        page.goto(live_server.url + reverse("gates:host-list"))
        page.get_by_role("link", name="Add a host").click()
        page.get_by_label("Organization").select_option(label=customer_org.name)
        page.get_by_label("Name").fill("gpu-07")
        page.get_by_label("Address").fill(sshd.address)
        page.get_by_label("Port").fill(str(sshd.port))
        page.get_by_role("button", name="Scan host key").click()
        assert page.locator("#scanned-fingerprint").inner_text() == expected
        screenshot(page, "host-confirm")
        page.get_by_label("Username").fill(sshd.username)
        page.get_by_label("Private key").fill(sshd.user_key_text)
        page.get_by_label("Profile").select_option("simhost")
        page.get_by_label("I confirmed this fingerprint").check()
        page.get_by_role("button", name="Pin the key and register").click()
        page.wait_for_selector("h1:has-text('Host gpu-07')")
        assert expected in page.inner_text("dl.facts")
        page.get_by_role("button", name="Test connection").click()
        page.wait_for_selector("ul.checks")
        checks = page.locator("ul.checks li")
        names = [checks.nth(i).get_attribute("data-check") for i in range(checks.count())]
        assert names[:3] == ["reachable", "host key", "authentication"]
        assert "run directory writable" in names and "python3" in names
        assert page.locator("ul.checks li.failed").count() == 0
        assert page.inner_text(".check-summary") == "Every check passed."
        screenshot(page, "host-checked")


def stop_loss_gate(actor, engagement, host):
    """G1 failed twice on a signed spec: its stop-loss review is open."""
    gate = engagement.gates.get(kind="G1")
    sign_as_both(gate)
    viewer = viewer_for_user(actor.user)
    for _ in range(2):
        run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
        services.run_claim(run_id=run.pk)
        services.decision_record(run_id=run.pk, result={"verdict": "fail", "clauses": []})
    gate.refresh_from_db()
    return gate


def test_a_vendor_admin_filters_the_audit_log_to_a_waiver(
    chromium_context, session_cookie_for, live_server, vendor_admin, actor, engagement, host
):
    gate = stop_loss_gate(actor, engagement, host)
    services.gate_waive(
        actor=services.Actor(user=vendor_admin),
        viewer=viewer_for_user(vendor_admin),
        gate=gate,
        justification="The customer accepts the miss in writing.",
    )
    cookie = session_cookie_for(vendor_admin)
    with chromium_context(cookie) as context:
        page = context.new_page()
        page.goto(live_server.url + reverse("gates:audit-log"))
        page.get_by_label("Engagement").select_option(label=engagement.title)
        page.get_by_label("Action").select_option("gate.waive")
        page.get_by_role("button", name="Filter").click()
        rows = page.locator("#audit-table tbody tr")
        rows.first.wait_for()
        assert rows.count() == 1
        text = rows.first.inner_text()
        assert "gate.waive" in text and "vadmin" in text
        assert "vadmin waived G1: “The customer accepts the miss in writing.”" in text
        json_box = rows.first.locator("pre.json")
        assert not json_box.is_visible()  # the JSON waits behind its disclosure
        rows.first.get_by_role("group").locator("summary").click()
        assert json_box.is_visible() and '"justification": "The customer' in json_box.inner_text()
        screenshot(page, "audit-filtered")


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    yield inbox
    controller.stop()


def wait_for_mail(inbox: Inbox) -> str:
    deadline = time.monotonic() + MAIL_DEADLINE_S
    while not inbox.messages:
        assert time.monotonic() < deadline, "no reset email arrived"
        time.sleep(0.05)  # poll interval while the SMTP server receives
    _, message = inbox.messages[0]
    return message.get_payload(decode=True).decode()


def test_a_password_reset_email_arrives_and_its_link_sets_a_new_password(
    chromium_context, live_server, customer_owner, smtp
):
    email = customer_owner.email
    with chromium_context(anonymous(live_server)) as context:
        page = context.new_page()
        page.goto(live_server.url + reverse("login"))
        page.get_by_role("link", name="Forgot your password?").click()
        page.get_by_label("Email").fill(email)
        page.get_by_role("button", name="Send the reset link").click()
        page.wait_for_selector("h1:has-text('Check your email')")
        body = wait_for_mail(smtp)
        assert smtp.messages[0][0] == [email]
        link = next(word for word in body.split() if "/account/reset/" in word)
        page.goto(link)
        page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Set password").click()
        page.wait_for_selector("h1:has-text('Password set')")
        page.get_by_role("link", name="Log in").last.click()
        page.get_by_label("User name").fill(customer_owner.username)
        page.get_by_label("Password").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_selector("h1:has-text('Engagements')")


@pytest.fixture
def pages(actor, vendor_admin, vendor_org, customer_owner, customer_org, engagement, host):
    """Every page of this family with something on it (all database work before the browser)."""
    token = make_token(vendor_admin, vendor_org, scopes=("read", "run", "sign", "tokens"))
    make_token(vendor_admin, vendor_org)
    make_host(customer_org, name="gpu-a-rather-long-host-name-01", address="gpu01.example.com")
    return {
        "hosts": reverse("gates:host-list"),
        "host-detail": reverse("gates:host-detail", args=[host.pk]),
        "host-add": reverse("gates:host-add"),
        "host-key": reverse("gates:host-key", args=[host.pk]),
        "tokens": reverse("gates:token-list"),
        "token-revoke": reverse("gates:token-revoke", args=[token.pk]),
        "audit": reverse("gates:audit-log"),
        "password-change": reverse("password_change"),
        "password-reset": reverse("password_reset"),
    }


def test_each_page_fits_1280_and_390_px_without_sideways_scrolling(
    chromium_context, session_cookie_for, live_server, vendor_admin, pages
):
    cookie = session_cookie_for(vendor_admin)
    with chromium_context(cookie) as context:
        page = context.new_page()
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for name, path in pages.items():
                response = page.goto(live_server.url + path)
                assert response.status == 200, name
                scroll_width, inner_width = fits(page)
                assert scroll_width <= inner_width, f"{name} at {width} px: {scroll_width}"
                screenshot(page, f"{name}-{width}")
