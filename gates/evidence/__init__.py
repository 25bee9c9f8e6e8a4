"""Signed, offline-verifiable evidence of a decision: a deterministic zip of every record the
decision rests on, an in-toto statement over it in a DSSE envelope, and the verifier.

Pure modules (no Django, for the offline verifier): layout, statement, recompute, agreements,
verify. The Django side (store: keys, seals, co-signatures, the bundle from the database;
inventory: the inventory members as of the decision) is imported
only when one of the two functions below is called, so `import gates.evidence.verify` works on
a machine without Django settings.
"""

from __future__ import annotations


def bundle_for_decision(decision) -> tuple[bytes, str]:
    """The decision's evidence zip and its SHA-256 hex (sealing the decision on first use)."""
    from gates.evidence import store  # the Django side; see the module docstring

    return store.bundle_for_decision(decision)


def envelope_digest(decision) -> str:
    """SHA-256 hex of the decision's DSSE envelope bytes: what a printed report carries."""
    from gates.evidence import store  # the Django side; see the module docstring

    return store.envelope_digest(decision)
