"""Retention of a soak's raw files, the evidence's pure side: a soak recomputed with some windows
taken as recorded, and the verifier's check of the server's signed retention record. No
database (the rule itself: tests/runners/soak/test_soak_retention.py)."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gates.evidence import layout, statement
from gates.evidence.retention import check_retention, policy_problems, retention_statement
from gates.evidence.soak_recompute import recompute_soak
from gates.evidence.verify import Verification
from runners.soak import collector
from tests.gates.evidence.test_soak_recompute import WHERE, collected, line, spec

BENCH = Path(__file__).parents[2] / "fixtures" / "vllm-bench"
BENCH_FILE = BENCH / "er0080__bench_serve_v0.25.1__opt-125m_cpu.json"


def benched_soak():
    """Ten windows, each with its bench result, as the collector stored them."""
    lines = [line(seq, bench_exit=0, files=["bench.json"]) for seq in range(10)]
    raw = {seq: {"bench.json": BENCH_FILE.read_bytes()} for seq in range(10)}
    return collected(lines, {}, raw)


def pruned(files: dict, dropped: set[int]) -> dict:
    def gone(name: str) -> bool:
        folders = tuple(collector.window_folder(seq) for seq in dropped)
        return name.startswith(folders) and not name.endswith(collector.LINE_FILE)

    return {name: data for name, data in files.items() if not gone(name)}


def test_dropped_windows_count_as_recorded_and_kept_ones_are_still_rederived():
    stored, files, decision = benched_soak()
    dropped = set(range(10)) - {0, 4, 8, 9}
    kept_files = pruned(files, dropped)
    assert len(kept_files) < len(files)
    assert recompute_soak(spec(), decision, stored, kept_files, WHERE, dropped) == []
    # Without the retention record the missing bench results are a difference.
    problems = recompute_soak(spec(), decision, stored, kept_files, WHERE)
    assert f"{WHERE}[1] (window 1).metrics.completed: recorded" in " ".join(problems)
    # An edited bench result of a kept window is still named.
    name = collector.window_folder(4) + "bench.json"
    document = json.loads(kept_files[name])
    document["output_throughput"] *= 2
    kept_files[name] = json.dumps(document).encode()
    problems = recompute_soak(spec(), decision, stored, kept_files, WHERE, dropped)
    assert any(p.startswith(f"{WHERE}[4] (window 4).metrics.output_throughput") for p in problems)


def test_a_dropped_windows_line_is_still_checked_against_its_stored_times():
    stored, files, decision = benched_soak()
    stored[2]["start"] -= 50
    problems = recompute_soak(spec(), decision, stored, pruned(files, {2}), WHERE, {2})
    assert any(p.startswith(f"{WHERE}[2] (window 2).start: recorded") for p in problems), problems


SEALED = b'{"payload": "sealed"}\n'
POLICY = {"keep_every_nth_window": 60, "keep_after_sealed_days": 0}


def retention_members(key: Ed25519PrivateKey, sealed: bytes = SEALED) -> dict[str, bytes]:
    runs = {1: {"policy": POLICY, "windows": 10, "dropped": [[1, 3], [5, 7]]}}
    payload = statement.payload_bytes(retention_statement(sealed, runs))
    signature = key.sign(statement.pae(statement.PAYLOAD_TYPE, payload))
    keyid = statement.key_fingerprint(key.public_key())
    record = statement.envelope(payload, [(keyid, signature)])
    return {layout.ENVELOPE: SEALED, layout.RETENTION: statement.envelope_bytes(record)}


def test_a_signed_retention_record_lets_the_dropped_raw_files_be_missing():
    key, report = Ed25519PrivateKey.generate(), Verification()
    dropped = check_retention(retention_members(key), key.public_key(), report)
    assert report.problems == []
    assert dropped.seqs == {1: {1, 2, 3, 5, 6, 7}}
    assert dropped.covers("runs/attempt-1/files/soak/w000002/bench.json")
    assert not dropped.covers("runs/attempt-1/files/soak/w000002/window-line.json")
    assert not dropped.covers("runs/attempt-1/files/soak/w000004/bench.json")
    assert not dropped.covers("runs/attempt-2/files/soak/w000002/bench.json")
    assert not dropped.covers("runs/attempt-1/measurements.json")


def test_a_retention_record_by_another_key_or_of_other_evidence_drops_nothing():
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    report = Verification()
    assert check_retention(retention_members(other), key.public_key(), report).seqs == {}
    assert report.problems and "retention.dsse.json" in report.problems[0]
    report = Verification()
    members = retention_members(key, sealed=b"another envelope")
    members[layout.ENVELOPE] = SEALED
    assert check_retention(members, key.public_key(), report).seqs == {}
    expected = f"member {layout.RETENTION}: not a retention record of this evidence"
    assert report.problems == [expected]


def test_a_record_that_drops_a_window_its_policy_keeps_is_named():
    windows = [{"seq": seq, "metrics": {"crashed": seq == 5, "failed": 0}} for seq in range(20)]
    decision = {"result": {"clauses": [{"change_points": [{"seq": 13}]}]}}
    policy = {"keep_every_nth_window": 10, "keep_after_sealed_days": 0}
    allowed = set(range(20)) - {0, 5, 10, 13, 19}
    assert policy_problems(windows, decision, allowed, policy, layout.RETENTION) == []
    problems = policy_problems(windows, decision, allowed | {5, 13}, policy, layout.RETENTION)
    assert problems == [
        f"{layout.RETENTION}: window(s) [5, 13] dropped by retention, but its policy keeps them"
    ]
    broken = policy_problems(windows, decision, allowed, {}, layout.RETENTION)
    assert broken == [f"{layout.RETENTION}: the retention policy's keep_every_nth_window is None"]
