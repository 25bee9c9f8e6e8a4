"""The pure soak recomputation on windows made by the collector's own functions: windows that
left no bench result (a crash, a failed bench), a raw file refused in transit, windows from before
lines were kept, and the number an edited line changes. No database, no host."""

from __future__ import annotations

import json

from gates import specs
from gates.decisions import decide_gate
from gates.evidence.soak_recompute import recompute_soak
from runners import soak as collector

WHERE = "runs/attempt-1/soak-windows.json"
STARTED = 1_800_000_000.0


def spec() -> dict:
    document = specs.default_spec("G4")
    document.update(duration_h=6 / 3600, window_min=1 / 60)
    return document


def line(seq: int, **fields) -> dict:
    start = STARTED + seq
    return {"seq": seq, "start": start, "end": start + 1, "agent_pid": 7, "boot_id": "b", **fields}


def collected(lines: list[dict], refused: dict[int, list[str]]) -> tuple[list, dict, dict]:
    """Stored windows, kept files and the decision, as the collector would have made them."""
    stored, files, chain = [], {}, []
    for entry in lines:
        text = json.dumps(entry)
        window = collector.Window(entry, problems=refused.get(entry["seq"], []), text=text)
        for artifact in collector.window_artifacts(window):
            files[artifact.name] = artifact.content
        metrics = collector.window_sample(window)
        stored.append({"seq": entry["seq"], "start": entry["start"], "end": entry["end"]})
        stored[-1]["metrics"] = metrics
        chain.append((entry["seq"], entry["start"], entry["end"], metrics))
    windows = [collector.engine_window(*window) for window in chain]
    exit_at = lines[-1]["end"] + 0.5
    result = decide_gate(spec(), windows, {"started_at": STARTED, "ended_at": exit_at})
    result["soak"] = {
        "compressed": True,
        "extended_h": 0,
        "gaps": collector.find_gaps(chain),
        "notes": [],
        "stop_reason": "",
        "agent_generations": 1,
        "agent_exit": {"code": 0, "reason": "done", "at": exit_at},
    }
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
