"""The pure soak recomputation on windows made by the collector's own functions: windows that
left no bench result (a crash, a failed bench), a raw file refused in transit, windows from before
lines were kept, the number an edited line changes, and the host's health folded again from
nvidia-smi's or amd-smi's files. No database, no host."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gates.decisions import decide_gate
from gates.evidence.soak_recompute import recompute_soak
from gates.specs import validation as specs
from runners.soak import collector, fitness, timeline
from tests.runners.soak.test_soak_health import smi
from tests.runners.soak.test_soak_health_amd import amd_files

WHERE = "runs/attempt-1/soak-windows.json"
STARTED = 1_800_000_000.0


def spec() -> dict:
    document = specs.default_spec("G4")
    document.update(duration_h=6 / 3600, window_min=1 / 60)
    return document


def line(seq: int, **fields) -> dict:
    start = STARTED + seq
    return {"seq": seq, "start": start, "end": start + 1, "agent_pid": 7, "boot_id": "b", **fields}


def collected(
    lines: list[dict], refused: dict[int, list[str]], raw: dict[int, dict] | None = None
) -> tuple[list, dict, dict]:
    """Stored windows, kept files and the decision, as the collector would have made them;
    with `raw` files per window, the host's health folded as the collector folds it."""
    stored, files, chain = [], {}, []
    health = {"since": STARTED - 60}
    for entry in lines:
        text = json.dumps(entry)
        kept = (raw or {}).get(entry["seq"], {})
        window = collector.Window(entry, kept, refused.get(entry["seq"], []), text=text)
        for artifact in collector.window_artifacts(window):
            files[artifact.name] = artifact.content
        metrics = collector.window_sample(window, watch_health=raw is not None)
        health, _ = fitness.health_fold(health, entry["seq"], metrics.get("health"))
        stored.append({"seq": entry["seq"], "start": entry["start"], "end": entry["end"]})
        stored[-1]["metrics"] = metrics
        chain.append((entry["seq"], entry["start"], entry["end"], metrics))
    windows = [timeline.engine_window(*window) for window in chain]
    exit_at = lines[-1]["end"] + 0.5
    result = decide_gate(spec(), windows, {"started_at": STARTED, "ended_at": exit_at})
    result["soak"] = {
        "compressed": True,
        "extended_h": 0,
        "gaps": timeline.find_gaps(chain),
        "notes": [],
        "stop_reason": "",
        "agent_generations": 1,
        "agent_exit": {"code": 0, "reason": "done", "at": exit_at},
    }
    if raw is not None:
        result["soak"]["health"] = health
    return stored, files, {"verdict": result["verdict"], "result": result}


def soak_lines() -> list[dict]:
    crash = {"exit_code": 70, "log_tail": ["boom"]}
    return [
        line(0, bench_exit=1, files=[]),
        line(1, crashed=True, crash=crash),
        line(2, bench_exit=0, files=["bench.json"]),
        # A window after one nobody recorded (seq 3 to 5 is a gap of 2 s).
        {**line(5, bench_exit=2), "start": STARTED + 5, "end": STARTED + 6},
    ]


def test_windows_without_bench_results_recompute_to_the_recorded_decision():
    refused = {2: [f"bench.json: {collector.NOT_KEPT}"]}
    stored, files, decision = collected(soak_lines(), refused)
    assert decision["result"]["soak"]["gaps"], "the test soak has a gap to find again"
    assert recompute_soak(spec(), decision, stored, files, WHERE) == []


def test_without_window_lines_the_line_fields_come_from_the_stored_samples():
    stored, files, decision = collected(soak_lines(), {})
    older = {n: d for n, d in files.items() if not n.endswith(collector.LINE_FILE)}
    assert recompute_soak(spec(), decision, stored, older, WHERE) == []


def test_an_edited_line_names_the_window_number_and_the_clause_it_changes():
    stored, files, decision = collected(soak_lines(), {})
    name = collector.window_folder(0) + collector.LINE_FILE
    files[name] = json.dumps({**json.loads(files[name]), "crashed": True}).encode()
    problems = recompute_soak(spec(), decision, stored, files, WHERE)
    assert f"{WHERE}[0] (window 0).metrics.crashed: recorded False, recomputed True" in problems
    assert any(p.startswith("decision/decision.json result.clauses[0].observed") for p in problems)


def test_a_moved_window_names_its_time():
    stored, files, decision = collected(soak_lines(), {})
    stored[3]["start"] -= 100
    problems = recompute_soak(spec(), decision, stored, files, WHERE)
    assert any(p.startswith(f"{WHERE}[3] (window 5).start: recorded") for p in problems), problems


def health_files(**gpu_health) -> dict[str, bytes]:
    return {"smi.txt": smi(**gpu_health), "kernel-log.txt": b""}


def test_a_soak_whose_host_throttled_recomputes_with_its_health_notes():
    hot = health_files(throttle_reasons=["hw_slowdown"])
    raw = {0: health_files(), 1: hot, 2: hot, 5: health_files()}
    stored, files, decision = collected(soak_lines(), {}, raw)
    findings = decision["result"]["soak"]["health"]["findings"]
    assert findings[0]["note"] == "GPU 0: clocks held down (hw_slowdown)"
    assert recompute_soak(spec(), decision, stored, files, WHERE) == []
    # A note edited out of the record is found again from the smi output.
    stored[1]["metrics"]["notes"] = stored[1]["metrics"]["notes"][:-1]
    problems = recompute_soak(spec(), decision, stored, files, WHERE)
    assert any(p.startswith(f"{WHERE}[1] (window 1).metrics.notes") for p in problems), problems


def test_a_decided_soak_whose_window_shows_an_xid_should_have_ended_infra_error():
    """A decision over a window whose kernel log holds XID 79 (a collector that missed it, or
    a record edited): the verifier's outcome from the same files is infra_error."""
    raw = {seq: health_files() for seq in (0, 1, 2, 5)}
    fallen = render_xid(gpu=0, code=79)
    raw[2] = {**raw[2], "kernel-log.txt": fallen}
    stored, files, decision = collected(soak_lines(), {}, raw)
    problems = recompute_soak(spec(), decision, stored, files, WHERE)
    unfit = [p for p in problems if "should have ended infra_error" in p]
    assert len(unfit) == 1, problems
    named = f"{WHERE}[2] (window 2): the host became unfit to measure in window 2: "
    assert unfit[0].startswith(named)
    assert "GPU 0: XID 79 (GPU has fallen off the bus)" in unfit[0]


def render_xid(*, gpu: int, code: int) -> bytes:
    """A kernel log with one XID line stamped inside the test soak (after the run started)."""
    stamp = datetime.fromtimestamp(STARTED + 2, tz=UTC).isoformat(timespec="microseconds")
    line = f"NVRM: Xid (PCI:0000:{0x18 + 0x10 * gpu:02x}:00): {code}, pid=1, GPU has fallen off"
    return f"{stamp.replace('.', ',')} {line}\n".encode()


def test_an_amd_soak_refolds_from_amd_smi_files_as_the_collector_folded_it():
    """On an AMD host the health comes from amd-smi's metric and process views: the verifier
    reads the same files the same way, and an ECC rise in them is a run that should have
    ended infra_error."""
    hot = amd_files(throttle_reasons=["prochot"])
    raw = {0: amd_files(), 1: hot, 2: hot, 5: amd_files()}
    stored, files, decision = collected(soak_lines(), {}, raw)
    health = decision["result"]["soak"]["health"]
    assert health["findings"][0]["note"] == "GPU 0: clocks held down (prochot)"
    assert health["ecc_baseline"]["0000:18:00.0"] == {"count": 0, "seq": 0}
    assert stored[1]["metrics"]["health"]["gpus"][0]["slowdown_reasons"] == ["prochot"]
    assert recompute_soak(spec(), decision, stored, files, WHERE) == []
    # amd-smi's metric for window 5, as a host with an ECC rise would have printed it.
    name = collector.window_folder(5) + "amd-metric.txt"
    files[name] = amd_files(ecc_uncorrectable=4)["amd-metric.txt"]
    problems = recompute_soak(spec(), decision, stored, files, WHERE)
    unfit = [p for p in problems if "should have ended infra_error" in p]
    assert len(unfit) == 1 and unfit[0].startswith(
        f"{WHERE}[3] (window 5): the host became unfit to measure in window 5: "
        "GPU 0: uncorrectable ECC errors rose from 0 (window 0) to 4"
    ), problems
    assert any(p.startswith(f"{WHERE}[3] (window 5).metrics.health.gpus") for p in problems)
