"""The offline verifier: every member's hash against the signed statement, the server's DSSE
signature, every party's co-signature, spec signature and inventory amendment signature, then
the decision recomputed from the raw files (for a G3 attempt that carries repetitions, from its
own and the carried ones' raw files, on the union as the engine decided). Used by
`manage.py verify_evidence` and bin/tollgate-verify.

Pure: bytes and keys in, a list of problems out; no database, no network, no Django.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gates import sshsig
from gates.decisions.gathering import GATHER
from gates.evidence import layout
from gates.evidence.agreements import (
    check_contract_decision,
    check_inventory_amendments,
    check_spec_signatures,
)
from gates.evidence.layout import BundleFormatError, load_json_member
from gates.evidence.recompute import (
    RunRecords,
    carried_profile_problems,
    carried_set_problems,
    recompute_decision,
)
from gates.evidence.redaction import check_redaction
from gates.evidence.retention import (
    RETENTION,
    Dropped,
    check_retention,
    dropped_note,
    policy_problems,
)
from gates.evidence.soak_recompute import recompute_soak
from gates.evidence.statement import (
    COSIGN_NAMESPACE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    EnvelopeError,
    envelope_payload,
    key_fingerprint,
    load_public_key,
    verify_envelope,
)
from gates.specs.validation import spec_digest
from runners.contract import CONTRACT_CHECK_ENGINE


@dataclass
class Verification:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_bundle(
    data: bytes,
    *,
    public_key: Ed25519PublicKey | None = None,
    party_keys: tuple[Ed25519PublicKey, ...] = (),
) -> Verification:
    """Everything that must hold for the bundle to prove its decision; see docs/evidence.md."""
    report = Verification()
    try:
        members = layout.read_zip(data)
        payload, signed = envelope_payload(load_json_member(members, layout.ENVELOPE))
        key = _server_key(members, public_key, report)
        dropped = check_retention(members, key, report)
        predicate = _statement(json.loads(payload), members, dropped, report)
        _check_server_signature(members, key, report)
        if members.get(layout.TO_COSIGN, signed) != signed:
            report.problems.append(f"member {layout.TO_COSIGN}: not the envelope's PAE bytes")
        _check_cosignatures(members, signed, party_keys, report)
        _check_spec(members, predicate, report)
        if predicate.get("decision") is None:
            report.notes.append("a run's records before any decision: nothing to recompute")
        else:
            decided_at = predicate["decision"].get("decided_at")
            check_inventory_amendments(members, decided_at, report)
            _check_decision(members, predicate, dropped, report)
    except (BundleFormatError, EnvelopeError, ValueError) as error:
        report.problems.append(str(error))
    except (TypeError, KeyError, AttributeError) as error:
        # A member of the wrong shape (an edited bundle): a failure to report, not a crash.
        report.problems.append(f"bundle: a member has an unexpected shape ({error!r})")
    return report


def _statement(
    document: object, members: dict[str, bytes], dropped: Dropped, report: Verification
) -> dict:
    """The statement's predicate, after checking its subjects are exactly the signed members."""
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"statement: _type must be {STATEMENT_TYPE}")
    if document.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeError(f"statement: predicateType must be {PREDICATE_TYPE}")
    # Names and digests as the statement holds them (JSON of any type): compared, not trusted.
    subjects: dict[Any, Any] = {
        s.get("name"): (s.get("digest") or {}).get("sha256")
        for s in document.get("subject") or []
        if isinstance(s, dict)
    }
    for name in sorted(set(members) - set(layout.UNSIGNED)):
        if name not in subjects:
            report.problems.append(f"member {name}: not in the signed statement (added)")
        elif layout.sha256_hex(members[name]) != subjects[name]:
            report.problems.append(f"member {name}: SHA-256 differs from the signed statement")
    for listed in sorted(set(subjects) - set(members)):
        if dropped.covers(listed):  # a raw file retention dropped after the seal (signed)
            continue
        report.problems.append(f"member {listed}: missing (the signed statement lists it)")
    report.notes.append(f"{len(subjects)} members listed in the signed statement")
    predicate = document.get("predicate") or {}
    check_redaction(predicate, subjects, report)
    return predicate


def _server_key(
    members: dict[str, bytes], pinned: Ed25519PublicKey | None, report: Verification
) -> Ed25519PublicKey:
    if pinned is not None:
        return pinned
    key = load_public_key(members.get(layout.SERVER_KEY, b""))
    report.notes.append(
        f"server key {key_fingerprint(key)} taken from the bundle: pin it with --public-key "
        "(GET /api/v1/keys/) to know it is Tollgate's"
    )
    return key


def _check_server_signature(
    members: dict[str, bytes], key: Ed25519PublicKey, report: Verification
) -> None:
    try:
        keyid = verify_envelope(load_json_member(members, layout.ENVELOPE), key)
    except EnvelopeError as error:
        report.problems.append(str(error))
        return
    report.notes.append(f"server signature by {keyid}: verifies")


def _check_cosignatures(
    members: dict[str, bytes],
    signed: bytes,
    pinned: tuple[Ed25519PublicKey, ...],
    report: Verification,
) -> None:
    rows = load_json_member(members, layout.COSIGNATURES) if layout.COSIGNATURES in members else []
    verified = set()
    for row in rows if isinstance(rows, list) else []:
        who = f"co-signature of the {row.get('party')} ({row.get('organization')}, "
        who += f"{row.get('keyid')})"
        try:
            blob = sshsig.verify(row.get("signature", ""), signed, namespace=COSIGN_NAMESPACE)
        except sshsig.SshSigError as error:
            report.problems.append(f"{who}: {error}")
            continue
        if sshsig.fingerprint(blob) != row.get("keyid"):
            report.problems.append(
                f"{who}: made with key {sshsig.fingerprint(blob)}, not its keyid"
            )
            continue
        verified.add(row["keyid"])
        report.notes.append(f"{who}: verifies")
    for key in pinned:
        if key_fingerprint(key) not in verified:
            report.problems.append(f"co-signature by key {key_fingerprint(key)}: none verifies")


def _check_spec(members: dict[str, bytes], predicate: dict, report: Verification) -> None:
    spec = load_json_member(members, layout.SPEC)
    digest = spec_digest(spec) if isinstance(spec, dict) else None
    if digest != (predicate.get("spec") or {}).get("digest"):
        report.problems.append(f"member {layout.SPEC}: its digest is not the signed spec digest")
    rows = (
        load_json_member(members, layout.SPEC_SIGNATURES)
        if layout.SPEC_SIGNATURES in members or predicate.get("decision") is not None
        else []
    )
    check_spec_signatures(rows, digest, report)


def _check_decision(
    members: dict[str, bytes],
    predicate: dict,
    dropped: Dropped,
    report: Verification,
) -> None:
    decision = load_json_member(members, layout.DECISION)
    signed = predicate.get("decision") or {}
    if decision.get("verdict") != signed.get("verdict"):
        report.problems.append(
            f"member {layout.DECISION} verdict: {decision.get('verdict')!r}, the signed "
            f"statement says {signed.get('verdict')!r}"
        )
    if decision.get("kind") != "engine":
        report.notes.append(f"a {decision.get('kind')} decision, made by a person: not recomputed")
        return
    if (decision.get("result") or {}).get("engine") == CONTRACT_CHECK_ENGINE:
        runs = [run_records(members, attempt) for attempt in decision.get("runs") or []]
        check_contract_decision(members, decision, runs, report)
        return
    spec = load_json_member(members, layout.SPEC)
    if isinstance(spec, dict) and spec.get("gate") == "G4":
        _check_soak(members, spec, decision, dropped, report)
        return
    if not isinstance(spec, dict) or spec.get("gate") not in GATHER:
        report.problems.append(f"member {layout.SPEC}: not a spec of a gate kind (G1-G4)")
        return
    context = load_json_member(members, layout.CONTEXT)
    carries = (context.get("carried_repetitions") if isinstance(context, dict) else None) or 0
    for attempt in decision.get("runs") or []:
        own, carried = run_records(members, attempt), carried_records(members, attempt)
        if carries and not carried:
            # Sealed before bundles held the carried repetitions: they are in the earlier
            # attempt's bundle, and this one's signed members stay as they were.
            report.notes.append(
                f"run attempt {attempt}: carries {carries} repetitions from an earlier attempt "
                "whose raw files this bundle does not hold: NOT recomputed; hashes and "
                "signatures checked"
            )
            continue
        problems = carried_problems(carries, carried, own)
        if carried:
            problems += _carried_proof(members, attempt, spec, carried, report)
        problems += recompute_decision(spec, decision, context, own, carried)
        report.problems += problems
        if not problems:
            also = f" and the {carries} repetitions it carries" if carries else ""
            report.notes.append(
                f"run attempt {attempt}: recomputed from its raw files{also} to "
                f"{decision['verdict']}, every number as recorded"
            )


def _check_soak(
    members: dict[str, bytes],
    spec: dict,
    decision: dict,
    dropped: Dropped,
    report: Verification,
) -> None:
    for attempt in decision.get("runs") or []:
        prefix = layout.run_prefix(attempt)
        name = prefix + layout.SOAK_WINDOWS
        if name not in members:
            # Sealed before bundles carried a soak's windows: its signed members stay as they were.
            report.notes.append(
                f"run attempt {attempt}: a soak sealed without {layout.SOAK_WINDOWS}: NOT "
                "recomputed; its windows' raw files, hashes and signatures checked"
            )
            continue
        files = run_records(members, attempt).files
        windows = load_json_member(members, name)
        taken = dropped.seqs.get(attempt, set())
        problems = recompute_soak(spec, decision, windows, files, name, taken)
        if taken:
            policy = dropped.policy.get(attempt) or {}
            problems += policy_problems(windows, decision, taken, policy, RETENTION)
        report.problems += problems
        note = dropped_note(attempt, dropped)
        if note is not None:
            report.notes.append(note)
        if not problems:
            derived = len(windows) - len(taken & {row["seq"] for row in windows})
            report.notes.append(
                f"run attempt {attempt}: {derived} soak window(s) re-derived from their "
                f"lines and raw files, recomputed to {decision['verdict']}, every number as "
                "recorded"
            )


def _carried_proof(
    members: dict[str, bytes],
    attempt: int,
    spec: dict,
    carried: list[RunRecords],
    report: Verification,
) -> list[str]:
    """The carried set recomputed from the source attempt's record list, and every carried
    attempt on the carrying run's profile; a seal from before bundles held them is named."""
    prefix = layout.run_prefix(attempt)
    run = load_json_member(members, prefix + "run.json")
    if "profile" not in run:
        report.notes.append(
            f"run attempt {attempt}: sealed before bundles held the carried attempt's records "
            "and the runs' profiles: the carried set is NOT proven complete"
        )
        return []
    source = load_json_member(members, prefix + layout.CARRIED_SOURCE)
    problems = carried_set_problems(spec, source, carried)
    records = [
        (group.prefix, load_json_member(members, group.prefix + "run.json")) for group in carried
    ]
    problems += carried_profile_problems(run, records)
    if not problems:
        profile, digest = run["profile"], run["profile"].get("digest")
        on = f"profile {profile.get('name')} ({digest[:12]})" if digest else "no profile (no host)"
        report.notes.append(
            f"run attempt {attempt}: carries exactly attempt {source['attempt']}'s complete "
            f"repetitions, each record as it recorded, all on {on}"
        )
    return problems


def run_records(members: dict[str, bytes], attempt: int) -> RunRecords:
    prefix = layout.run_prefix(attempt)
    files = prefix + "files/"
    return RunRecords(
        prefix=prefix,
        steps=load_json_member(members, prefix + "steps.json"),
        measurements=load_json_member(members, prefix + "measurements.json"),
        files={n.removeprefix(files): data for n, data in members.items() if n.startswith(files)},
    )


def carried_records(members: dict[str, bytes], attempt: int) -> list[RunRecords]:
    """The repetitions a run carries, per earlier attempt of its chain (oldest first), as
    records of their own: measurements and raw files under the carried prefix."""
    under = layout.run_prefix(attempt) + layout.CARRIED
    sources = {n.removeprefix(under).split("/", 1)[0] for n in members if n.startswith(under)}
    numbers = sorted(int(source.removeprefix("attempt-")) for source in sources)
    found = []
    for number in numbers:
        prefix = layout.carried_prefix(attempt, number)
        files = prefix + "files/"
        found.append(
            RunRecords(
                prefix=prefix,
                steps=[],
                measurements=load_json_member(members, prefix + "measurements.json"),
                files={n.removeprefix(files): d for n, d in members.items() if n.startswith(files)},
                attempt=number,
            )
        )
    return found


def carried_problems(carries: int, carried: list[RunRecords], own: RunRecords) -> list[str]:
    """The carried repetitions must be as many as the decision's context says the engine was
    told, and numbered apart from the run's own (one numbering covers the union)."""
    numbers = {row["repetition"] for records in carried for row in records.measurements}
    problems = []
    if len(numbers) != carries:
        problems.append(
            f"{layout.CONTEXT} carried_repetitions: {carries}, the bundle carries "
            f"{len(numbers)} repetition(s) under {own.prefix}{layout.CARRIED}"
        )
    shared = sorted(numbers & {row["repetition"] for row in own.measurements})
    if shared:
        problems.append(
            f"{own.prefix}measurements.json: repetition(s) {shared} are also carried ones"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    """The command line: exit 0 only when every check holds; each failure is one line."""
    parser = argparse.ArgumentParser(description="Verify a Tollgate evidence bundle offline.")
    parser.add_argument("bundle", help="the evidence zip")
    parser.add_argument("--public-key", help="the server's Ed25519 public key (PEM or OpenSSH)")
    parser.add_argument(
        "--party-key", action="append", default=[], help="a party's key that must have co-signed"
    )
    options = parser.parse_args(argv)
    try:
        data = open(options.bundle, "rb").read()  # noqa: SIM115 (one read)
        pinned = _read_key(options.public_key) if options.public_key else None
        parties = tuple(_read_key(path) for path in options.party_key)
    except (OSError, EnvelopeError) as error:
        print(f"FAIL {error}", file=sys.stderr)
        return 2
    report = verify_bundle(data, public_key=pinned, party_keys=parties)
    for note in report.notes:
        print(f"ok   {note}")
    for problem in report.problems:
        print(f"FAIL {problem}")
    print("VERIFIED" if report.ok else f"NOT VERIFIED: {len(report.problems)} problem(s)")
    return 0 if report.ok else 1


def _read_key(path: str) -> Ed25519PublicKey:
    with open(path, "rb") as handle:
        return load_public_key(handle.read())
