"""The evidence library's public pages: no login, read-only. Only publications the customer
approved are reachable (a withdrawn one keeps its URL and says so); claims with their live
status, badge and JSON feed. Rate-limited per client address. HTTP only."""

from __future__ import annotations

from functools import wraps
from urllib.parse import urljoin

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import get_conditional_response
from django.views.decorators.http import require_GET

from gates.api.rest.throttling import count_in_window
from gates.decisions.claims import ClaimCheck, check_claim
from gates.evidence import publication as publishing
from gates.evidence import statement
from gates.models import Claim, Publication
from gates.pages.detail import list_page
from gates.pages.report import pdf

WINDOW_S = 60
BADGE_COLOURS = {"supported": "#1a7f37", "partly": "#9a6700", "not supported": "#cf222e"}


def rate_limited(view):
    """At most TOLLGATE_LIBRARY_RATE requests a minute from one address (shared cache, or this
    process's while the cache is down), then 429 with Retry-After."""

    @wraps(view)
    def limited(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        allowed = getattr(settings, "TOLLGATE_LIBRARY_RATE", 120)
        key = f"library_{request.META.get('REMOTE_ADDR', '')}"
        if count_in_window(key, WINDOW_S) > allowed:
            response = HttpResponse(
                "Too many requests to the library; try again in a minute.",
                status=429,
                content_type="text/plain",
            )
            response["Retry-After"] = str(WINDOW_S)
            return response
        return view(request, *args, **kwargs)

    return limited


def public_publications():
    """What the library may show: approved at some point (withdrawn ones as tombstones). The
    stored PDF is read only by its own view."""
    return Publication.objects.filter(published_at__isnull=False).defer("pdf")


def _publication(slug: str) -> Publication:
    found = public_publications().filter(slug=slug).first()
    if found is None:
        raise Http404("no published report here")
    return found


@require_GET
@rate_limited
def library_index(request: HttpRequest) -> HttpResponse:
    """A page of the published reports, newest first, with their count; the claims below."""
    publications = public_publications().order_by("-published_at", "-id")
    page = list_page(request, publications)
    claims = [(c, claim_status(c)) for c in Claim.objects.prefetch_related("publications")[:50]]
    context = {"publications": page, "page": page, "claims": claims}
    return render(request, "library/index.html", context)


@require_GET
@rate_limited
def library_report(request: HttpRequest, slug: str) -> HttpResponse:
    publication = _publication(slug)
    return render(request, "library/report.html", report_context(request, publication))


@require_GET
@rate_limited
def library_report_pdf(request: HttpRequest, slug: str) -> HttpResponse:
    publication = _publication(slug)
    if publication.state == Publication.State.WITHDRAWN:
        raise Http404("this report was withdrawn")
    document, sha256 = publication_pdf(publication.pk)
    etag = f'"{sha256}"'
    unchanged = get_conditional_response(request, etag=etag)
    if unchanged is not None:
        return unchanged
    response = HttpResponse(document, content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="tollgate-library-{slug}.pdf"'
    response["ETag"] = etag
    return response


def publication_pdf(publication_id: int) -> tuple[bytes, str]:
    """The publication's PDF as stored, rendered here once if the worker never did."""
    # The renderer is looked up when it runs, so the tests' spy on it sees every render.
    return publishing.publication_pdf_stored(
        publication_id, lambda publication: render_publication_pdf(publication)
    )


def render_publication_pdf(publication: Publication) -> bytes:
    """What the public page shows, fixed at approval, as a PDF; nothing in it depends on who
    asked (the keys' address is the site's own)."""
    context = {**report_context(None, publication), "pdf": True}
    return pdf.html_to_pdf(render_to_string("library/report.html", context))


@require_GET
@rate_limited
def library_bundle(request: HttpRequest, slug: str) -> HttpResponse:
    publication = _publication(slug)
    if publication.state == Publication.State.WITHDRAWN:
        raise Http404("this report was withdrawn")
    response = HttpResponse(bytes(publication.bundle), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{bundle_name(publication)}"'
    response["ETag"] = f'"{publication.bundle_sha256}"'
    return response


def bundle_name(publication: Publication) -> str:
    return f"tollgate-library-{publication.slug}.zip"


def report_context(request: HttpRequest | None, publication: Publication) -> dict:
    keys_path = reverse("api:evidence-keys")
    consents = publication.consents.select_related("key").order_by("signed_at", "id")
    return {
        "publication": publication,
        "record": publication.record,
        "withdrawn": publication.state == Publication.State.WITHDRAWN,
        "consents": [_consent_view(c) for c in consents],
        "bundle_name": bundle_name(publication),
        "fingerprint": consents[0].key.fingerprint if consents else "",
        "keys_url": (
            request.build_absolute_uri(keys_path)
            if request is not None
            else urljoin(settings.SITE_URL, keys_path)
        ),
        "pdf": False,
    }


def consent_envelope(consent) -> dict:
    """The consent as a DSSE envelope signed by the server key: checked like the evidence's
    (gates.evidence.statement.verify_envelope, or securesystemslib's Envelope.verify)."""
    signature = (consent.key.fingerprint, bytes(consent.signature))
    return statement.envelope(bytes(consent.payload), [signature])


def _consent_view(consent) -> dict:
    return {
        "act": consent.act,
        "party": consent.party,
        "at": consent.signed_at,
        "keyid": consent.key.fingerprint,
        "payload": bytes(consent.payload).decode(),
        "envelope": statement.envelope_bytes(consent_envelope(consent)).decode(),
    }


def claim_status(claim: Claim) -> ClaimCheck:
    """Live: only reports still published count (a withdrawn report no longer supports)."""
    reports = [
        {"id": p.slug, "clauses": p.record.get("clauses") or []}
        for p in claim.publications.all()
        if p.state == Publication.State.PUBLISHED
    ]
    return check_claim(claim.text, reports)


def _claim(slug: str) -> Claim:
    claim = Claim.objects.prefetch_related("publications").filter(slug=slug).first()
    if claim is None:
        raise Http404("no such claim")
    return claim


@require_GET
@rate_limited
def library_claim(request: HttpRequest, slug: str) -> HttpResponse:
    claim = _claim(slug)
    cited = [p for p in claim.publications.all() if p.is_public]
    context = {"claim": claim, "check": claim_status(claim), "cited": cited}
    return render(request, "library/claim.html", context)


@require_GET
@rate_limited
def claim_feed(request: HttpRequest, slug: str) -> JsonResponse:
    claim = _claim(slug)
    check = claim_status(claim)
    cited = [p for p in claim.publications.all() if p.is_public]
    response = JsonResponse(
        {
            "claim": claim.text,
            "status": check.status,
            "reason": check.reason,
            "numbers": [
                {"text": n.number.text, "supported": n.supported, "reason": n.reason}
                for n in check.numbers
            ],
            "reports": [
                {
                    "url": request.build_absolute_uri(
                        reverse("gates:library-report", args=[p.slug])
                    ),
                    "state": p.state,
                }
                for p in cited
            ],
            "url": request.build_absolute_uri(reverse("gates:library-claim", args=[claim.slug])),
        }
    )
    response["Access-Control-Allow-Origin"] = "*"  # the vendor's own site reads it
    response["Cache-Control"] = "max-age=60"
    return response


@require_GET
@rate_limited
def claim_badge(request: HttpRequest, slug: str) -> HttpResponse:
    check = claim_status(_claim(slug))
    svg = badge_svg("evidence", check.status, BADGE_COLOURS[check.status])
    response = HttpResponse(svg, content_type="image/svg+xml")
    response["Cache-Control"] = "max-age=60"
    return response


def badge_svg(label: str, status: str, colour: str) -> str:
    """A flat two-part badge; widths from the text length (about 7 px a character)."""
    left, right = 10 + 7 * len(label), 10 + 7 * len(status)
    width = left + right
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label="{label}: {status}"><title>{label}: {status}</title>'
        f'<rect width="{left}" height="20" fill="#555"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{colour}"/>'
        f'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="5" y="14">{label}</text><text x="{left + 5}" y="14">{status}</text></g></svg>'
    )
