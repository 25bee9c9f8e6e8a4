"""A server session's own needs, on this machine through the local transport: the context length
derived from the model's config.json and the workload (refused before any server starts), and
an offload tier server started, health-checked and stopped with its session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.errors import SpecError
from runners.program.perform import HOSTCTL, StepContext, perform, remote_dir
from runners.transport import LocalTransport
from runners.workloads import (
    CONTEXT_SLACK_TOKENS,
    cold_recovery_flush_prompts,
    resolve_max_model_len,
    spec_context_tokens,
)
from tests.sshd import free_port, wait_for

VLLM = next(d for d in builtin_profile_documents() if d["name"] == "vllm")


def context(tmp_path: Path, *, context_tokens: int | None, **values) -> StepContext:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return StepContext(
        transport=LocalTransport(),
        commands=VLLM["commands"],
        values={
            **VLLM["parameters"],
            "python": sys.executable,
            "model": "tiny",
            "model_path": str(model),
            "tensor_parallel_size": 1,
            **values,
        },
        run_dir=str(run_dir),
        token="run-test",
        scratch=scratch,
        context_tokens=context_tokens,
    )


def test_a_workload_longer_than_the_model_is_refused_before_any_server_starts(tmp_path):
    ctx = context(tmp_path, context_tokens=4000)
    with pytest.raises(SpecError) as refused:
        perform({"name": "prepare host", "kind": "prepare"}, {}, ctx)
    assert refused.value.field == "max_model_len"
    assert "4000" in str(refused.value) and "2048" in str(refused.value)
    serve = {
        "name": "r1: start resident server",
        "kind": "serve",
        "arm": "baseline",
        "arm_kind": "resident",
        "session": "r1",
    }
    with pytest.raises(SpecError):
        perform(serve, {}, ctx)
    assert not Path(remote_dir(ctx, serve)).exists()


def test_the_derived_max_model_len_is_logged_at_prepare(tmp_path):
    progress = perform(
        {"name": "prepare host", "kind": "prepare"}, {}, context(tmp_path, context_tokens=1000)
    )
    assert f"max_model_len {1000 + CONTEXT_SLACK_TOKENS} (1000 needed)" in progress.log


@pytest.mark.parametrize(
    ("needed", "limit", "configured", "expected"),
    [
        (1000, 2048, None, 1000 + CONTEXT_SLACK_TOKENS),
        (2040, 2048, None, 2048),  # slack never beyond what the model allows
        (1000, None, None, 1000 + CONTEXT_SLACK_TOKENS),  # a hub id: vLLM checks the rest
        (1000, 2048, 1500, 1500),
        (None, 2048, None, 2048),
    ],
)
def test_max_model_len_is_the_workloads_need_with_slack_within_the_model(
    needed, limit, configured, expected
):
    assert resolve_max_model_len(needed, limit, configured) == expected


@pytest.mark.parametrize(
    ("needed", "limit", "configured", "words"),
    [
        (3000, 2048, None, "max_position_embeddings is 2048"),
        (1000, 2048, 4096, "longer than the model's"),
        (1000, 2048, 512, "shorter than the workload's longest request"),
    ],
)
def test_a_context_that_cannot_fit_says_why(needed, limit, configured, words):
    with pytest.raises(ValueError, match=words):
        resolve_max_model_len(needed, limit, configured)


def test_a_specs_context_need_is_its_longest_request():
    g3 = {"workload": {"prefix_len": 1000, "suffix_len": 24, "output_len": 64, "num_prompts": 4}}
    assert spec_context_tokens(g3) == 1088
    g2 = {
        "equivalence": {"prompts": ["é" * 100], "max_tokens": 16},
        "offload_hit": {"workload": {"prefix_len": 10, "suffix_len": 0, "output_len": 1}},
        "noise_floor": {"workload": {"input_len": 50, "output_len": 8}},
    }
    assert spec_context_tokens(g2) == 200 + 16  # UTF-8 bytes bound a byte-level tokenizer
    assert spec_context_tokens({"expected": {}}) is None


def test_the_flush_outgrows_the_kv_cache_by_the_ratio():
    workload = {"prefix_len": 900, "suffix_len": 100}
    assert cold_recovery_flush_prompts(workload, 10_000) == 12  # 1.2 x 10000 / 1000


def test_an_offload_tier_server_starts_is_checked_healthy_and_stops_with_its_session(tmp_path):
    port = free_port()
    directory = tmp_path / "served"
    directory.mkdir()
    server = {
        "start": [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(directory),
        ],
        "health": ["{python}", "{run_dir}/hostctl.py", "health", f"http://127.0.0.1:{port}", "/"],
    }
    commands = {**VLLM["commands"], "offload_servers": {"lmcache": server}}
    ctx = context(tmp_path, context_tokens=None, offload_backend="lmcache")
    ctx = StepContext(**{**ctx.__dict__, "commands": commands})
    Path(ctx.run_dir, "hostctl.py").write_bytes(HOSTCTL.read_bytes())
    step = {
        "name": "r1: start offload tier server",
        "kind": "offload_server",
        "arm": "offload",
        "arm_kind": "offload",
        "session": "r1",
    }
    detail = perform(step, {}, ctx).detail
    progress = wait_for(lambda: (p := perform(step, detail, ctx)).done and p, timeout=20)
    assert "healthy" in progress.log
    status = ctx.transport.status(detail["run_dir"])
    assert status.running
    stop = {
        "name": "r1: stop server",
        "kind": "stop",
        "arm": "offload",
        "arm_kind": "offload",
        "session": "r1",
    }
    perform(stop, {}, ctx)
    assert not ctx.transport.status(detail["run_dir"]).group_alive


def test_the_native_backend_needs_no_offload_tier_server(tmp_path):
    ctx = context(tmp_path, context_tokens=None, offload_backend="native")
    step = {
        "name": "s: start offload tier server",
        "kind": "offload_server",
        "arm": "offload",
        "arm_kind": "offload",
        "session": "s",
    }
    progress = perform(step, {}, ctx)
    assert progress.done and "none needed" in progress.log
