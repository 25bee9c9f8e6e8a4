"""The library's redaction of an evidence bundle: what identifies the customer (names, host
names, addresses, party keys) replaced by placeholders, host details withheld as agreed, and a
record of every member changed (its original and redacted SHA-256) that the server signs with
the redacted statement. Also the scan that refuses a redaction that would leak, and the
verifier's check of a redaction record.

Pure: members (bytes) and terms in, members and a record out; no Django, no I/O.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gates.evidence import layout

WITHHELD = "[withheld]"
# Shorter strings cannot be told from numbers and words in the raw tool outputs.
MIN_SECRET_LENGTH = 3
# Inventory fields a customer may choose to show ("host details"); the rest are withheld.
HOST_DETAILS = (
    "gpu_models",
    "gpu_count",
    "driver_version",
    "cuda_version",
    "rocm_version",
    "vllm_version",
    "host_memory_bytes",
    "offload_tier_present",
    "offload_tier_capacity_gib",
    "kernel",
)
KEY_FIELDS = ("key_fingerprint", "public_key", "keyid")
# Words of Tollgate's own formats and everyday account names: as a user or host name they name
# no one, and replacing them would rewrite the bundle's vocabulary ("party": "customer").
GENERIC_WORDS = frozenset(
    {"customer", "vendor", "viewer", "owner", "admin", "engineer", "party", "user", "demo"}
    | {"test", "root", "ubuntu", "bench", "localhost", "local", "host", "gpu", "null", "none"}
    | {"true", "false", "127.0.0.1", "::1"}
)


@dataclass(frozen=True)
class RedactionTerms:
    """What to hide: each secret string with its placeholder, and the host details shown."""

    secrets: tuple[tuple[str, str], ...]
    shown_host_details: frozenset[str] = field(default_factory=frozenset)

    def usable_secrets(self) -> list[tuple[str, str]]:
        usable = [
            (s.strip(), p)
            for s, p in self.secrets
            if len(s.strip()) >= MIN_SECRET_LENGTH and s.strip().casefold() not in GENERIC_WORDS
        ]
        # Longest first, so "gpu-1.northwind" goes before "northwind" inside it.
        return sorted(set(usable), key=lambda pair: (-len(pair[0]), pair[0]))


class RedactionLeakError(ValueError):
    """A secret is still in the redacted bundle or page; names where."""


def redact_members(
    members: dict[str, bytes], terms: RedactionTerms
) -> tuple[dict[str, bytes], list[dict]]:
    """The redacted members and, for each member changed, what happened to it."""
    redacted: dict[str, bytes] = {}
    record: list[dict] = []
    for name in sorted(members):
        original = members[name]
        data, why = _structured(name, original, terms)
        data, replaced = replace_secrets(data, terms)
        if replaced:
            why.append("identifying names, host names, addresses replaced")
        redacted[name] = data
        if data != original:
            record.append(
                {
                    "name": name,
                    "original_sha256": layout.sha256_hex(original),
                    "sha256": layout.sha256_hex(data),
                    "why": why,
                }
            )
    return redacted, record


def replace_secrets(data: bytes, terms: RedactionTerms) -> tuple[bytes, bool]:
    """Every occurrence of a secret (any case) replaced: inside a JSON document's strings (keys
    and values, never its syntax: a host called "null" must not break a file), elsewhere in the
    text, also JSON-escaped. Binary data that is not UTF-8 is left for the leak scan to judge."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data, False
    document = _json_document(text)
    if document is not None:
        redacted = _walk_strings(document, lambda value: _replace_text(value, terms))
        return (layout.canonical_json(redacted), True) if redacted != document else (data, False)
    changed = _replace_text(text, terms)
    return changed.encode(), changed != text


def leaks(texts: dict[str, str | bytes], terms: RedactionTerms) -> list[str]:
    """`where: secret` for each secret still found (any case; in a JSON document, in its
    strings; elsewhere anywhere in the text, also JSON-escaped)."""
    found = []
    # The placeholders are ours and public: "[customer]" must not count as a leak of "Custo".
    placeholders = {placeholder.casefold() for _, placeholder in terms.usable_secrets()}
    for where, content in texts.items():
        folded = _scanned_text(content).casefold()
        for placeholder in placeholders:
            folded = folded.replace(placeholder, " ")
        for secret, _ in terms.usable_secrets():
            if any(form.casefold() in folded for form in _forms(secret)):
                found.append(f"{where}: {secret!r}")
    return found


def _scanned_text(content: str | bytes) -> str:
    text = content.decode(errors="replace") if isinstance(content, bytes) else content
    document = _json_document(text)
    if document is None:
        return text
    strings: list[str] = []

    def keep(value: str) -> str:
        strings.append(value)
        return value

    _walk_strings(document, keep)
    return "\n".join(strings)


def _json_document(text: str) -> dict | list | None:
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, (dict, list)) else None


def _walk_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of a JSON value with `change` applied to every string, keys included."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_walk_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {change(k): _walk_strings(v, change) for k, v in value.items()}
    return value


def _replace_text(text: str, terms: RedactionTerms) -> str:
    for secret, placeholder in terms.usable_secrets():
        for form in _forms(secret):
            text = re.sub(re.escape(form), placeholder, text, flags=re.IGNORECASE)
    return text


def bundle_texts(members: dict[str, bytes]) -> dict[str, str | bytes]:
    """Every member, and the envelope's payload decoded, for the leak scan."""
    texts: dict[str, str | bytes] = dict(members)
    if layout.ENVELOPE in members:
        payload = json.loads(members[layout.ENVELOPE]).get("payload", "")
        texts["envelope payload"] = base64.b64decode(payload)
    return texts


def check_redaction(predicate: dict, subjects: dict, report) -> None:
    """The verifier's side: a redacted bundle's record names each changed member with the
    SHA-256 it now has, and that must be the signed statement's."""
    redaction = predicate.get("redaction")
    if not isinstance(redaction, dict):
        return
    changed = redaction.get("members") or []
    for row in changed:
        if subjects.get(row.get("name")) != row.get("sha256"):
            report.problems.append(
                f"redaction record: member {row.get('name')}'s SHA-256 is not the signed one"
            )
    report.notes.append(
        f"a redacted copy (signed by the server) of the evidence whose envelope digest is "
        f"{redaction.get('of_envelope')}: {len(changed)} member(s) redacted "
        f"({', '.join(str(r.get('name')) for r in changed)}); every other member is as sealed"
    )


def _forms(secret: str) -> set[str]:
    """The secret as it may be written: in other cases (some letters change length when their
    case does, so a case-blind match alone misses them) and JSON-escaped (\\u00fc for ü)."""
    cases = {secret, secret.upper(), secret.lower(), secret.casefold(), secret.title()}
    return {form for case in cases for form in (case, json.dumps(case)[1:-1])}


def _structured(name: str, data: bytes, terms: RedactionTerms) -> tuple[bytes, list[str]]:
    """Field-level redaction of the members whose shape is known."""
    edit = _STRUCTURED.get(name)
    if edit is None:
        return data, []
    document = json.loads(data)
    why = edit(document, terms)
    return (layout.canonical_json(document), why) if why else (data, [])


def _inventory(document: object, terms: RedactionTerms) -> list[str]:
    if not isinstance(document, dict):
        return []
    hidden = [k for k in document if k not in terms.shown_host_details and document[k] is not None]
    for key in hidden:
        document[key] = WITHHELD
    return [f"host details withheld: {', '.join(sorted(hidden))}"] if hidden else []


def _versions(document: object, terms: RedactionTerms) -> list[str]:
    tools = document.get("host_tools") if isinstance(document, dict) else None
    why: list[str] = []
    for seen in (tools or {}).values():
        why += _inventory(seen, terms)
    return sorted(set(why))


def _signatures(rows: object, terms: RedactionTerms) -> list[str]:
    """Who signed is said by party; a party's key and SSH signature would name them."""
    why = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        if row.get("signed_by"):
            row["signed_by"] = f"[{row.get('party')}]"
            why.append("signers named by party")
        for key in KEY_FIELDS:
            if row.get(key):
                row[key] = WITHHELD
                why.append("party keys withheld")
        if row.get("ssh_signature"):
            row["ssh_signature"] = ""
            why.append("party SSH signatures withheld (they name the key)")
    return sorted(set(why))


def _amendments(document: object, terms: RedactionTerms) -> list[str]:
    why: list[str] = []
    for amendment in (document or {}).get("amendments") or [] if isinstance(document, dict) else []:
        why += _signatures(amendment.get("signatures"), terms)
    return sorted(set(why))


def _decision(document: object, terms: RedactionTerms) -> list[str]:
    if isinstance(document, dict) and document.get("decided_by"):
        document["decided_by"] = "[person]"
        return ["decided by a person, not named"]
    return []


_STRUCTURED = {
    layout.INVENTORY: _inventory,
    layout.VERSIONS: _versions,
    layout.SPEC_SIGNATURES: _signatures,
    layout.INVENTORY_AMENDMENTS: _amendments,
    layout.DECISION: _decision,
}
