"""The library's redaction, pure: secrets replaced in any case and in JSON-escaped form, host
details withheld, party keys and signers' names dropped, every change recorded, and the scan
that finds what is left."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gates.evidence import layout
from gates.evidence.redaction import RedactionTerms, leaks, redact_members

NAME = st.text(alphabet=st.characters(categories=("L",)), min_size=4, max_size=24)


def members(customer: str, host: str) -> dict[str, bytes]:
    return {
        layout.INVENTORY: layout.canonical_json(
            {"gpu_count": 8, "gpu_models": ["H200"], "driver_version": "550.1", "kernel": None}
        ),
        layout.SPEC_SIGNATURES: layout.canonical_json(
            [
                {
                    "party": "customer",
                    "signed_by": f"{customer}-owner",
                    "key_fingerprint": "SHA256:abc",
                    "ssh_signature": "-----BEGIN SSH SIGNATURE-----",
                }
            ]
        ),
        "runs/attempt-1/files/probes/hostname.txt": f"{host}.{customer}.internal\n".encode(),
        "runs/attempt-1/run.json": layout.canonical_json({"host": host, "note": customer.upper()}),
        "runs/attempt-1/files/result.json": b'{"ttft": 1.5}',
    }


def terms(customer: str, host: str, shown=("gpu_count",)) -> RedactionTerms:
    secrets = ((customer, "[customer]"), (host, "[host]"), (f"{customer}-owner", "[person]"))
    return RedactionTerms(secrets=secrets, shown_host_details=frozenset(shown))


@settings(max_examples=60, deadline=None)
@given(customer=NAME, host=NAME)
def test_no_generated_name_survives_redaction(customer, host):
    redacted, record = redact_members(members(customer, host), terms(customer, host))
    assert leaks(redacted, terms(customer, host)) == []
    assert redacted["runs/attempt-1/files/result.json"] == b'{"ttft": 1.5}'
    changed = {row["name"] for row in record}
    assert "runs/attempt-1/files/result.json" not in changed
    for row in record:
        assert row["sha256"] == layout.sha256_hex(redacted[row["name"]])
    for name in changed & {layout.INVENTORY, layout.SPEC_SIGNATURES, "runs/attempt-1/run.json"}:
        json.loads(redacted[name])  # still JSON


def test_host_details_not_chosen_are_withheld_and_keys_dropped():
    redacted, _ = redact_members(members("northwind", "gpu-1"), terms("northwind", "gpu-1"))
    inventory = json.loads(redacted[layout.INVENTORY])
    assert inventory == {
        "gpu_count": 8,
        "gpu_models": "[withheld]",
        "driver_version": "[withheld]",
        "kernel": None,
    }
    (signature,) = json.loads(redacted[layout.SPEC_SIGNATURES])
    assert signature["signed_by"] == "[customer]" and signature["ssh_signature"] == ""
    assert signature["key_fingerprint"] == "[withheld]"


def test_a_json_escaped_or_differently_cased_secret_is_found():
    scan = terms('O"Brien Ünïon', "gpu-1")
    assert leaks({"a": json.dumps({"x": 'o"brien ünïon'})}, scan) == ["a: 'O\"Brien Ünïon'"]
    assert leaks({"b": json.dumps('O"Brien Ünïon', ensure_ascii=True)}, scan)


def test_secrets_too_short_to_tell_from_numbers_are_not_replaced():
    redacted, record = redact_members({"x.txt": b"ab 12"}, terms("ab", "12"))
    assert redacted == {"x.txt": b"ab 12"} and record == []


def test_a_secret_inside_json_syntax_leaves_the_documents_valid():
    # "ull" and "rue" are in the literals null and true: only strings are redacted.
    document = layout.canonical_json({"kernel": None, "ok": True, "note": "ULL and rue"})
    redacted, _ = redact_members({"run.json": document}, terms("rue", "ull"))
    assert json.loads(redacted["run.json"]) == {
        "kernel": None,
        "ok": True,
        "note": "[host] and [customer]",
    }


def test_generic_words_name_no_one_and_are_left_alone():
    rows = layout.canonical_json([{"party": "customer", "note": "customer"}])
    redacted, _ = redact_members({"x.json": rows}, terms("customer", "localhost"))
    assert json.loads(redacted["x.json"]) == [{"party": "customer", "note": "customer"}]
