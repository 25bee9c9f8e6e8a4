"""The `vllm` profile's trace replay through the replay step and the cell reader, on this
machine's files (no vLLM needed): the step uploads the timed trace vLLM was captured replaying,
the bench gets its values, and the captured --save-detailed result becomes a faithful cell.
The real client and server: tests/realvllm/test_trace_replay.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from runners.commands import fill
from runners.program.replay import replay_cell, replay_name, replay_step, replay_values
from runners.stepcontext import StepContext
from runners.transport import LocalTransport

PROFILES = Path(__file__).resolve().parents[3] / "gates" / "builtin_profiles"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-bench-trace"
TRACE = (FIXTURES / "mooncake-slice.trace.jsonl").read_bytes()
SHA256 = hashlib.sha256(TRACE).hexdigest()
# The settings the capture was built with (PROVENANCE.md): seed 11 is the workload's 10 + tier 1.
WORKLOAD = {
    "dataset": "random",
    "input_len": 1200,
    "output_len": 8,
    "num_prompts": 10,
    "seed": 10,
    "trace": {
        "sha256": SHA256,
        "format": "mooncake",
        "block_tokens": 16,
        "time_scale": 0.02,
        "warmup_s": 1.0,
    },
}
TIER = 1


def profile(name: str) -> dict:
    document: dict = json.loads((PROFILES / f"{name}.json").read_text())
    return document


@pytest.fixture
def ctx(tmp_path: Path) -> StepContext:
    (tmp_path / "scratch").mkdir()
    (tmp_path / "host" / "run").mkdir(parents=True)
    return StepContext(
        transport=LocalTransport(),
        commands=profile("vllm")["commands"],
        values={**profile("vllm")["parameters"], "model": "tiny-llama", "model_path": "/m"},
        run_dir=str(tmp_path / "host" / "run"),
        token="run-1",
        scratch=tmp_path / "scratch",
        trace_source={SHA256: TRACE}.__getitem__,
    )


def bench_step() -> dict:
    return {
        "name": "r1-baseline: bench c=1",
        "kind": "bench",
        "arm": "baseline",
        "tier": TIER,
        "repetition": 1,
        "workload": WORKLOAD,
    }


def replay(ctx: StepContext) -> dict:
    step = {"name": "replay", "kind": "replay", "replays": [{"workload": WORKLOAD, "tier": TIER}]}
    (built,) = replay_step(step, {}, ctx).detail["replays"].values()
    return built


def test_the_replay_step_uploads_the_timed_trace_vllm_was_captured_replaying(ctx):
    built = replay(ctx)
    uploaded = Path(ctx.run_dir, replay_name(WORKLOAD, TIER) + ".jsonl").read_bytes()
    assert uploaded == (FIXTURES / "mooncake-slice_v0.32.0_cpu.timed-trace.jsonl").read_bytes()
    assert built["digest"] == hashlib.sha256(uploaded).hexdigest()
    assert (built["requests"], built["measured"]) == (12, 10)


def test_the_bench_gets_the_file_its_rows_its_block_size_and_the_replays_hash_seed(ctx):
    replay(ctx)
    run_dir = f"{ctx.run_dir}/bench-r1-baseline"
    values = replay_values(ctx, bench_step(), run_dir)
    assert values["replay_prompts"] == 12 and values["trace_block_tokens"] == 16
    assert values["replay_seed"] == 11
    argv = fill(
        ctx.commands["bench"]["trace"],
        {
            **ctx.values,
            "base_url": "http://127.0.0.1:8000",
            "max_concurrency": TIER,
            "result_dir": run_dir,
            "result_filename": "result.json",
            **values,
        },
    )
    assert argv[1] == "PYTHONHASHSEED=11"
    assert argv[argv.index("--dataset-path") + 1] == values["timed_trace_file"]


def test_the_captured_result_becomes_a_faithful_cell_with_the_warm_up_left_out(ctx):
    replay(ctx)
    run_dir = Path(ctx.run_dir, "bench-r1-baseline")
    run_dir.mkdir()
    captured = (FIXTURES / "mooncake-slice_v0.32.0_cpu.json").read_bytes()
    (run_dir / "result.json").write_bytes(captured)
    server = {"prefix_cache_hit_rate": 0.5}
    measurement, artifacts = replay_cell(ctx, bench_step(), str(run_dir), server)
    metrics = measurement["metrics"]
    assert (metrics["num_prompts"], metrics["warmup_requests"]) == (10, 2)
    assert metrics["completed"] == 10 and metrics["failed"] == 0
    assert metrics["per_request"]["count"] == 10 and metrics["ttft_ms"]["median"] > 0
    fidelity = metrics["replay"]["fidelity"]
    assert fidelity["valid"] is True and fidelity["sent"] == 12
    assert fidelity["hit_rate"]["achieved"] == 0.5
    names = {artifact.name: artifact for artifact in artifacts}
    assert names["baseline-c1-r1/result.json"].content == captured
    records = names["baseline-c1-r1/records.jsonl"].content.decode().splitlines()
    assert [json.loads(line)["measured"] for line in records][:3] == [False, False, True]
