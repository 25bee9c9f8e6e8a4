"""What a publication shows, read from the database: the customer's secrets (names, host names,
addresses, keys), the public record of the report, and the redacted bundle signed by the server.
Django side (reads only); the redaction itself is gates/evidence/redaction.py."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model

from gates.errors import ServiceError
from gates.evidence import keys, layout, statement
from gates.evidence.redaction import (
    RedactionTerms,
    bundle_texts,
    leaks,
    redact_members,
    replace_secrets,
)
from gates.evidence.store import (
    bundle_for_decision,
    cosignature_rows,
    decision_seal,
    retention_envelope,
    retention_runs,
)
from gates.evidence.verify import verify_bundle
from gates.models import Decision, Host, PartyKey, Publication, WorkloadTrace

CUSTOMER = "[customer]"


def customer_label(publication: Publication) -> str:
    naming = publication.naming
    if naming == Publication.Naming.NAME:
        return publication.decision.gate.engagement.organization.name
    if naming == Publication.Naming.INDUSTRY:
        return publication.industry_label.strip() or "a customer"
    return "an anonymous customer"


def redaction_terms(publication: Publication) -> RedactionTerms:
    """Everything that names the customer, each with the placeholder it becomes."""
    engagement = publication.decision.gate.engagement
    organization = engagement.organization
    label = customer_label(publication)
    secrets: list[tuple[str, str]] = []
    if publication.naming != Publication.Naming.NAME:
        secrets += [(organization.name, label), (organization.slug, label)]
    users = get_user_model().objects.filter(memberships__organization=organization)
    for user in users:
        full = f"{user.first_name} {user.last_name}".strip()
        values = (user.get_username(), user.email, full, user.first_name, user.last_name)
        secrets += [(value, "[person]") for value in values if value]
    hosts = Host.objects.filter(organization=organization) | Host.objects.filter(
        runs__decisions=publication.decision
    )
    for host in hosts.distinct():
        secrets += [(host.name, "[host]"), (host.address, "[address]")]
    for key in PartyKey.objects.filter(organization=organization):
        secrets += [(key.public_key.strip(), "[key]"), (key.fingerprint, "[key]")]
        secrets += [(part, "[key]") for part in key.public_key.split()[1:2]]
    return RedactionTerms(
        secrets=tuple((s, p) for s, p in secrets if s),
        shown_host_details=frozenset(publication.host_details or ()),
    )


def public_record(publication: Publication, terms: RedactionTerms, vendor: str) -> dict:
    """The report as the library shows it, redacted like the bundle."""
    decision = publication.decision
    gate, engagement, spec = decision.gate, decision.gate.engagement, decision.spec.document
    inventory = json.loads(_members(decision)[layout.INVENTORY]) or {}
    record = {
        "gate": gate.kind,
        "verdict": decision.verdict,
        "rehearsal": decision.rehearsal,
        "customer": customer_label(publication),
        "vendor": vendor,
        "model": engagement.model_name,
        "platform": engagement.platform,
        "engine": _engine(decision),
        "tier": _tier(engagement.kv_plan, inventory, terms.shown_host_details),
        "workload": spec.get("workload") or {},
        "trace": _trace(engagement, spec.get("workload") or {}),
        "tiers": spec.get("tiers") or [],
        "confidence": spec.get("confidence"),
        "clauses": [_clause(c) for c in decision.clauses or [] if isinstance(c, dict)],
        "decided_at": decision.created_at.isoformat(),
        "spec_version": decision.spec.version,
        "spec_signatures": [
            {"party": s.party, "signed_at": s.signed_at.isoformat()}
            for s in decision.spec.signatures.filter(signed_at__lte=decision.created_at)
        ],
        "host_details": {k: v for k, v in inventory.items() if k in terms.shown_host_details},
    }
    redacted, _ = replace_secrets(json.dumps(record).encode(), terms)
    return json.loads(redacted)


def redacted_bundle(publication: Publication, terms: RedactionTerms) -> bytes:
    """The decision's bundle redacted as agreed, under a statement the server signs now whose
    predicate records the redaction; refused if it would leak or would not verify."""
    decision = publication.decision
    original = _members(decision)
    signed = {n: d for n, d in original.items() if n not in layout.UNSIGNED}
    members, changed = redact_members(signed, terms)
    seal = decision_seal(decision)
    predicate = json.loads(bytes(seal.payload))["predicate"]
    predicate["gate"]["engagement"] = "[engagement]"
    predicate["redaction"] = {
        "publication": publication.slug,
        "of_envelope": layout.sha256_hex(original[layout.ENVELOPE]),
        "naming": publication.naming,
        "host_details_shown": sorted(terms.shown_host_details),
        "members": changed,
        "original_cosigned_by": [row["party"] for row in cosignature_rows(seal)],
    }
    predicate = json.loads(replace_secrets(json.dumps(predicate).encode(), terms)[0])
    subjects = {name: layout.sha256_hex(data) for name, data in members.items()}
    payload = statement.payload_bytes(statement.statement(subjects, predicate))
    key = keys.key_active()
    envelope = statement.envelope(payload, [(key.fingerprint, keys.key_sign(key, payload))])
    members[layout.ENVELOPE] = statement.envelope_bytes(envelope)
    runs = retention_runs(decision)  # a pruned soak's dropped windows, signed over this envelope
    if runs:
        members[layout.RETENTION] = retention_envelope(key, members[layout.ENVELOPE], runs)
    members[layout.SERVER_KEY] = f"{key.public_key}\n".encode()
    members[layout.COSIGNATURES] = layout.canonical_json([])
    members[layout.TO_COSIGN] = statement.pae(statement.PAYLOAD_TYPE, payload)
    _refuse_leaks(bundle_texts(members), terms)
    data = layout.write_zip(members)
    report = verify_bundle(data, public_key=statement.load_public_key(key.public_pem))
    if not report.ok:
        raise ServiceError(
            "the redacted bundle would not verify (a secret is part of a measured value?): "
            + "; ".join(report.problems[:3])
        )
    return data


def refuse_record_leaks(record: dict, terms: RedactionTerms) -> None:
    _refuse_leaks({"the public record": json.dumps(record, ensure_ascii=False)}, terms)


def _refuse_leaks(texts: dict, terms: RedactionTerms) -> None:
    found = leaks(texts, terms)
    if found:
        # Never say the secret itself: the message may be shown or logged.
        raise ServiceError(
            f"publishing would leak an identifying value ({len(found)} place(s), e.g. "
            f"{found[0].split(':')[0]}); nothing was published"
        )


def _members(decision: Decision) -> dict[str, bytes]:
    return layout.read_zip(bundle_for_decision(decision)[0])


def _clause(clause: dict) -> dict:
    given = clause.get("shown")
    shown = given if isinstance(given, dict) else {}
    return {
        "metric": clause.get("metric") or clause.get("check"),
        "compare": clause.get("compare"),
        "change": clause.get("change"),
        "tier": clause.get("tier"),
        "threshold": clause.get("threshold"),
        "estimate": clause.get("estimate"),
        "low": clause.get("low"),
        "high": clause.get("high"),
        "verdict": clause.get("verdict"),
        "shown_estimate": shown.get("estimate"),
        "shown_interval": shown.get("interval"),
    }


def _engine(decision: Decision) -> str:
    for run in decision.runs.select_related("host__profile").order_by("attempt"):
        if run.host is not None:
            return run.host.profile.name
    arms = ", ".join(str(a) for a in (decision.spec.document.get("arms") or {}).values())
    return f"not recorded (results uploaded; arms {arms})"


def _tier(kv_plan: dict, inventory: dict, shown: frozenset[str]) -> str:
    tier = (kv_plan or {}).get("offload_tier") or (kv_plan or {}).get("tier")
    if tier:
        return str(tier)
    capacity = (
        inventory.get("offload_tier_capacity_gib") if "offload_tier_capacity_gib" in shown else None
    )
    return f"offload tier of {capacity} GiB" if capacity else "offload tier (size not shown)"


def _trace(engagement, workload: dict) -> dict | None:
    digest = (workload.get("trace") or {}).get("sha256") if isinstance(workload, dict) else None
    if not digest:
        return None
    trace = WorkloadTrace.objects.filter(engagement=engagement, sha256=digest).first()
    if trace is None or not isinstance(trace.profile, dict):
        return {"sha256": digest}
    summary = {k: v for k, v in trace.profile.items() if isinstance(v, (int, float, str))}
    return {"sha256": digest, "format": trace.format, "requests": trace.requests, **summary}
