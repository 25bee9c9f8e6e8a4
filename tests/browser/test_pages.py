"""The portal's everyday pages in Debian chromium against a live server: what a customer sees
(only their engagement, a coloured gate strip, clauses with units), another organization's
objects as 404s, an engineer watching a G3 run on simhost move live to its verdict and
downloading a raw file with its SHA-256, a vendor admin waiving after a confirmation, and no
page scrolling sideways at 1280 or 390 px. Screenshots go to var/test/screenshots/."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import BrowserContext, Page

from gates import services
from gates.models import Gate, Run
from gates.services import pokes
from tests.conftest import make_host
from tests.contract import sign_as_both
from tests.simhosts import g3_spec, local_simhost
from worker import tasks

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "test" / "screenshots"
WIDTHS = {"desktop": 1280, "phone": 390}
RUN_TIMEOUT_MS = 240_000  # a G3 run of four repetitions on simhost, on a busy 2-core machine
LIVE_PROGRESS = """() =>
    document.querySelector('[data-field="progress"]').value > 0
    && document.querySelector('[data-field="log"]').textContent.includes('launched')"""
G3_CLAUSES = [
    {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "change": "reduction",
        "at_least_pct": 25,
        "tiers": "all",
    },
    {
        "metric": "ttft_p50",
        "compare": "recompute/offload",
        "change": "ratio",
        "at_least": 3,
        "tiers": "all",
    },
]


def record_pass(actor, viewer, gate: Gate, host) -> None:
    """A counted pass for a gate the test is not about, through the services."""
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clauses = [
        {
            "check": "gpu_count",
            "expected": 8,
            "observed": 8,
            "ok": True,
            "verdict": "pass",
            "cause": "8 GPU(s) found",
        },
        {
            "check": "host_memory_min_gib",
            "expected": 512,
            "observed": 1007.5,
            "ok": True,
            "verdict": "pass",
            "cause": "1007.50 GiB observed",
        },
    ]
    services.decision_record(run_id=run.pk, result={"verdict": "pass", "clauses": clauses})


@dataclass
class World:
    urls: dict[str, str]
    g3_id: int
    cookies: dict[str, dict]
    theirs: dict[str, str]


@pytest.fixture
def world(
    session_cookie_for,
    live_server,
    actor,
    vendor_viewer,
    vendor_engineer,
    vendor_admin,
    customer_viewer,
    engagement,
    other_engagement,
    other_customer_org,
    customer_org,
    tmp_path,
) -> World:
    """Our engagement with G1 and G2 passed and G3 ready on a simhost host; a second of ours
    in stop-loss review at G1; another organization's engagement with a run. All database work
    happens here, before the browser starts."""
    host = local_simhost(customer_org, tmp_path / "host")
    record_pass(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
    record_pass(actor, vendor_viewer, engagement.gates.get(kind="G2"), host)
    g3 = engagement.gates.get(kind="G3")
    services.gate_spec_update(actor=actor, gate=g3, document=g3_spec(clauses=G3_CLAUSES))
    sign_as_both(g3)
    review = services.engagement_create(
        actor=actor, organization=customer_org, title="stop-loss pilot", model_name="m"
    )
    failed = review.gates.get(kind="G1")
    Gate.objects.filter(pk=failed.pk).update(state="decided", verdict="fail", stop_loss_review=True)
    foreign_gate = other_engagement.gates.get(kind="G1")
    foreign_run = services.run_create(
        actor=actor,
        viewer=vendor_viewer,
        gate=foreign_gate,
        host=make_host(other_customer_org, name="contoso-gpu"),
    )
    url = live_server.url
    return World(
        g3_id=g3.pk,
        urls={
            "list": url + reverse("gates:engagement-list"),
            "audit": url + reverse("gates:audit-log"),
            "engagement": url + reverse("gates:engagement-detail", args=[engagement.pk]),
            "g1": url + reverse("gates:gate-detail", args=[engagement.gates.get(kind="G1").pk]),
            "g3": url + reverse("gates:gate-detail", args=[g3.pk]),
            "review": url + reverse("gates:gate-detail", args=[failed.pk]),
        },
        cookies={
            "customer": session_cookie_for(customer_viewer),
            "engineer": own_session(vendor_engineer, live_server.url),
            "admin": own_session(vendor_admin, live_server.url),
        },
        theirs={
            "gate": url + reverse("gates:gate-detail", args=[foreign_gate.pk]),
            "run": url + reverse("gates:run-detail", args=[foreign_run.pk]),
            "engagement": url + reverse("gates:engagement-detail", args=[other_engagement.pk]),
        },
    )


def own_session(user, url: str) -> dict[str, str]:
    """A session cookie of a client of its own: one client signed in as a second user would
    end the first user's session."""
    client = Client()
    client.force_login(user)
    name = django_settings.SESSION_COOKIE_NAME
    return {"name": name, "value": client.cookies[name].value, "url": url}


def open_page(context: BrowserContext, url: str, width: int = 1280) -> tuple[Page, list[str]]:
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error {error}"))
    page.goto(url)
    return page, problems


def shoot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def assert_no_sideways_scroll(page: Page, what: str) -> None:
    wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= inner, f"{what}: the page is {wide} px wide in a {inner} px window"


def test_a_customer_sees_only_their_engagement_its_gate_strip_and_clauses_with_units(
    chromium_context, world
):
    with chromium_context(world.cookies["customer"]) as context:
        page, problems = open_page(context, world.urls["list"])
        rows = page.locator("table.engagements tbody tr")
        titles = rows.locator("td:first-child").all_inner_texts()
        assert sorted(titles) == [
            "480B long context",
            "stop-loss pilot",
        ]  # not the other organization's
        chip = page.locator('tr:has-text("480B long context") [data-gate="G1"]').first
        assert chip.inner_text() == "G1 pass"  # the verdict in text, not only a tooltip
        colour = chip.evaluate("element => getComputedStyle(element).color")
        assert colour == "rgb(20, 108, 46)"  # the pass green (4.5:1 on its badge), not the grey
        failed = page.locator('tr:has-text("stop-loss pilot") [data-gate="G1"]')
        assert failed.inner_text() == "G1 fail"
        assert failed.evaluate("element => getComputedStyle(element).color") == "rgb(198, 40, 40)"
        shoot(page, "engagement-list")
        page.goto(world.urls["g1"])
        table = page.locator("#clauses table")
        assert "Expected" in table.locator("thead").inner_text()  # units go with each value
        count = page.locator('#clauses tr:has-text("gpu_count")').inner_text()
        assert "GPUs" in count and "8.000" not in count and "None" not in count
        assert "None" not in page.locator("#clauses").inner_text()
        shoot(page, "gate-g1")
        assert not problems, problems


def test_another_organizations_gate_run_and_engagement_are_404s(chromium_context, world):
    with chromium_context(world.cookies["customer"]) as context:
        page = context.new_page()
        for kind, url in world.theirs.items():
            assert page.goto(url).status == 404, kind


def test_an_engineer_watches_a_g3_run_move_live_to_its_verdict_and_downloads_a_raw_file(
    chromium_context, world, monkeypatch, settings
):
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 2
    with worker(world.g3_id), chromium_context(world.cookies["engineer"]) as context:
        page, problems = open_page(context, world.urls["g3"])
        page.click("text=Start a run")
        page.wait_for_url("**/runs/*/")
        page.evaluate("window.sameDocument = true")  # gone if the page reloads
        log = page.locator('[data-field="log"]')
        page.wait_for_function(
            LIVE_PROGRESS,
            timeout=RUN_TIMEOUT_MS,
        )
        assert page.evaluate("window.sameDocument") is True  # moved without a reload
        at_bottom = log.evaluate("box => box.scrollHeight - box.scrollTop - box.clientHeight")
        assert at_bottom < 40  # the box follows the tail
        shoot(page, "run-live")
        page.wait_for_selector("#run-verdict .badge", timeout=RUN_TIMEOUT_MS)
        page.wait_for_selector('[data-figure="figure-run-measurements"][data-drawn="true"]')
        row = page.locator("#run-files tbody tr").first
        shown = row.locator("code.digest").inner_text()
        with page.expect_download() as download:
            row.locator("a").click()
        body = Path(download.value.path()).read_bytes()
        assert hashlib.sha256(body).hexdigest() == shown and len(body) > 0
        shoot(page, "run-finished")
        page.goto(world.urls["g3"])
        page.wait_for_selector('[data-figure="figure-forest"][data-drawn="true"]')
        assert "%" in page.locator("#clauses").inner_text()
        shoot(page, "gate-g3")
        assert not problems, problems


def test_a_vendor_admin_waives_a_gate_after_confirming_and_sees_it_recorded(
    chromium_context, world
):
    with chromium_context(world.cookies["admin"]) as context:
        page, problems = open_page(context, world.urls["review"])
        questions: list[str] = []
        page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
        page.fill(
            "textarea[name=justification]", "the customer accepts the older driver in writing"
        )
        page.click("button[value=waive]")
        assert questions and "Waive G1" in questions[0]
        assert "waived" not in page.locator("h1 + p").inner_text()  # dismissed: nothing sent
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button[value=waive]")
        page.wait_for_selector("ul.messages li.success")
        assert "waived" in page.locator("ul.messages").inner_text()
        assert "waived" in page.locator("h1 + p").inner_text()
        shoot(page, "gate-waived")
        # The audit page shows who waived, with the justification.
        page.goto(world.urls["audit"] + "?action=gate.waive")
        row = page.locator("#audit-table tbody tr").first
        row.wait_for()
        assert "gate.waive" in row.inner_text()
        assert "accepts the older driver in writing" in row.inner_text()
        assert not problems, problems


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_no_page_scrolls_sideways(chromium_context, world, width):
    with chromium_context(world.cookies["admin"]) as context:
        for name in ("list", "engagement", "g1", "g3", "review"):
            page, problems = open_page(context, world.urls[name], width)
            assert_no_sideways_scroll(page, name)
            assert page.locator("header.top button.link").is_visible()  # Log out
            assert not problems, problems
            shoot(page, f"{name}-{width}")
            page.close()


def test_the_skip_link_is_the_first_stop_and_jumps_to_the_content(chromium_context, world):
    with chromium_context(world.cookies["customer"]) as context:
        page, _ = open_page(context, world.urls["engagement"])
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "content"


class worker:
    """The Celery worker, in a thread: drives the gate's active runs task after task (nothing
    is enqueued here; the thread polls the database instead). On the way out a run still going
    is canceled and driven until its host processes are stopped."""

    def __init__(self, gate_id: int) -> None:
        self.active = Run.objects.filter(gate_id=gate_id).exclude(state__in=Run.ENDED)

    def __enter__(self) -> worker:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drive, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        self.active.update(cancel_requested_at=timezone.now())
        for _ in range(50):
            if not self._advance():
                break

    def _advance(self) -> list[int]:
        active = list(self.active.values_list("pk", flat=True))
        for run_id in active:
            tasks.advance_run(run_id)
        return active

    def _drive(self) -> None:
        try:
            while not self.stop.is_set():
                if not self._advance():
                    self.stop.wait(0.2)
        finally:
            connection.close()
