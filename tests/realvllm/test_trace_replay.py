"""The `vllm` profile replays a customer's trace with vLLM's own client, for real: `vllm bench
serve --dataset-name timed_trace` against the CPU vLLM, through runners.program.perform's replay
and bench steps over the loopback sshd, its --save-detailed result read into the per-request
records and checked for fidelity as simhost's replays are (docs/workloads.md section 10).

The trace is a slice of the Mooncake fixture cut to what the tiny model takes: six prefix trees
that each come back at least three times, prompts at 1/32 of their length (16-token blocks for
Mooncake's 512), outputs at most 16 tokens, replayed at 1/100 of its pace with a warm-up window.
"""

from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path

import pytest

from runners.program.perform import StepContext
from runners.program.sequence import plan_g3_repetitions, plan_run
from runners.transport import open_transport
from tests.realvllm.test_real_vllm import PROMPTS, VLLM, g3_spec, host_values, run_step

pytestmark = [pytest.mark.slow]

FIXTURE = Path(__file__).parents[1] / "fixtures" / "traces" / "mooncake-synthetic_trace.jsonl"
SCALE = 32  # Mooncake's 512-token blocks become 16-token ones
MAX_OUTPUT = 16
# The cap on requests in flight: above the replay's 44 requests, so no request ever waits in
# the client for a slot. At 16 it held only while the CPU server answered fast: on a slower box
# of this kind (2026-12-03) the first long prompts took 6-9 s to a first token, 16 were soon in
# flight, later requests waited for a slot and arrived 4-5 s late (p99), on this round's code
# and on the last landed one alike.
TIER = 64
# This shared 2-core box runs the client beside the CPU server, whose steps hold the cores for
# tens of ms: the bar judges the box, not the replay (as simhost's trace test says). The
# measured error is printed (p99 5 to 110 ms per arm so far, p50 about 1 ms); a host of its own
# is held to the 10 ms default.
ARRIVAL_BAR_MS = 250.0


def small_trace() -> bytes:
    """The first six prefix trees that come back three times or more and whose longest prompt
    fits the tiny model's 2,048 tokens once cut to 1/32; every request of each tree, in order."""
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    trees = collections.defaultdict(list)
    for row in rows:
        trees[row["hash_ids"][0]].append(row)
    chosen = [
        root
        for root, members in trees.items()
        if len(members) >= 3 and max(row["input_length"] for row in members) <= 40_000
    ][:6]
    kept = [row for row in rows if row["hash_ids"][0] in chosen]
    cut = [
        {
            **row,
            "input_length": min(-(-row["input_length"] // SCALE), 16 * len(row["hash_ids"])),
            "output_length": min(row["output_length"], MAX_OUTPUT),
        }
        for row in kept
    ]
    return b"".join(json.dumps(row).encode() + b"\n" for row in cut)


TRACE = small_trace()
SHA256 = hashlib.sha256(TRACE).hexdigest()


def trace_spec() -> dict:
    spec = g3_spec()
    spec["tiers"] = [TIER]
    spec["workload"] = {
        "dataset": "random",
        "input_len": 1300,  # the longest cut prompt is 1,250 tokens
        "output_len": MAX_OUTPUT,
        "num_prompts": 34,
        "seed": 5,
        "trace": {
            "sha256": SHA256,
            "format": "mooncake",
            "block_tokens": 16,
            "time_scale": 0.01,
            "warmup_s": 30.0,  # trace seconds: the first ten requests fill the cache
            "max_arrival_error_p99_ms": ARRIVAL_BAR_MS,
        },
    }
    return spec


@pytest.fixture
def trace_context(vllm_sshd, tiny_model, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    values = {**VLLM["parameters"], "model": "tiny-llama", **host_values(tiny_model, tmp_path)}
    with open_transport(vllm_sshd.target()) as transport:
        yield StepContext(
            transport=transport,
            commands=VLLM["commands"],
            values=values,
            run_dir=f"{values['run_root']}/run-trace",
            token="run-trace",
            scratch=scratch,
            serve_timeout_s=600,
            prompts=PROMPTS,
            max_tokens=16,
            context_tokens=1300 + MAX_OUTPUT,
            trace_source={SHA256: TRACE}.__getitem__,
        )


def test_the_vllm_profile_replays_a_trace_with_vllms_timed_trace_on_each_arm(trace_context):
    ctx, spec = trace_context, trace_spec()
    run_step({"name": "prepare host", "kind": "prepare"}, ctx)
    (replay,) = [step for step in plan_run(spec, []) if step["kind"] == "replay"]
    (planned,) = run_step(replay, ctx)["replays"].values()
    assert planned["requests"] == len(TRACE.splitlines())
    assert 0 < planned["measured"] < planned["requests"]
    measurements, results = {}, {}
    for step in plan_g3_repetitions(spec, first=1, count=1):
        if step["arm"] == "offload":
            continue  # vLLM's native offload needs a GPU (test_real_vllm.py says so)
        try:
            done = run_step(step, ctx)
        except BaseException:
            run_step({**step, "kind": "stop", "name": "stop after failure"}, ctx)
            raise
        if done.get("measurement"):
            measurements[step["arm"]] = done["measurement"]
            results[step["arm"]] = json.loads(
                (ctx.scratch / f"{step['arm']}-c{TIER}-r1-result.json").read_bytes()
            )
    assert set(measurements) == {"baseline", "recompute"}
    for arm, item in measurements.items():
        metrics = item["metrics"]
        fidelity = metrics["replay"]["fidelity"]
        print(f"{arm}: arrival error {fidelity['arrival_error_ms']}, server {item['server']}")
        assert metrics["failed"] == 0 and metrics["completed"] == planned["measured"]
        assert metrics["num_prompts"] + metrics["warmup_requests"] == planned["requests"]
        per_request = metrics["per_request"]
        assert per_request["count"] == planned["measured"] and per_request["errors"] == 0
        assert all(ttft > 0 for ttft in per_request["ttft_ms"])
        assert per_request["sent_s"] == sorted(per_request["sent_s"])
        assert metrics["ttft_ms"]["median"] > 0 and metrics["itl_ms"]["median"] > 0
        assert fidelity["valid"] is True, fidelity["reasons"]
        assert fidelity["sent"] == fidelity["requests"] == planned["requests"]
        assert fidelity["prompt_token_mismatches"] == fidelity["output_token_mismatches"] == 0
        assert metrics["replay"]["digest"] == planned["digest"]
    # One seed, one file: vLLM's client made the same prompts on both arms, request by request,
    # and greedy decoding on the same weights answered most of them with the same text.
    baseline, recompute = results["baseline"], results["recompute"]
    assert baseline["input_lens"] == recompute["input_lens"]
    texts = zip(baseline["generated_texts"], recompute["generated_texts"], strict=True)
    same = sum(a == b for a, b in texts)
    print(f"identical answers: {same} of {len(baseline['generated_texts'])}")
    assert same >= 0.8 * len(baseline["generated_texts"])
    hits = {arm: item["server"].get("prefix_cache_hit_rate") for arm, item in measurements.items()}
    assert hits["baseline"] > 0 and not hits["recompute"]  # the trees came back, and hit
