"""Debian chromium driven by Playwright (never `playwright install`), signed in through a
session cookie the test made before the browser started."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = "/usr/bin/chromium"
# Without the networking flags chromium keeps calling home on a machine with no internet.
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
def session_cookie_for(client, settings, live_server) -> Callable[[object], dict[str, str]]:
    """A session cookie for a user, for the browser. Call it before the browser starts: every
    database call must happen before Playwright's greenlets hold a connection the test
    database teardown cannot see."""
    # The live server speaks plain HTTP; production settings mark cookies Secure.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False

    def cookie(user) -> dict[str, str]:
        client.force_login(user)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        return {"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}

    return cookie


@pytest.fixture
def chromium_context(monkeypatch: pytest.MonkeyPatch):
    """A context manager: chromium_context(cookie) yields a signed-in browser context."""
    # Playwright's sync API runs an event loop in this thread; Django must not refuse sync calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    @contextmanager
    def open_context(cookie: dict[str, str]) -> Iterator[BrowserContext]:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            )
            try:
                context = chromium.new_context()
                context.set_default_timeout(TIMEOUT_MS)
                context.add_cookies([cookie])
                yield context
            finally:
                chromium.close()

    return open_context
