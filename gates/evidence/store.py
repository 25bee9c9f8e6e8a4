"""Evidence from the database: a decision's members gathered from its records, its seal (the
server-signed statement, made once), the parties' co-signatures, and the zip. The one writer
of EvidenceSeal and EvidenceSignature rows. Django side; the formats are in the pure modules."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from gates import sshsig
from gates.errors import NotAllowedError, ServiceError
from gates.evidence import keys, layout, retention, statement
from gates.evidence.inventory import amendments_record, g1_record, signature_record
from gates.evidence.layout import canonical_json
from gates.evidence.versions import software_versions
from gates.models import (
    Decision,
    EvidenceKey,
    EvidenceSeal,
    EvidenceSignature,
    PartyKey,
    Run,
    Soak,
)
from gates.selectors import run_measurement_records
from gates.services.audit import Actor, audit_record
from gates.services.runs.carrying import run_carried_by_source, run_carried_source
from gates.services.runs.step_facts import run_g1_facts, run_steps
from gates.tenancy import Viewer
from runners.contract import inventory_of


def bundle_for_decision(decision: Decision) -> tuple[bytes, str]:
    """The decision's zip (sealed on first use) and its SHA-256 hex."""
    seal = decision_seal(decision)
    members = decision_members(decision, seal.snapshot)
    members[layout.ENVELOPE] = statement.envelope_bytes(seal_envelope(seal))
    record = retention_record(decision, seal, members[layout.ENVELOPE])
    if record is not None:
        members[layout.RETENTION] = record
    members[layout.SERVER_KEY] = f"{seal.key.public_key}\n".encode()
    members[layout.COSIGNATURES] = canonical_json(cosignature_rows(seal))
    members[layout.TO_COSIGN] = seal_pae(seal)
    data = layout.write_zip(members)
    return data, layout.sha256_hex(data)


def bundle_for_run(run: Run) -> tuple[bytes, str]:
    """A run's evidence on request: its decision's bundle once decided; before, its records so
    far under a statement signed now (same records and key -> same bytes; not sealed)."""
    decision = run.decisions.first()
    if decision is not None:
        return bundle_for_decision(decision)
    members = {
        layout.SPEC: canonical_json(run.spec.document),
        layout.VERSIONS: canonical_json({**software_versions(), "host_tools": {}}),
        **run_members(run, profile=True),
    }
    predicate = {
        "gate": {"id": run.gate_id, "kind": run.gate.kind},
        "run": {"attempt": run.attempt, "state": run.state, "outcome": run.outcome},
        "decision": None,
        "spec": {"version": run.spec.version, "digest": run.spec.digest},
    }
    subjects = {name: layout.sha256_hex(data) for name, data in members.items()}
    payload = statement.payload_bytes(statement.statement(subjects, predicate))
    key = keys.key_active()
    signature = keys.key_sign(key, payload)
    members[layout.ENVELOPE] = statement.envelope_bytes(
        statement.envelope(payload, [(key.fingerprint, signature)])
    )
    members[layout.SERVER_KEY] = f"{key.public_key}\n".encode()
    members[layout.TO_COSIGN] = statement.pae(statement.PAYLOAD_TYPE, payload)
    data = layout.write_zip(members)
    return data, layout.sha256_hex(data)


def retention_record(decision: Decision, seal: EvidenceSeal, sealed: bytes) -> bytes | None:
    """The server's signed record of the soak windows whose raw files retention dropped after
    the seal (signed by the seal's own key, so one pinned key checks both; Ed25519 is
    deterministic and the record never changes once pruning began: the same bytes each time)."""
    runs = retention_runs(decision)
    return retention_envelope(seal.key, sealed, runs) if runs else None


def retention_runs(decision: Decision) -> dict[int, dict]:
    """Per run attempt of the decision: the policy, windows stored and dropped seq ranges."""
    rows = Soak.objects.filter(run__decisions=decision).exclude(retention={})
    return {
        attempt: {key: record[key] for key in ("policy", "windows", "dropped")}
        for attempt, record in rows.values_list("run__attempt", "retention")
    }


def retention_envelope(key: EvidenceKey, sealed: bytes, runs: dict[int, dict]) -> bytes:
    payload = statement.payload_bytes(retention.retention_statement(sealed, runs))
    signed = [(key.fingerprint, keys.key_sign(key, payload))]
    return statement.envelope_bytes(statement.envelope(payload, signed))


def envelope_digest(decision: Decision) -> str:
    return layout.sha256_hex(statement.envelope_bytes(seal_envelope(decision_seal(decision))))


def seal_envelope(seal: EvidenceSeal) -> dict:
    return statement.envelope(bytes(seal.payload), [(seal.key.fingerprint, bytes(seal.signature))])


def seal_pae(seal: EvidenceSeal) -> bytes:
    """The bytes a party co-signs: the DSSE pre-authentication encoding of the payload."""
    return statement.pae(statement.PAYLOAD_TYPE, bytes(seal.payload))


def decision_seal(decision: Decision) -> EvidenceSeal:
    """The decision's seal, made and signed on first use. Two first requests at once make one:
    the loser of the unique insert reads the winner's."""
    found = EvidenceSeal.objects.select_related("key").filter(decision=decision).first()
    if found is not None:
        return found
    versions = {**software_versions(), "host_tools": _host_tools(decision)}
    # Each member added since the first seals is marked here: older seals keep their members.
    snapshot = {
        "versions": versions,
        "inventory": g1_record(decision),
        "inventory_amendments": amendments_record(decision),
        "soak_windows": True,
        "carried": True,
        # run.json names the run's profile snapshot and digest; carried-source.json is held.
        "run_profile": True,
    }
    return seal_create(decision, snapshot)


def seal_create(decision: Decision, snapshot: dict) -> EvidenceSeal:
    """Sign the statement over the members `snapshot` gives; the first of two racing wins."""
    members = decision_members(decision, snapshot)
    subjects = {name: layout.sha256_hex(data) for name, data in members.items()}
    payload = statement.payload_bytes(statement.statement(subjects, _predicate(decision)))
    key = keys.key_active()
    signature = keys.key_sign(key, payload)
    try:
        with transaction.atomic():
            return EvidenceSeal.objects.create(
                decision=decision, key=key, payload=payload, signature=signature, snapshot=snapshot
            )
    except IntegrityError:
        return EvidenceSeal.objects.select_related("key").get(decision=decision)


def decision_members(decision: Decision, snapshot: dict) -> dict[str, bytes]:
    """Every signed member: spec and its signatures, inventory, decision, runs and raw files."""
    result = decision.result or {}
    members = {
        layout.SPEC: canonical_json(decision.spec.document),
        layout.SPEC_SIGNATURES: canonical_json(_spec_signatures(decision)),
        layout.INVENTORY: canonical_json(snapshot.get("inventory")),
        layout.DECISION: canonical_json(_decision_record(decision)),
        layout.CONTEXT: canonical_json((result.get("inputs") or {}).get("context") or {}),
        layout.VERSIONS: canonical_json(snapshot.get("versions")),
    }
    if "inventory_amendments" in snapshot:
        members[layout.INVENTORY_AMENDMENTS] = canonical_json(snapshot["inventory_amendments"])
    if "operating_characteristic" in result:
        members[layout.OPERATING_CHARACTERISTIC] = canonical_json(
            result["operating_characteristic"]
        )
    profile = bool(snapshot.get("run_profile"))
    for run in decision.runs.select_related("host", "spec").order_by("attempt"):
        members.update(run_members(run, profile=profile))
        if snapshot.get("carried"):
            members.update(carried_members(run, profile=profile))
        if snapshot.get("soak_windows") and run.soak_samples.exists():
            members[layout.run_prefix(run.attempt) + layout.SOAK_WINDOWS] = canonical_json(
                _soak_windows(run)
            )
    return members


def run_members(run: Run, *, profile: bool) -> dict[str, bytes]:
    prefix = layout.run_prefix(run.attempt)
    members = {
        f"{prefix}run.json": canonical_json(_run_record(run, profile=profile)),
        f"{prefix}steps.json": canonical_json(run_steps(run)),
        f"{prefix}measurements.json": canonical_json(run_measurement_records(run)),
    }
    for artifact in run.artifacts.order_by("name"):
        members[f"{prefix}files/{artifact.name}"] = bytes(artifact.content)
    return members


def carried_members(run: Run, *, profile: bool) -> dict[str, bytes]:
    """The repetitions a carrying run decided on beside its own, per earlier attempt of its
    chain: that attempt's record (with its decision's verdict), the carried measurement
    records, and every raw file of each carried cell (its result and /metrics scrapes); with
    `profile` (seals made since), what the verifier needs to recompute the carried set."""
    members = {}
    source = run_carried_source(run) if profile else None
    if source is not None:
        name = layout.run_prefix(run.attempt) + layout.CARRIED_SOURCE
        members[name] = canonical_json(source)
    for origin, rows in run_carried_by_source(run):
        prefix = layout.carried_prefix(run.attempt, origin.attempt)
        decision = origin.decisions.filter(kind=Decision.Kind.ENGINE).order_by("-id").first()
        record = {
            **_run_record(origin, profile=profile),
            "decision": {"id": decision.pk, "verdict": decision.verdict} if decision else None,
            "carried": sorted({row["repetition"] for row in rows}),
        }
        members[f"{prefix}run.json"] = canonical_json(record)
        members[f"{prefix}measurements.json"] = canonical_json(rows)
        cells = {row["artifact"].rsplit("/", 1)[0] for row in rows if row["artifact"]}
        for artifact in origin.artifacts.order_by("name"):
            if artifact.name.rsplit("/", 1)[0] in cells:
                members[f"{prefix}files/{artifact.name}"] = bytes(artifact.content)
    return members


def cosignature_rows(seal: EvidenceSeal) -> list[dict]:
    rows = seal.cosignatures.select_related("organization", "key", "signed_by").order_by("id")
    return [
        {
            "party": row.party,
            "organization": row.organization.slug,
            "keyid": row.key.fingerprint,
            "public_key": row.key.public_key,
            "namespace": statement.COSIGN_NAMESPACE,
            "signed_by": row.signed_by.get_username() if row.signed_by else None,
            "signed_at": row.signed_at.isoformat(),
            "signature": row.ssh_signature,
        }
        for row in rows
    ]


def evidence_cosign(
    *, actor: Actor, viewer: Viewer, decision: Decision, ssh_signature: str
) -> EvidenceSignature:
    """Add a party's SSHSIG over the seal's PAE bytes, made with a key they registered."""
    party = viewer.signing_party
    if party is None or viewer.user is None:
        raise NotAllowedError("only a customer owner or a vendor admin co-signs evidence")
    seal = decision_seal(decision)
    key = _signers_key(viewer, seal_pae(seal), ssh_signature)
    with transaction.atomic():
        if seal.cosignatures.filter(key=key).exists():
            raise ServiceError(
                "this key has co-signed this evidence already", field="ssh_signature"
            )
        row = EvidenceSignature.objects.create(
            seal=seal,
            party=party,
            organization=key.organization,
            key=key,
            ssh_signature=ssh_signature.strip(),
            signed_by=viewer.user,
        )
        audit_record(
            actor=actor,
            action="evidence.cosign",
            target=decision.gate,
            organization_id=decision.gate.engagement.organization_id,
            detail={"decision": decision.pk, "party": party, "fingerprint": key.fingerprint},
        )
    return row


def _signers_key(viewer: Viewer, signed: bytes, armored: str) -> PartyKey:
    try:
        blob = sshsig.verify(armored, signed, namespace=statement.COSIGN_NAMESPACE)
    except sshsig.SshSigError as error:
        raise ServiceError(str(error), field="ssh_signature") from error
    key = PartyKey.objects.filter(
        fingerprint=sshsig.fingerprint(blob), user=viewer.user, revoked_at__isnull=True
    ).first()
    if key is None:
        raise ServiceError(
            "the signature verifies, but with a key you have not registered "
            "(POST /api/v1/keys/signing/)",
            field="ssh_signature",
        )
    return key


def _predicate(decision: Decision) -> dict:
    gate = decision.gate
    return {
        "gate": {"id": gate.pk, "kind": gate.kind, "engagement": gate.engagement.title},
        "decision": {
            "id": decision.pk,
            "kind": decision.kind,
            "verdict": decision.verdict,
            "rehearsal": decision.rehearsal,
            "decided_at": decision.created_at.isoformat(),
            "clauses": [_clause_brief(c) for c in decision.clauses or []],
        },
        "spec": {"version": decision.spec.version, "digest": decision.spec.digest},
        "runs": list(decision.runs.order_by("attempt").values_list("attempt", flat=True)),
    }


def _clause_brief(clause: dict) -> dict:
    keys_shown = ("clause", "check", "metric", "tier", "verdict")
    return {k: clause[k] for k in keys_shown if isinstance(clause, dict) and k in clause}


def _decision_record(decision: Decision) -> dict:
    return {
        "id": decision.pk,
        "gate": {"id": decision.gate_id, "kind": decision.gate.kind},
        "kind": decision.kind,
        "verdict": decision.verdict,
        "rehearsal": decision.rehearsal,
        "clauses": decision.clauses,
        "result": decision.result,
        "decided_at": decision.created_at.isoformat(),
        "decided_by": decision.decided_by.get_username() if decision.decided_by else None,
        "decided_by_system": decision.decided_by_system,
        "justification": decision.justification,
        "spec_version": decision.spec.version,
        "runs": list(decision.runs.order_by("attempt").values_list("attempt", flat=True)),
    }


def _spec_signatures(decision: Decision) -> list[dict]:
    # Only signatures given before the decision: a later one would change a sealed member.
    rows = decision.spec.signatures.filter(signed_at__lte=decision.created_at)
    return [
        signature_record(row) for row in rows.select_related("signed_by", "key").order_by("party")
    ]


TOOL_KEYS = ("driver_version", "cuda_version", "rocm_version", "vllm_version")


def _host_tools(decision: Decision) -> dict:
    """The tools each run's probes saw on the host (its own G1 probes, or its contract check)."""
    tools = {}
    for run in decision.runs.order_by("attempt"):
        facts = run_g1_facts(run)
        probed = {k: v for k, v in inventory_of(facts).items() if v is not None}
        for detail in run.steps.values_list("detail", flat=True):
            contract = (detail.get("progress") or {}).get("contract") or {}
            probed.update({k: v for k, v in contract.items() if v is not None})
        seen = {key: probed.get(key) for key in TOOL_KEYS}
        tools[f"attempt-{run.attempt}"] = {**seen, "kernel": facts.get("kernel")}
    return tools


def _run_record(run: Run, *, profile: bool) -> dict:
    record = {
        "attempt": run.attempt,
        "source": run.source,
        "outcome": run.outcome,
        "rehearsal": run.rehearsal,
        "spec_version": run.spec.version,
        "host": run.host.name if run.host else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    if profile:  # as the run used it; null for a run without a host or made before snapshots
        record["profile"] = {
            "name": run.profile_name,
            "digest": run.profile_digest or None,
            "snapshot": run.profile_snapshot,
        }
    return record


def _soak_windows(run: Run) -> list[dict]:
    """The soak's stored windows, with the times the decision read (unix seconds)."""
    rows = run.soak_samples.order_by("seq").values_list(
        "seq", "window_start", "window_end", "metrics"
    )
    return [
        {"seq": seq, "start": start.timestamp(), "end": end.timestamp(), "metrics": metrics}
        for seq, start, end, metrics in rows
    ]
