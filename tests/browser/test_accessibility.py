"""axe-core (WCAG 2.0/2.1 A and AA) over every page, for every role, at 1366 and 390 px, in
Debian's chromium: zero violations. axe-core 4.14.1 is vendored under vendor/axe-core (version,
digest and licence in its README). The world is an engagement with G1 and G2 passed and G3
decided on recorded measurements, and no worker heartbeat, so the service banner is on every
page and is checked too."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from django.urls import reverse
from PIL import Image

from gates import services
from tests.browser.test_pages import own_session
from tests.gates.pages.test_dashboards import record_g3_decision
from tests.gates.planner.test_run_band import planned_inputs

pytestmark = pytest.mark.slow

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
WIDTHS = {"desktop": 1366, "phone": 390}
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
RUN_AXE = """async (tags) => {
    const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
    return result.violations.map(v => ({
        id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ")), count: v.nodes.length,
    }));
}"""
# `make screenshots` sets this: every page the vendor engineer opens, at both widths, as it looks
# when it lands (charts drawn), for docs/dashboards.md.
SCREENSHOTS = os.environ.get("TOLLGATE_SCREENSHOTS_DIR", "")
CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-figure]')]
    .every(figure => figure.querySelector('.main-svg'))"""
# Pages whose content a script builds after load: axe runs once this is on the page.
BUILT_BY_SCRIPT = {"api-docs": ".opblock .opblock-summary-control"}


def axe_source() -> str:
    data = AXE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256, "vendor/axe-core/axe.min.js changed"
    return data.decode()


def planner_bands(monkeypatch) -> dict[str, str]:
    """The planner's TTFT band page, computed and still computing (no worker: computed here)."""
    monkeypatch.setattr(services.pokes, "send", lambda name, *args: None)
    url = reverse("gates:planner-ttft")
    ready = services.ttft_band_request(planned_inputs(tiers=(4, 16)))
    services.ttft_band_claim(ready.pk)
    services.ttft_band_compute(ready.pk)
    computing = services.ttft_band_request(planned_inputs(tiers=(8,)))
    return {
        "planner-ttft": f"{url}?digest={ready.digest}",
        "planner-ttft-computing": f"{url}?digest={computing.digest}",
    }


def keep_per_request_records(run) -> None:
    """Per-request records in every cell, as a replay keeps them, so the run page's
    per-request plots (with their notes and numbers) are checked too."""
    for measurement in run.measurements.all():
        at = [i * 0.5 for i in range(40)]
        measurement.metrics["per_request"] = {
            "sent_s": [a + 0.002 for a in at],
            "send_at_s": at,
            "ttft_ms": [100.0 + (i % 9) * 10 for i in range(40)],
        }
        measurement.save(update_fields=["metrics"])


@pytest.fixture
def pages(
    live_server,
    actor,
    vendor_viewer,
    vendor_admin,
    vendor_engineer,
    customer_viewer,
    engagement,
    monkeypatch,
) -> dict:
    """Every page a role can open, by name: all database work before the browser starts."""
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    if SCREENSHOTS:  # pictures of the pages as they usually look: no "degraded" banner
        for service in ("worker", "beat"):
            services.heartbeat_record(name=service)
    gate = decision.gate
    g1 = engagement.gates.get(kind="G1")
    run = decision.runs.first()
    keep_per_request_records(run)
    url = live_server.url
    common = {
        "engagements": reverse("gates:engagement-list"),
        "engagement": reverse("gates:engagement-detail", args=[engagement.pk]),
        "g1": reverse("gates:gate-detail", args=[g1.pk]),
        "g3": reverse("gates:gate-detail", args=[gate.pk]),
        "g3-report": reverse("gates:gate-report", args=[gate.pk]),
        "g3-run": reverse("gates:run-detail", args=[run.pk]),
        "g3-history": reverse("gates:gate-history", args=[gate.pk]),
        "clause-history": reverse("gates:clause-history"),
        # One decided run here: compared with itself, every cell reads "no distinguishable change".
        "g3-compare": reverse("gates:run-compare", args=[run.pk, run.pk]),
        "planner": reverse("gates:planner"),
        **planner_bands(monkeypatch),
        "alert-settings": reverse("gates:alert-preferences"),
        "engagement-alerts": reverse("gates:engagement-alerts", args=[engagement.pk]),
        "account": reverse("password_change"),
        "not-found": "/no-such-page/",
        # Swagger UI, as its script builds it (config/openapi.py, static/gates/swagger-ui.*).
        "api-docs": reverse("api-docs"),
        "api-browsable": reverse("api:engagement-list"),
    }
    vendor = {
        **common,
        "hosts": reverse("gates:host-list"),
        "host-add": reverse("gates:host-add"),
        "engagement-new": reverse("gates:engagement-new"),
        "g3-spec-edit": reverse("gates:spec-edit", args=[gate.pk]),
        "tokens": reverse("gates:token-list"),
        "audit": reverse("gates:audit-log"),
    }
    return {
        "customer": (own_session(customer_viewer, url), common),
        "engineer": (own_session(vendor_engineer, url), vendor),
        "admin": (own_session(vendor_admin, url), vendor),
        "url": url,
    }


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
@pytest.mark.parametrize("role", ["customer", "engineer", "admin"])
def test_no_page_has_an_axe_violation(chromium_context, pages, role, width):
    cookie, urls = pages[role]
    source = axe_source()
    found = {}
    with chromium_context(cookie) as context:
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in urls.items():
            response = page.goto(pages["url"] + path)
            if response is None or response.status == 403:
                continue  # a page this role may not open says so; nothing to check
            if name in BUILT_BY_SCRIPT:
                page.wait_for_selector(BUILT_BY_SCRIPT[name])
            page.add_script_tag(content=source)
            violations = page.evaluate(RUN_AXE, TAGS)
            if violations:
                found[name] = violations
            wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if wide > inner:
                found.setdefault(name, []).append({"id": "sideways-scroll", "px": wide})
            if SCREENSHOTS and role == "engineer":
                keep_screenshot(page, name, width)
    assert not found, json.dumps(found, indent=1)


def keep_screenshot(page, name: str, width: int) -> None:
    page.wait_for_function(CHARTS_DRAWN, timeout=30_000)
    folder = Path(SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    label = next(label for label, px in WIDTHS.items() if px == width)
    path = folder / f"{name}-{label}.png"
    page.screenshot(path=str(path))
    # 128 colours, no dithering: the same pixels to a reader, a third of the bytes in git.
    with Image.open(path) as shot:
        flat = shot.convert("RGB").quantize(128, Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    flat.save(path, optimize=True)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_api_docs_stay_clean_with_an_operation_tried_out(chromium_context, pages, width):
    """Swagger UI builds more as it is used: an operation opened, "Try it out", executed
    against the live server, its parameters' controls and the response's code blocks."""
    cookie, _ = pages["customer"]
    with chromium_context(cookie) as context:
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(pages["url"] + reverse("api-docs"))
        page.click("#operations-v1-v1_engagements_list .opblock-summary-control")
        page.click(".try-out__btn")
        page.click(".btn.execute")
        page.wait_for_selector(".live-responses-table tbody .response-col_status")
        assert page.inner_text(".live-responses-table tbody .response-col_status").strip() == "200"
        page.add_script_tag(content=axe_source())
        violations = page.evaluate(RUN_AXE, TAGS)
        wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert not violations, json.dumps(violations, indent=1)
    assert wide <= inner


def test_the_checker_finds_what_the_issue_found(chromium_context, pages):
    """The same run over a page with the faults the issue counted (the old green badge at
    4.44:1, an html without lang, an unnamed button, a scroll box that takes no focus)."""
    cookie, _ = pages["customer"]
    html = (
        "<html><head><title>t</title></head><body><main>"
        '<span style="background:#e3f4e8;color:#1a7f37;font-size:12px">pass</span>'
        "<button></button>"
        '<div style="overflow:auto;width:50px;height:20px"><p style="width:400px">wide text</p>'
        "</div></main></body></html>"
    )
    with chromium_context(cookie) as context:
        page = context.new_page()
        page.set_content(html)
        page.add_script_tag(content=axe_source())
        found = {v["id"] for v in page.evaluate(RUN_AXE, TAGS)}
    assert {"color-contrast", "html-has-lang", "button-name"} <= found, found
    assert "scrollable-region-focusable" in found, found
