"""The planner page in a real browser: Debian chromium submits the form and Plotly draws the
heatmap from the embedded figure JSON (static plotly.js, no CDN)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TIMEOUT_MS = 30_000


@pytest.fixture
def session_cookie(client, settings, live_server, customer_viewer) -> dict[str, str]:
    """A signed-in session for the browser. Every database call happens here, before Playwright
    starts: its greenlets give Django a connection the test database teardown cannot see."""
    # The live server speaks plain HTTP; production settings mark cookies Secure.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    client.force_login(customer_viewer)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}


@pytest.fixture
def signed_in(monkeypatch: pytest.MonkeyPatch, session_cookie) -> Iterator[BrowserContext]:
    # Playwright's sync API runs an event loop in this thread; Django must not refuse sync calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            context = chromium.new_context()
            context.set_default_timeout(TIMEOUT_MS)
            context.add_cookies([session_cookie])
            yield context
        finally:
            chromium.close()


def test_submitting_the_form_draws_the_heatmap_and_the_recommendation(signed_in, live_server):
    page = signed_in.new_page()
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(f"{live_server.url}/planner/")
    page.select_option("#id_model", "llama-3.1-70b")
    page.fill("#id_gpus", "8")
    page.fill("#id_gpu_mem_gib", "80")
    page.fill("#id_concurrency", "64")
    page.fill("#id_context_tokens", "32000")
    page.fill("#id_reuse_ratio", "0.8")
    page.click("button[value=plan]")
    page.wait_for_selector("#planner-chart .plotly svg.main-svg")
    assert page.locator("#planner-chart .plotly .hm").count() == 1  # the heatmap layer
    assert page.locator("#planner-chart .plotly .scatterlayer .trace").count() == 2
    result = page.inner_text("#planner-result")
    assert "Offload is worth a joint test" in result
    assert "could be loaded from an offload tier" in result
    assert not failed, failed
