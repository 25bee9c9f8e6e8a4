"""Gate and run pages in a real browser: Debian chromium draws the forest plot and the
measurements from the embedded figure JSON (static plotly.js, no CDN), and a running run shows
its progress bar."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.urls import reverse
from playwright.sync_api import BrowserContext, Page

from gates import services
from tests.gates.charts.test_charts import synthetic_measurements
from tests.gates.pages.test_dashboards import (
    open_g3,
    record_g3_decision,
    record_measurements,
    uploaded_run,
)

pytestmark = pytest.mark.slow

RUNNING_REPETITIONS, PLANNED_STEPS = 2, 72


@dataclass
class Site:
    cookie: dict[str, str]
    gate_url: str
    run_url: str
    cells: int


@pytest.fixture
def site(
    session_cookie_for, live_server, actor, vendor_viewer, engagement, customer_viewer
) -> Site:
    """A decided G3 gate and, in a second engagement, a G3 run still running (all database
    work before the browser starts)."""
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    second = services.engagement_create(
        actor=actor, organization=engagement.organization, title="second pilot", model_name="m"
    )
    running = uploaded_run(actor, vendor_viewer, open_g3(actor, vendor_viewer, second))
    rows = synthetic_measurements(RUNNING_REPETITIONS)
    record_measurements(running, rows, planned=PLANNED_STEPS)
    return Site(
        cookie=session_cookie_for(customer_viewer),
        gate_url=live_server.url + reverse("gates:gate-detail", args=[decision.gate_id]),
        run_url=live_server.url + reverse("gates:run-detail", args=[running.pk]),
        cells=len(decision.result["clauses"]),
    )


@pytest.fixture
def browser(chromium_context, site: Site) -> Iterator[BrowserContext]:
    with chromium_context(site.cookie) as context:
        yield context


def open_page(browser: BrowserContext, url: str) -> tuple[Page, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on("requestfailed", lambda request: problems.append(f"failed {request.url}"))
    page.on("pageerror", lambda error: problems.append(f"script error {error}"))
    page.goto(url)
    return page, problems


def drawn(page: Page, key: str) -> str:
    figure = f'[data-figure="{key}"]'
    page.wait_for_selector(f'{figure}[data-drawn="true"] .plotly svg.main-svg')
    return figure


def test_a_decided_g3_gate_draws_one_point_and_one_bar_per_clause_cell(browser, site):
    page, problems = open_page(browser, site.gate_url)
    forest = drawn(page, "figure-forest")
    # Estimates and bar ticks are both markers: one of each per clause x tier cell.
    assert page.locator(f"{forest} .scatterlayer path.point").count() == 2 * site.cells
    assert page.locator(f"{forest} .errorbar").count() == site.cells
    assert page.locator(f"{forest} .modebar").count() == 0
    measurements = drawn(page, "figure-measurements")
    assert page.locator(f"{measurements} .scatterlayer path.point").count() == 8 * 9 * 2
    assert page.locator("table.list").first.is_visible()  # exact numbers stay in the table
    assert not problems, problems


def test_a_running_run_shows_its_progress_bar_and_measurements_so_far(browser, site):
    page, problems = open_page(browser, site.run_url)
    progress = page.locator('#run-status progress[data-field="progress"]')
    assert progress.is_visible()
    done = RUNNING_REPETITIONS * 9
    assert (progress.get_attribute("value"), progress.get_attribute("max")) == (
        str(done),
        str(PLANNED_STEPS),
    )
    assert page.inner_text('[data-field="state"]') == "running"
    figure = drawn(page, "figure-run-measurements")
    assert page.locator(f"{figure} .scatterlayer path.point").count() == done * 2
    assert not problems, problems
