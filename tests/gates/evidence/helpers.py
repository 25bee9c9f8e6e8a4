"""Decided gates to build evidence from (an uploaded G1 and G3, through the real API and
adapters), and a way to edit a bundle as a dishonest server would: change a record and sign the
statement again with the server's own key."""

from __future__ import annotations

import json

from django.urls import reverse

from gates import services
from gates.evidence import keys, layout, statement
from gates.models import Decision, EvidenceKey, Run
from tests.gates.services.test_attempts import carrying_gate
from tests.gates.services.test_uploads import (
    bench_file,
    g1_upload,
    g3_upload_gate,
    scrapes,
    send,
    upload_cell,
    upload_run,
)


def g1_upload_decision(api, actor, engagement) -> Decision:
    gate, run, uploads = g1_upload(api, actor, engagement)
    for probe, upload in uploads.items():
        assert send(api, run["id"], kind="probe", probe=probe, file=upload).status_code == 201
    assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200
    return gate.decisions.get()


def g3_upload_decision(
    api, actor, viewer, engagement, host, passed=("G1", "G2"), acknowledged_underpowered=False
) -> Decision:
    gate = g3_upload_gate(actor, viewer, engagement, host, passed, acknowledged_underpowered)
    run = upload_run(api, gate)
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            assert upload_cell(api, run["id"], arm, repetition).status_code == 201
    assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200
    return gate.decisions.get()


def g3_carrying_decision(api, actor, viewer, engagement, host, on_host=False) -> Decision:
    """The upload G3 carrying repetitions: an attempt at the bar (inconclusive), then one that
    carries its four repetitions and passes on the union of eight; the second's decision.
    `on_host`: both uploads name the host, so each run keeps its profile snapshot."""
    gate = carrying_gate(actor, viewer, engagement, host)
    for ratios in ({1: 0.74, 2: 0.76, 3: 0.73, 4: 0.77}, {5: 0.40, 6: 0.41, 7: 0.39, 8: 0.40}):
        if on_host:
            made = services.run_create(
                actor=actor, viewer=viewer, gate=gate, host=host, source=Run.Source.UPLOAD
            )
            run = {"id": made.pk}
        else:
            run = upload_run(api, gate)
        for repetition, ratio in ratios.items():
            base = 1000.0 * (1 + 0.01 * repetition)
            for arm, ttft in (("baseline", base), ("offload", base * ratio)):
                cell = bench_file(ttft_ms=ttft, throughput=100.0, tier=8)
                where = {"arm": arm, "tier": 8, "repetition": repetition}
                sent = send(api, run["id"], kind="bench", file=cell, **where, **scrapes(arm))
                assert sent.status_code == 201, sent.json()
        assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200
    return gate.decisions.get(runs__attempt=2)


def resealed(data: bytes, change) -> bytes:
    """The bundle with `change(members)` applied and the statement signed again by the server's
    key: hashes and signature hold, so only recomputation can catch the edit."""
    members = layout.read_zip(data)
    change(members)
    signed = {n: d for n, d in members.items() if n not in layout.UNSIGNED}
    sealed = json.loads(members[layout.ENVELOPE])
    old = json.loads(statement.envelope_payload(sealed)[0])
    subjects = {name: layout.sha256_hex(content) for name, content in signed.items()}
    payload = statement.payload_bytes(statement.statement(subjects, old["predicate"]))
    key = EvidenceKey.objects.get(fingerprint=sealed["signatures"][0]["keyid"])  # its sealer
    envelope = statement.envelope(payload, [(key.fingerprint, keys.key_sign(key, payload))])
    members[layout.ENVELOPE] = statement.envelope_bytes(envelope)
    members[layout.TO_COSIGN] = statement.pae(statement.PAYLOAD_TYPE, payload)
    return layout.write_zip(members)


def edited_json(members: dict, name: str, edit) -> None:
    document = json.loads(members[name])
    edit(document)
    members[name] = layout.canonical_json(document)
