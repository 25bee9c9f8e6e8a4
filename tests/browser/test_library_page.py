"""The evidence library in Debian's chromium as an anonymous visitor: from the list to a report,
its bundle downloaded and verified with bin/tollgate-verify, a claim with its status; and axe
(WCAG 2.0/2.1 A and AA) finds nothing on the library's pages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import caches
from django.urls import reverse

from gates import services
from gates.evidence import publication as publishing
from gates.models import EvidenceKey
from gates.services.claims import claim_create
from gates.tenancy import viewer_for_user
from tests.browser.test_accessibility import RUN_AXE, TAGS, axe_source
from tests.gates.evidence.conftest import api  # noqa: F401 (the evidence tests' token client)
from tests.gates.evidence.helpers import g3_upload_decision

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def library(live_server, api, actor, vendor_viewer, engagement, host, customer_owner, tmp_path):  # noqa: F811
    """A published G3 report and a claim, and the server's public key on disk: all database
    work before the browser starts."""
    caches["default"].clear()  # this worktree's cache database: no rate-limit counts left
    decision = g3_upload_decision(api, actor, vendor_viewer, engagement, host)
    proposed = publishing.publication_propose(actor=actor, viewer=vendor_viewer, decision=decision)
    owner = services.Actor(user=customer_owner, label="test")
    published = publishing.publication_approve(
        actor=owner,
        viewer=viewer_for_user(customer_owner),
        publication=proposed,
        naming="anonymous",
        host_details=["gpu_count"],
    )
    estimate = published.record["clauses"][0]["estimate"]
    claim = claim_create(
        actor=actor,
        viewer=vendor_viewer,
        text=f"TTFT p50 reduction {estimate - 5:.0f} % at c=8",
        publications=[published],
    )
    key = tmp_path / "tollgate-evidence.pub"
    key.write_text(EvidenceKey.objects.get().public_key + "\n")
    return {"url": live_server.url, "publication": published, "claim": claim, "key": key}


def test_an_anonymous_visitor_walks_the_library_and_verifies_a_bundle(
    chromium_context, library, tmp_path
):
    base = library["url"]
    nobody = {"name": "visitor", "value": "anonymous", "url": base}  # no session
    with chromium_context(nobody) as context:
        page = context.new_page()
        page.goto(base + reverse("gates:library"))
        page.get_by_role("link", name=f"G3 report {library['publication'].slug}").click()
        page.wait_for_url(f"**/library/reports/{library['publication'].slug}/")
        text = page.inner_text("main")
        assert "an anonymous customer" in text and "ttft_p50" in text
        assert "bin/tollgate-verify" in text
        with page.expect_download() as download:
            page.get_by_role("link", name="Evidence bundle (zip)").click()
        bundle = tmp_path / download.value.suggested_filename
        download.value.save_as(bundle)
        page.goto(base + reverse("gates:library-claim", args=[library["claim"].slug]))
        assert "Evidence: supported" in page.inner_text("main")
    verified = subprocess.run(
        [sys.executable, "bin/tollgate-verify", str(bundle), "--public-key", str(library["key"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.rstrip().endswith("VERIFIED")
    assert "a redacted copy (signed by the server)" in verified.stdout


@pytest.mark.parametrize("width", [1366, 390])
def test_the_library_pages_have_no_axe_violation(chromium_context, library, width):
    base = library["url"]
    urls = {
        "library": reverse("gates:library"),
        "report": reverse("gates:library-report", args=[library["publication"].slug]),
        "claim": reverse("gates:library-claim", args=[library["claim"].slug]),
    }
    found = {}
    with chromium_context({"name": "visitor", "value": "anonymous", "url": base}) as context:
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in urls.items():
            page.goto(base + path)
            page.add_script_tag(content=axe_source())
            violations = page.evaluate(RUN_AXE, TAGS)
            if violations:
                found[name] = violations
            wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if wide > inner:
                found.setdefault(name, []).append({"id": "sideways-scroll", "px": wide})
    assert not found, json.dumps(found, indent=1)
