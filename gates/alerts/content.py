"""What an alert says: the facts of its cause (verdict, deciding clause, run outcome, links)
and its plain-text and HTML bodies, rendered from templates/alerts/.

Facts are read only from the alert's own engagement, gate and run, so an alert can never carry
another organization's name or data; anything that looks like a secret is cut from free text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.template import TemplateDoesNotExist
from django.template.loader import render_to_string
from django.urls import reverse

from gates.alerts.events import event_kind

# Private keys and Tollgate API tokens, should a tool's error message ever echo one.
_SECRET_PATTERNS = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\btg_[A-Za-z0-9_\-]{8,}"),
)
VERDICTS_WITH_A_DECIDING_CLAUSE = ("fail", "inconclusive", "invalid", "infra_error")


@dataclass(frozen=True)
class Bodies:
    text: str
    html: str


def redact(text: str) -> str:
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub("[redacted]", text)
    return text


def site_link(route: str, pk: int) -> str:
    return f"{settings.SITE_URL}{reverse(route, args=[pk])}"


def deciding_clause(clauses: list[dict], verdict: str) -> dict | None:
    """The clause that decided the verdict: the first one with the gate's own verdict."""
    if verdict not in VERDICTS_WITH_A_DECIDING_CLAUSE:
        return None
    for clause in clauses:
        if isinstance(clause, dict) and clause.get("verdict") == verdict:
            return _clause_facts(clause)
    return None


def _clause_facts(clause: dict) -> dict:
    threshold = clause.get("threshold", clause.get("expected"))
    tier = clause.get("tier", clause.get("tiers"))
    return {
        "name": str(clause.get("metric") or clause.get("check") or "check"),
        "tier": tier if isinstance(tier, (int, str, list)) else None,
        "estimate": _number(clause.get("estimate")),
        "low": _number(clause.get("low")),
        "high": _number(clause.get("high")),
        "bar": threshold if isinstance(threshold, (int, float, str)) else None,
        "verdict": str(clause.get("verdict")),
        "cause": redact(str(clause.get("cause") or ""))[:500],
    }


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def alert_facts(*, event: str, engagement, gate=None, run=None, decision=None) -> dict:
    """The machine-readable facts of an alert, the same for its email and its webhooks."""
    facts: dict = {"event": event, "title": event_kind(event).title}
    if engagement is not None:
        facts["engagement"] = {
            "id": engagement.pk,
            "title": engagement.title,
            "url": site_link("gates:engagement-detail", engagement.pk),
        }
    if gate is not None:
        facts["gate"] = {
            "id": gate.pk,
            "kind": gate.kind,
            "verdict": gate.verdict,
            "url": site_link("gates:gate-detail", gate.pk),
        }
    if run is not None:
        facts["run"] = {
            "id": run.pk,
            "attempt": run.attempt,
            "outcome": run.outcome or None,
            "url": site_link("gates:run-detail", run.pk),
        }
    if decision is not None:
        facts["decision"] = {
            "id": decision.pk,
            "verdict": decision.verdict,
            "spec_version": decision.spec.version,
            "clause": deciding_clause(decision.clauses, decision.verdict),
        }
    return facts


def message_text(event: str, context: dict) -> str | None:
    """The event's own message from templates/alerts/messages/<event>.txt, if it has one."""
    try:
        return render_to_string(f"alerts/messages/{event}.txt", context)
    except TemplateDoesNotExist:
        return None


def render_bodies(*, message: str, facts: dict, ack_url: str | None) -> Bodies:
    """Both parts of the email: the message, the deciding clause, the run, the links."""
    context = {
        "message": redact(message).strip(),
        "facts": facts,
        "ack_url": ack_url,
        "site_url": settings.SITE_URL,
    }
    return Bodies(
        text=render_to_string("alerts/email.txt", context),
        html=render_to_string("alerts/email.html", context),
    )
