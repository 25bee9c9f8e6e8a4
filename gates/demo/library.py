"""The demo's evidence library: the passing engagement's G3 report published with the demo
customer's consent (named by an industry label), one claim its numbers support and one they do
not, and the library read back as an anonymous visitor, its bundle verified offline."""

from __future__ import annotations

import math

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from gates import services
from gates.demo.walk import DemoStep
from gates.evidence import publication as publishing
from gates.evidence.statement import load_public_key
from gates.evidence.verify import verify_bundle
from gates.models import Claim, Decision, Engagement, EvidenceKey, Publication, Verdict
from gates.pages.library.public import claim_status
from gates.services.claims import claim_create
from gates.tenancy import viewer_for_user

INDUSTRY = "an AI platform provider"
SHOWN = ["gpu_models", "gpu_count", "vllm_version"]
METRIC_WORDS = {"ttft_p50": "TTFT p50", "ttft_p99": "TTFT p99", "output_throughput": "throughput"}


def check_library(engagements: list[Engagement]) -> list[DemoStep]:
    """The first engagement whose G3 passed: its report published, and its claims."""
    users = get_user_model().objects
    vendor, customer = users.get(username="vendor"), users.get(username="customer")
    for engagement in engagements:
        decision = engagement.gates.get(kind="G3").decisions.first()
        if decision is not None and decision.verdict == Verdict.PASS:
            return publish_demo_report(decision, vendor=vendor, customer=customer)
    return [DemoStep("evidence library", False, "no passing G3 to publish")]


def publish_demo_report(decision: Decision, *, vendor, customer) -> list[DemoStep]:
    """Publish the decision's report (once) and write the two claims (once); say what the
    anonymous library shows."""
    if decision.verdict != Verdict.PASS:
        return [DemoStep("evidence library", False, f"G3 is {decision.verdict}, not published")]
    publication = _published(decision, vendor, customer)
    supported, unsupported = demo_claims(publication.record.get("clauses") or [])
    return [
        _library_read(publication),
        _claim_step(_claim(supported, publication, vendor), expected="supported"),
        _claim_step(_claim(unsupported, publication, vendor), expected="not supported"),
    ]


def demo_claims(clauses: list[dict]) -> tuple[str, str]:
    """A sentence inside what was measured, and one well above it, from a passing clause."""
    clause = next(c for c in clauses if c.get("metric") in METRIC_WORDS and c.get("high"))
    low, high = float(clause["low"]), float(clause["high"])
    inside = max(math.floor(low * 0.9), 1)
    above = math.ceil(high * 1.5) + 5
    return _sentence(clause, inside), _sentence(clause, above)


def _sentence(clause: dict, value: float) -> str:
    words, tier = METRIC_WORDS[clause["metric"]], clause.get("tier")
    at = f" at c={tier}" if tier else ""
    if clause.get("change") == "ratio":
        return f"{words} {value}x against recompute{at}"
    sign = "reduction" if clause.get("change") == "reduction" else "gain"
    return f"{words} {sign} {value} %{at} in a signed G3 test"


def _published(decision: Decision, vendor, customer) -> Publication:
    found = decision.publications.filter(state=Publication.State.PUBLISHED).first()
    if found is not None:
        return found
    publication = decision.publications.filter(state=Publication.State.PROPOSED).first()
    if publication is None:
        publication = publishing.publication_propose(
            actor=services.Actor(user=vendor, label="demo"),
            viewer=viewer_for_user(vendor),
            decision=decision,
        )
    return publishing.publication_approve(
        actor=services.Actor(user=customer, label="demo"),
        viewer=viewer_for_user(customer),
        publication=publication,
        naming="industry",
        industry_label=INDUSTRY,
        host_details=SHOWN,
    )


def _claim(text: str, publication: Publication, vendor) -> Claim:
    found = Claim.objects.filter(text=text, publications=publication).first()
    if found is not None:
        return found
    return claim_create(
        actor=services.Actor(user=vendor, label="demo"),
        viewer=viewer_for_user(vendor),
        text=text,
        publications=[publication],
    )


def _library_read(publication: Publication) -> DemoStep:
    anonymous = Client(HTTP_HOST="127.0.0.1")
    index = anonymous.get(reverse("gates:library"), secure=True)
    page = anonymous.get(reverse("gates:library-report", args=[publication.slug]), secure=True)
    bundle = anonymous.get(reverse("gates:library-bundle", args=[publication.slug]), secure=True)
    key = EvidenceKey.objects.get(public_key=publication.consents.first().key.public_key)
    verified = (
        bundle.status_code == 200
        and verify_bundle(bundle.content, public_key=load_public_key(key.public_pem)).ok
    )
    ok = index.status_code == page.status_code == 200 and verified
    detail = (
        f"/library/reports/{publication.slug}/ published as '{INDUSTRY}', redacted bundle "
        f"{'verified' if verified else 'does NOT verify'}"
    )
    return DemoStep("evidence library", ok, detail)


def _claim_step(claim: Claim, *, expected: str) -> DemoStep:
    check = claim_status(claim)
    reasons = "; ".join(number.reason for number in check.numbers)
    return DemoStep(f"{expected} claim", check.status == expected, f"'{claim.text}': {reasons}")
