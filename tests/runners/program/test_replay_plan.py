"""A trace workload in the gate programs (pure parts): the plan builds and uploads each replay
once before any server, one per tier, with no synthetic warm-up; the records adapter summarises
the measured requests only; the fidelity summary names what makes a run invalid."""

from __future__ import annotations

import json

from gates.specs import validation as specs
from runners import adapters
from runners.program.replay import replay_name, replay_settings
from runners.program.sequence import plan_run
from runners.traces.fidelity import (
    recorded_hit_bands,
    replay_fidelity_summary,
    with_replay_fidelity,
)

TRACE = {"sha256": "ab" * 32, "format": "mooncake", "block_tokens": 512, "time_scale": 0.5}


def trace_g3(tiers: list[int]) -> dict:
    spec = specs.default_spec("G3")
    spec["workload"] = {**spec["workload"], "trace": dict(TRACE)}
    spec["tiers"] = tiers
    return spec


def test_a_trace_g3_uploads_one_replay_per_tier_before_any_server_and_skips_the_warmup():
    steps = plan_run(trace_g3([8, 32]), [])
    assert [step["kind"] for step in steps[:2]] == ["prepare", "replay"]
    replays = steps[1]["replays"]
    assert [entry["tier"] for entry in replays] == [8, 32]
    assert all(entry["workload"]["trace"] == TRACE for entry in replays)
    assert not any(step["kind"] == "warmup" for step in steps)
    benches = [step for step in steps if step["kind"] == "bench"]
    assert benches and all(step["workload"]["trace"] == TRACE for step in benches)
    names = {replay_name(step["workload"], step["tier"]) for step in benches}
    assert len(names) == 2  # every arm and repetition of a tier sends the same file


def test_a_synthetic_g3_has_no_replay_step():
    steps = plan_run(specs.default_spec("G3"), [])
    assert "replay" not in {step["kind"] for step in steps}
    assert "warmup" in {step["kind"] for step in steps}


def test_the_replay_settings_come_from_the_spec_and_the_tier():
    workload = {"seed": 5, "trace": {**TRACE, "sample_fraction": 0.25, "warmup_s": 2.0}}
    settings = replay_settings(workload, 16)
    assert (settings.seed, settings.block_tokens, settings.chained_ids) == (21, 512, True)
    assert (settings.time_scale, settings.sample_fraction, settings.warmup_s) == (0.5, 0.25, 2.0)


def record(index: int, *, measured: bool = True, ok: bool = True, ttft: float = 10.0) -> dict:
    return {
        "index": index,
        "send_at_s": index * 0.1,
        "sent_s": index * 0.1,
        "ok": ok,
        "prompt_tokens": 100,
        "output_tokens": 5 if ok else None,
        "ttft_ms": ttft if ok else None,
        "itl_ms": [2.0] * 4 if ok else [],
        "e2el_ms": ttft + 8.0 if ok else None,
        "measured": measured,
    }


def test_the_records_adapter_summarises_the_measured_requests_only():
    rows = [record(0, measured=False, ttft=999.0), record(1, ttft=10.0), record(2, ttft=30.0)]
    rows.append(record(3, ok=False))
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (run,) = adapters.parse(text, tool="replay-records")["runs"]
    assert (run["num_prompts"], run["completed"], run["failed"]) == (3, 2, 1)
    assert run["warmup_requests"] == 1
    assert run["ttft_ms"]["median"] == 10.0 and run["ttft_ms"]["p99"] == 30.0
    assert run["tpot_ms"]["mean"] == 2.0  # (e2el - ttft) / (output - 1)
    assert run["total_output_tokens"] == 10 and run["output_throughput"] > 0


def test_the_records_adapter_keeps_when_each_request_was_scheduled_for_the_arrival_plot():
    rows = [{**record(1), "send_at_s": 1.0, "sent_s": 1.004}, {**record(2), "send_at_s": 0.5}]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (run,) = adapters.parse(text, tool="replay-records")["runs"]
    requests = run["per_request"]
    assert requests["send_at_s"] == [0.5, 1.0]  # beside sent_s, in send order
    assert requests["sent_s"][1] == 1.004
    untimed = [
        {key: value for key, value in record(i).items() if key != "send_at_s"} for i in (1, 2)
    ]
    plain = "".join(json.dumps(row) + "\n" for row in untimed)  # a trace without timing
    assert "send_at_s" not in adapters.parse(plain, tool="replay-records")["runs"][0]["per_request"]


def test_a_missed_bar_is_a_reason_and_a_model_error_a_note():
    faithful = {"valid": True, "reasons": [], "model_error": "hit rate outside the band"}
    late = {"valid": False, "reasons": ["arrival-time error p99 52.0 ms ..."], "model_error": None}
    measurements = [
        {
            "arm": "offload",
            "tier": 8,
            "repetition": 1,
            "metrics": {"replay": {"digest": "d", "fidelity": faithful}},
        },
        {
            "arm": "baseline",
            "tier": 8,
            "repetition": 1,
            "metrics": {"replay": {"digest": "d", "fidelity": late}},
        },
    ]
    summary = replay_fidelity_summary(measurements)
    assert summary is not None and summary["digests"] == ["d"]
    assert summary["reasons"] == ["replay baseline c=8 r1: arrival-time error p99 52.0 ms ..."]
    assert summary["notes"] == ["replay offload c=8 r1: hit rate outside the band"]
    assert replay_fidelity_summary([{"arm": "a", "metrics": {"completed": 3}}]) is None


def test_a_missed_bar_makes_the_decision_invalid_and_a_model_error_stays_a_note():
    engine = {"verdict": "pass", "reasons": ["all 1 clause cells passed"], "notes": []}
    missed = {"cells": [], "reasons": ["replay baseline c=8 r1: late"], "notes": ["model"]}
    result = with_replay_fidelity(engine, missed)
    assert result["verdict"] == "invalid"
    assert result["reasons"] == ["replay baseline c=8 r1: late", "all 1 clause cells passed"]
    assert result["notes"] == ["model"] and result["replay_fidelity"] == missed
    noted = with_replay_fidelity(engine, {**missed, "reasons": []})
    assert noted["verdict"] == "pass" and noted["notes"] == ["model"]


def test_the_bands_a_summary_used_are_kept_and_read_back_as_given():
    fidelity = {"valid": True, "reasons": [], "hit_rate": {"achieved": 0.5}}
    cell = {"arm": "offload", "tier": 8, "repetition": 1}
    measurements = [{**cell, "metrics": {"replay": {"digest": "d", "fidelity": fidelity}}}]
    bands = {8: (0.4, 0.6), 16: "no KV plan"}
    summary = replay_fidelity_summary(measurements, bands)
    assert summary is not None
    stored = json.loads(json.dumps(summary))  # as the decision keeps it
    assert stored["hit_bands"] == [[8, [0.4, 0.6]], [16, "no KV plan"]]
    assert recorded_hit_bands(stored) == bands
    assert replay_fidelity_summary(measurements, recorded_hit_bands(stored)) == summary
