"""The soak page in a real browser (Debian chromium): a demo-like compressed soak with a gap, a
crash and a drift draws every series, shades and marks them, redraws a zoomed range from the
range route, and fits a 390 px phone without scrolling sideways."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.models import Soak
from tests.browser.test_accessibility import RUN_AXE, TAGS, axe_source
from tests.browser.test_gate_dashboard import open_page
from tests.gates.pages.test_soak_page import T0, WINDOW_S, soak_run, store  # noqa: F401

pytestmark = pytest.mark.slow
WINDOWS = 2400
SOAK_FIGURE = '[data-soak-figure][data-drawn="true"]'


@pytest.fixture
def soak_url(soak_run, live_server) -> str:  # noqa: F811
    """All database work before the browser starts: 2,400 windows (6.7 h at 10 s), a gap of
    ten minutes after window 1,000 (the agent restarted), a crash at window 1,800."""
    store(soak_run, range(1000))
    store(soak_run, range(1060, 1800))
    store(soak_run, [1800], crashed=True, output_throughput=3.0)
    store(soak_run, range(1801, WINDOWS), ttft_p99_ms=2600.0)  # a later, slower segment
    gap = {"start": T0 + 1000 * WINDOW_S, "end": T0 + 1060 * WINDOW_S, "cause": "agent down"}
    Soak.objects.filter(run=soak_run).update(gaps=[{**gap, "after_seq": 999, "seconds": 600}])
    return live_server.url + reverse("gates:run-detail", args=[soak_run.pk])


def wait_drawn(page) -> None:
    page.wait_for_selector(f"{SOAK_FIGURE} .plotly svg.main-svg")


def test_the_soak_page_draws_marks_and_zooms_and_fits_a_phone(
    session_cookie_for, vendor_admin, chromium_context, soak_url
):
    cookie = session_cookie_for(vendor_admin)
    with chromium_context(cookie) as browser:
        page, problems = open_page(browser, soak_url)
        wait_drawn(page)
        assert page.locator(f"{SOAK_FIGURE} .scatterlayer .trace").count() >= 9
        # The gap's band and the crash's line, drawn as shapes over the panels.
        assert page.locator(f"{SOAK_FIGURE} .shapelayer path").count() >= 2
        assert page.locator("table.soak-numbers tbody tr").count() == 9
        # Zoom to hours 1 to 2 (as a drag across a panel does): the range route redraws it
        # from its own 361 windows, every one of them.
        page.evaluate(
            """() => Plotly.relayout(document.querySelector('[data-soak-figure]'),
                   {'xaxis.range[0]': 1, 'xaxis.range[1]': 2})"""
        )
        status = page.locator('[data-soak-field="status"]')
        status.filter(has_text="361 of").wait_for()
        assert "Hours 1.000 to 2.000" in page.inner_text('[data-soak-field="caption"]')
        assert not problems, problems
        page.add_script_tag(content=axe_source())
        violations = page.evaluate(RUN_AXE, TAGS)
        assert not violations, violations  # the axe sweep's rules, on the soak page zoomed

        phone = browser.new_page()
        phone.set_viewport_size({"width": 390, "height": 844})
        phone.goto(soak_url)
        wait_drawn(phone)
        width = phone.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
        wide = phone.evaluate(
            """() => [...document.querySelectorAll('body *')]
                .filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5)
                .slice(0, 8).map((e) => e.tagName + '.' + e.className + ' '
                    + Math.round(e.getBoundingClientRect().right))"""
        )
        assert width[0] <= width[1], (width, wide)
        phone.add_script_tag(content=axe_source())
        violations = phone.evaluate(RUN_AXE, TAGS)
        assert not violations, violations
        chart = phone.locator("[data-soak-figure]").bounding_box()
        assert chart is not None and chart["width"] <= 390
