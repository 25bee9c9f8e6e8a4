"""The gate report in a real browser: the charts draw from static plotly.js, and print media
hides the on-screen links while keeping the verdict, the table and the digest."""

from __future__ import annotations

import pytest
from django.urls import reverse

from gates.pages.report.page import report_digest
from tests.browser.test_gate_dashboard import drawn, open_page
from tests.gates.pages.test_dashboards import record_g3_decision

pytestmark = pytest.mark.slow


def test_the_report_draws_its_charts_and_prints_without_its_links(
    chromium_context,
    session_cookie_for,
    live_server,
    actor,
    vendor_viewer,
    engagement,
    customer_viewer,
):
    decision = record_g3_decision(actor, vendor_viewer, engagement, repetitions=4)
    digest = report_digest(decision).value
    url = live_server.url + reverse("gates:gate-report", args=[decision.gate_id])
    with chromium_context(session_cookie_for(customer_viewer)) as browser:
        page, problems = open_page(browser, url)
        drawn(page, "figure-forest")
        drawn(page, "figure-measurements")
        assert page.locator("nav.crumbs").is_visible()
        page.emulate_media(media="print")
        assert not page.locator("nav.crumbs").is_visible()
        assert page.locator("table.clauses").is_visible()
        assert digest in page.inner_text("#digest")
        assert page.pdf(format="A4").startswith(b"%PDF-")  # chromium's own print of the page
        assert not problems, problems
