"""A G4 soak's evidence, end to end: a compressed soak against simhost (real sshd, the real agent,
the real collector ticks), its bundle, and the offline verifier re-deriving every window's metrics
from the window's line and raw files, deciding again and comparing every number."""

from __future__ import annotations

import json

import pytest

from gates.evidence import bundle_for_decision, layout, statement
from gates.evidence.verify import verify_bundle
from gates.models import EvidenceKey
from runners.soak import collector
from tests.gates.evidence.helpers import edited_json, resealed
from tests.gates.evidence.test_verifier_cli import isolated
from tests.runners.conftest import own_sshd  # noqa: F401 (fixture)
from tests.runners.soak.test_soak import (  # noqa: F401 (tasks_run_here: an autouse fixture)
    LOOSE_DRIFT,
    assert_every_seq_once,
    begin,
    g4_spec,
    soak_host,
    tasks_run_here,
    tick_until_ended,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
PREFIX = "runs/attempt-1/"
WINDOWS = PREFIX + layout.SOAK_WINDOWS


def verification(data: bytes):
    key = statement.load_public_key(EvidenceKey.objects.get().public_pem)
    return verify_bundle(data, public_key=key)


def doubled_throughput(members: dict, seq: int) -> None:
    """A dishonest edit of one window's raw bench result (the server then signs again)."""
    name = f"{PREFIX}files/{collector.window_folder(seq)}bench.json"
    edited_json(
        members, name, lambda doc: doc.update(output_throughput=2 * doc["output_throughput"])
    )


def test_a_soak_bundle_recomputes_from_its_windows_and_names_a_tampered_number(
    actor,
    vendor_viewer,
    engagement,
    customer_org,
    own_sshd,  # noqa: F811
    tmp_path,
):
    host = soak_host(customer_org, own_sshd, tmp_path)
    run = begin(actor, vendor_viewer, engagement, host, g4_spec(seconds=12, **LOOSE_DRIFT))
    run = tick_until_ended(run)
    decision = run.decisions.get()
    seqs = assert_every_seq_once(run)
    data, _ = bundle_for_decision(decision)
    members = layout.read_zip(data)
    stored = layout.load_json_member(members, WINDOWS)
    assert [row["seq"] for row in stored] == seqs
    lines = [n for n in members if n.endswith(collector.LINE_FILE)]
    assert len(lines) == len(seqs), "every window's line is kept beside its raw files"

    report = verification(data)
    assert report.ok, report.problems
    expected = f"{len(seqs)} soak window(s) re-derived from their lines and raw files, "
    expected += f"recomputed to {decision.verdict}"
    assert any(expected in note for note in report.notes), report.notes

    # One window's bench result edited and the statement signed again with the server's key:
    # hashes and signature hold, the recomputed window and clause say what changed.
    middle = seqs[len(seqs) // 2]
    if stored[len(seqs) // 2]["metrics"]["output_throughput"] is None:
        pytest.fail(f"window {middle} has no bench result: {stored[len(seqs) // 2]}")
    tampered = verification(resealed(data, lambda m: doubled_throughput(m, middle)))
    assert not tampered.ok
    named = f"{WINDOWS}[{len(seqs) // 2}] (window {middle}).metrics.output_throughput: recorded"
    assert any(problem.startswith(named) for problem in tampered.problems), tampered.problems

    # A recorded number of the decision edited the same way is named too.
    def edit_error_rate(members):
        edited_json(
            members,
            layout.DECISION,
            lambda doc: doc["result"]["clauses"][1].update(completed=1e9),
        )

    edited = verification(resealed(data, edit_error_rate))
    field = "decision/decision.json result.clauses[1].completed: recorded 1000000000.0"
    assert any(problem.startswith(field) for problem in edited.problems), edited.problems

    # Windows collected before their lines were kept: the line's own fields from the stored
    # samples, everything the raw files give still re-derived (and still caught when edited).
    def without_lines(members):
        for name in [n for n in members if n.endswith(collector.LINE_FILE)]:
            del members[name]

    older = resealed(data, without_lines)
    assert verification(older).ok, verification(older).problems
    older_tampered = verification(resealed(older, lambda m: doubled_throughput(m, middle)))
    assert any(problem.startswith(named) for problem in older_tampered.problems)

    # The standalone verifier, in an isolated Python, recomputes the soak too.
    bundle, key = tmp_path / "g4.zip", tmp_path / "server.pub"
    bundle.write_bytes(data)
    key.write_text(EvidenceKey.objects.get().public_key)
    result = isolated(str(bundle), "--public-key", str(key))
    assert result.returncode == 0, result.stdout + result.stderr
    assert expected in result.stdout and result.stdout.strip().endswith("VERIFIED")
    assert json.loads(members[WINDOWS]) == stored
