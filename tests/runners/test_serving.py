"""A server session's own needs, on this machine through the local transport: the context length
derived from the model's config.json and the workload (refused before any server starts), and
an offload tier server started, health-checked and stopped with its session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gates.services.profiles import builtin_profile_documents
from runners.errors import BenchmarkError, SpecError
from runners.program.perform import HOSTCTL, StepContext, perform, remote_dir
from runners.server.launch import engine_healthy
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


def http_service(tmp_path: Path, name: str) -> dict:
    """A side service that really runs: Python's http.server on a free port, checked healthy
    by hostctl as a profile's would be."""
    port = free_port()
    directory = tmp_path / name
    directory.mkdir()
    start = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    return {
        "start": [*start, "--directory", str(directory)],
        "health": ["{python}", "{run_dir}/hostctl.py", "health", f"http://127.0.0.1:{port}", "/"],
    }


def context_with(tmp_path: Path, commands: dict, backend: str) -> StepContext:
    ctx = context(tmp_path, context_tokens=None, offload_backend=backend)
    ctx = StepContext(**{**ctx.__dict__, "commands": {**VLLM["commands"], **commands}})
    Path(ctx.run_dir, "hostctl.py").write_bytes(HOSTCTL.read_bytes())
    return ctx


def offload_server_step(session: str) -> dict:
    return {
        "name": f"{session}: start offload tier server",
        "kind": "offload_server",
        "arm": "offload",
        "arm_kind": "offload",
        "session": session,
    }


def test_an_offload_tier_server_starts_is_checked_healthy_and_stops_with_its_session(tmp_path):
    server = http_service(tmp_path, "served")
    ctx = context_with(tmp_path, {"offload_servers": {"lmcache": server}}, "lmcache")
    step = offload_server_step("r1")
    detail = perform(step, {}, ctx).detail
    progress = wait_for(lambda: (p := perform(step, detail, ctx)).done and p, timeout=20)
    assert "healthy" in progress.log
    status = ctx.transport.status(detail["run_dir"])
    assert status.running
    perform({**step, "name": "r1: stop server", "kind": "stop"}, {}, ctx)
    assert not ctx.transport.status(detail["run_dir"]).group_alive


def test_the_native_backend_needs_no_offload_tier_server(tmp_path):
    ctx = context(tmp_path, context_tokens=None, offload_backend="native")
    progress = perform(offload_server_step("s"), {}, ctx)
    assert progress.done and "none needed" in progress.log


def test_side_services_start_in_order_each_healthy_before_the_next_and_all_stop(tmp_path):
    services = [{"name": name, **http_service(tmp_path, name)} for name in ("metadata", "master")]
    ctx = context_with(tmp_path, {"engine": {"side_services": services}}, "native")
    step = offload_server_step("r1")
    detail: dict = {}
    logs = []

    def advance():
        progress = perform(step, detail, ctx)
        detail.update(progress.detail)
        logs.append(progress.log)
        return progress.done

    wait_for(advance, timeout=30)
    healthy = [line for line in "".join(logs).splitlines() if "healthy" in line]
    assert [line.split()[-2] for line in healthy] == ["metadata", "master"]
    step_dir = f"{ctx.run_dir}/offload_server-r1"
    assert all(
        ctx.transport.status(f"{step_dir}/{name}").running for name in ("metadata", "master")
    )
    perform({**step, "name": "r1: stop server", "kind": "stop"}, {}, ctx)
    assert not any(
        ctx.transport.status(f"{step_dir}/{name}").group_alive for name in ("metadata", "master")
    )


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ENGINE_PAGE = FIXTURES / "vllm-metrics/er0080__metrics_vllm_0.25.1_idle.txt"
BENCH_RESULT = FIXTURES / "vllm-bench/er0080__bench_serve_v0.25.1__opt-125m_cpu.json"


def lmcache_page(asked: int, hit: int) -> str:
    return (
        f"lmcache_mp_lookup_requested_tokens_total {asked}\n"
        f"lmcache_mp_lookup_hit_tokens_total {hit}\n"
        f"lmcache_mp_lookup_hit_l1_tokens_total {hit}\n"
    )


def bench_with_lmcache(tmp_path: Path, *, hit_proof: bool) -> tuple[StepContext, dict, Path]:
    """A bench step whose engine and LMCache service are Python http.servers serving written
    pages (their /metrics), whose bench command copies a captured vllm bench result; returns
    the context, the step and the LMCache page to rewrite between the scrapes."""
    engine = http_service(tmp_path, "engine")
    (tmp_path / "engine" / "metrics").write_bytes(ENGINE_PAGE.read_bytes())
    (tmp_path / "engine" / "health").write_text("ok\n")
    lmcache = http_service(tmp_path, "lmcache")
    port = lmcache["health"][-2].rsplit(":", 1)[1]
    page = tmp_path / "lmcache" / "metrics"
    page.write_text(lmcache_page(1000, 100))
    service = {
        "name": "lmcache",
        **lmcache,
        "metrics": [*lmcache["health"][:2], "metrics", f"http://127.0.0.1:{port}", "/metrics"],
        "metrics_tool": "lmcache-metrics",
        "when": {"offload_backend": "lmcache"},
    }
    section = {"side_services": [service]}
    if hit_proof:
        section["hit_proof"] = {"side_service": "lmcache"}
    bench = {"random": ["cp", str(BENCH_RESULT), "{result_dir}/{result_filename}"]}
    # The profile's own LMCache server (offload_servers) is replaced by the one served here.
    commands = {"engine": section, "bench": bench, "offload_servers": {}}
    ctx = context_with(tmp_path, commands, "lmcache")
    engine_port = engine["health"][-2].rsplit(":", 1)[1]
    ctx = StepContext(
        **{
            **ctx.__dict__,
            "values": {**ctx.values, "host_address": "127.0.0.1", "port": engine_port},
        }
    )
    ctx.transport.launch_detached(f"{ctx.run_dir}/engine", "engine", engine["start"])
    started = perform(offload_server_step("r1"), {}, ctx).detail
    wait_for(lambda: perform(offload_server_step("r1"), started, ctx).done, timeout=20)
    wait_for(lambda: engine_healthy(ctx), timeout=20)
    step = {
        "name": "offload c2 r1: bench",
        "kind": "bench",
        "arm": "offload",
        "arm_kind": "offload",
        "tier": 2,
        "repetition": 1,
        "seed": 1,
        "session": "offload-c2-r1",
        "workload": {"dataset": "random", "input_len": 8, "output_len": 4, "num_prompts": 2},
    }
    return ctx, step, page


def run_bench(ctx: StepContext, step: dict, between=lambda: None):
    detail: dict = {}
    progress = perform(step, detail, ctx)
    detail.update(progress.detail)
    artifacts, logs = list(progress.artifacts), progress.log
    between()

    def advance():
        nonlocal logs
        progress = perform(step, detail, ctx)
        detail.update(progress.detail)
        artifacts.extend(progress.artifacts)
        logs += progress.log
        return progress.done and progress

    done = wait_for(advance, timeout=30)
    return done, artifacts, logs


def stop(ctx: StepContext) -> None:
    perform({**offload_server_step("r1"), "name": "r1: stop", "kind": "stop"}, {}, ctx)
    ctx.transport.kill(f"{ctx.run_dir}/engine")


def test_the_bench_step_keeps_lmcaches_scrapes_and_puts_its_lookup_facts_in_the_cell(tmp_path):
    ctx, step, page = bench_with_lmcache(tmp_path, hit_proof=True)
    try:
        done, artifacts, _ = run_bench(
            ctx, step, between=lambda: page.write_text(lmcache_page(3000, 1300))
        )
    finally:
        stop(ctx)
    kept = {a.name: a.content for a in artifacts}
    assert kept["offload-c2-r1/lmcache-metrics-before.txt"] == lmcache_page(1000, 100).encode()
    assert kept["offload-c2-r1/lmcache-metrics-after.txt"] == lmcache_page(3000, 1300).encode()
    server = done.measurement["server"]
    assert server["hit_proof"] == "lmcache"
    facts = server["side_services"]["lmcache"]
    assert (facts["lookup_hit_rate"], facts["requested_tokens"], facts["hit_l1_tokens"]) == (
        0.6,
        2000.0,
        1200.0,
    )


def test_a_side_service_whose_scrape_fails_is_named_and_the_bench_still_counts(tmp_path):
    ctx, step, page = bench_with_lmcache(tmp_path, hit_proof=False)
    try:
        done, artifacts, logs = run_bench(ctx, step, between=page.unlink)
    finally:
        stop(ctx)
    assert "lmcache metrics after the bench not read" in logs
    kept = [a.name for a in artifacts if a.name.startswith("offload-c2-r1/lmcache")]
    assert kept == ["offload-c2-r1/lmcache-metrics-before.txt"]
    assert done.measurement["metrics"]["completed"] > 0
    assert done.measurement["server"]["side_services"] == {}
    assert done.measurement["server"]["hit_proof"] == "engine"


def test_a_failed_scrape_of_the_hit_proofs_service_fails_the_bench(tmp_path):
    ctx, step, page = bench_with_lmcache(tmp_path, hit_proof=True)
    try:
        with pytest.raises(BenchmarkError, match="the profile's hit proof"):
            run_bench(ctx, step, between=page.unlink)
    finally:
        stop(ctx)
