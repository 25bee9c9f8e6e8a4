"""Performs or polls one step of a gate program on its host.

No Django: a step dict and what was recorded of it so far in, a StepProgress out. Long work
(servers, benchmarks) runs detached on the host; a step that is still running returns
`done=False` and is polled again. Every command comes from a profile template or Tollgate's own
fixed templates, filled with validated values.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from documents.step import Step, StepKind
from runners import adapters
from runners.artifact import Artifact
from runners.cleanup import MARKER
from runners.commands import HOSTCTL_ARGV, fill, to_shell
from runners.engine import engine_of
from runners.errors import BenchmarkError, SpecError
from runners.hostcheck import contract_step, xid_check
from runners.program import replay
from runners.program.sequence import WARMUP_PROMPTS
from runners.results import (
    Cell,
    answers_proof,
    bench_proof,
    metrics_scrape,
    probe_proof,
    server_facts,
)
from runners.server import port as server_port
from runners.server.launch import (
    cold_recovery_phases,
    engine_healthy,
    engine_metrics_text,
    offload_server_step,
    server_values,
    stop_side_services,
)
from runners.server.side_metrics import scrape_services, with_service_facts
from runners.soak import host as soak_host
from runners.stepcontext import (
    LOG_TAIL_BYTES,
    SHORT_COMMAND_S,
    StepContext,
    StepProgress,
    probe_values,
    remote_dir,
    tail_of,
)
from runners.workloads import workload_values

Executor = Callable[[Step, dict[str, Any], StepContext], StepProgress]

HOSTCTL = Path(__file__).resolve().parents[1] / "remote" / "hostctl.py"
# The live log takes at most this much of a bench's output per poll.
LIVE_LOG_BYTES = 16 * 1024
LIVE_LOG_LINES = 60


def perform(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    """Perform the step, or poll it if it was launched before."""
    executor = EXECUTORS.get(step["kind"])
    if executor is None:
        raise SpecError(f"unknown step kind {step['kind']!r}", field="plan", step=step["name"])
    return executor(step, detail, ctx)


def _prepare(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    # The marker first: the run directory is removed at the end only if it holds the token.
    marker = ctx.scratch / MARKER
    marker.write_text(ctx.token + "\n")
    ctx.transport.put(str(marker), f"{ctx.run_dir}/{MARKER}")
    ctx.transport.put(str(HOSTCTL), f"{ctx.run_dir}/hostctl.py")
    prompts = ctx.scratch / "prompts.json"
    prompts.write_text(json.dumps(ctx.prompts))
    ctx.transport.put(str(prompts), f"{ctx.run_dir}/prompts.json")
    log = f"uploaded hostctl.py and {len(ctx.prompts)} prompts\n"
    if ctx.context_tokens is not None:
        # Refuse a workload the model cannot hold now, before any server starts.
        values = server_values(ctx.transport, ctx.commands, ctx.values, ctx.context_tokens)
        log += f"max_model_len {values.get('max_model_len')} ({ctx.context_tokens} needed)\n"
    return StepProgress(True, log=log)


def _probe(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    name = step["probe"]
    argv = fill(ctx.commands["probes"][name], probe_values(ctx))
    result = ctx.transport.run(argv, timeout=SHORT_COMMAND_S)
    proof = probe_proof(name, result.stdout.encode(), source=step["name"])
    if not result.ok:
        reason = f"exit {result.exit_code}: {result.stderr.strip()[-300:]}"
        return StepProgress(
            True, {"error": reason}, proof.artifacts, facts={}, log=f"probe {name}: {reason}\n"
        )
    return StepProgress(
        True, {"facts": proof.facts}, proof.artifacts, facts=proof.facts, log=f"probe {name}: ok\n"
    )


def _serve(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    run_dir = remote_dir(ctx, step)
    if not detail.get("launched"):
        values = server_values(ctx.transport, ctx.commands, ctx.values, ctx.context_tokens)
        argv = fill(ctx.commands["serve"][step["arm_kind"]], values)
        found = server_port.listener(ctx.transport, ctx.values, ctx.run_dir)
        own = ctx.transport.status(run_dir)
        server_port.require_port_free(found, own, host=ctx.transport.host, step=step["name"])
        ctx.transport.launch_detached(run_dir, f"{ctx.token}-{Path(run_dir).name}", argv)
        return StepProgress(
            False,
            {"launched": True, "run_dir": run_dir, "since": time.time()},
            log=f"{step['name']}: launched\n",
        )
    status = ctx.transport.status(run_dir)
    if status.finished or status.vanished:
        raise BenchmarkError(
            f"the {step['arm_kind']} server exited before it was healthy "
            f"(exit {status.exit_code}): {tail_of(ctx, run_dir)}",
            step=step["name"],
        )
    if not engine_healthy(ctx):
        if time.time() - detail["since"] > ctx.serve_timeout_s:
            raise BenchmarkError(
                f"the server was not healthy within {ctx.serve_timeout_s:.0f} s", step=step["name"]
            )
        return StepProgress(False)
    found = server_port.listener(ctx.transport, ctx.values, ctx.run_dir)
    server_port.require_answered_by(found, status, host=ctx.transport.host, step=step["name"])
    text = engine_metrics_text(ctx)
    tool = engine_of(ctx.commands).metrics_tool
    config = adapters.parse(text, tool=tool).get("cache_config")
    seconds = round(time.time() - detail["since"], 3)
    return StepProgress(
        True,
        {"healthy_after_s": seconds, "cache_config": config},
        [Artifact(f"{run_dir_name(run_dir)}/metrics-at-start.txt", tool, text.encode())],
        log=f"{step['name']}: healthy after {seconds} s\n",
    )


def _stop(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    ctx.transport.kill(remote_dir(ctx, {**step, "kind": "serve"}))
    stop_side_services(ctx, step)
    xid_check(step, ctx)
    return StepProgress(True, log=f"{step['name']}: stopped\n")


def _bench(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    run_dir = remote_dir(ctx, step)
    if "metrics_before" not in detail:
        # Recorded before the launch: a launch whose answer an outage lost is sent again (and
        # adopted by its token) without a second scrape taken while the bench already runs.
        before, kept = _scrape(ctx, step, "before")
        services = scrape_services(ctx, step, _cell(step), "before")
        recorded = {"metrics_before": before, "services_before": services.parsed}
        return StepProgress(False, recorded, [kept, *services.artifacts], log=services.log)
    if not detail.get("launched"):
        phases = cold_recovery_phases(step["workload"], detail["metrics_before"], step["seed"])
        _launch_bench(ctx, step, run_dir, step["workload"], step["tier"], step["seed"], phases)
        return StepProgress(
            False,
            {"launched": True, "run_dir": run_dir, "since": time.time()},
            log=f"{step['name']}: launched\n",
        )
    if not _bench_finished(ctx, step, run_dir, detail):
        return _new_output(ctx, step, run_dir, detail)
    collected = _collect_bench(ctx, step, run_dir, detail)
    collected.log = _new_output(ctx, step, run_dir, detail).log + collected.log
    return collected


def _new_output(ctx: StepContext, step: Step, run_dir: str, detail: dict[str, Any]) -> StepProgress:
    """The bench's new output lines for the live log, read from where the last poll stopped
    (bounded per poll, whole lines only); nothing to record when there are none."""
    offset = detail.get("stdout_offset", 0)
    data, after = ctx.transport.read_from(
        f"{run_dir}/stdout.log", offset, max_bytes=LIVE_LOG_BYTES, whole_lines=True
    )
    if after == offset:
        return StepProgress(False, waiting_on=run_dir)
    lines = data.decode("utf-8", "replace").splitlines()
    log = "".join(f"  {step['name']} | {line[:300]}\n" for line in lines[-LIVE_LOG_LINES:])
    return StepProgress(False, {"stdout_offset": after}, log=log, waiting_on=run_dir)


def _warmup(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    run_dir = remote_dir(ctx, step)
    if not detail.get("launched"):
        workload = {**step["workload"], "num_prompts": WARMUP_PROMPTS}
        _launch_bench(ctx, step, run_dir, workload, 1, int(step["workload"]["seed"]) + 7)
        return StepProgress(False, {"launched": True, "run_dir": run_dir, "since": time.time()})
    if not _bench_finished(ctx, step, run_dir, detail):
        return StepProgress(False, waiting_on=run_dir)
    return StepProgress(True, log=f"{step['name']}: done\n")


def _complete(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    template = [
        *HOSTCTL_ARGV,
        "complete",
        "{base_url}",
        "{model}",
        "{max_tokens}",
        "{run_dir}/prompts.json",
    ]
    argv = fill(
        template,
        {
            **ctx.values,
            "run_dir": ctx.run_dir,
            "base_url": ctx.base_url,
            "max_tokens": ctx.max_tokens,
        },
    )
    result = ctx.transport.run(argv, timeout=300)
    if not result.ok:
        raise BenchmarkError(
            f"completions failed (exit {result.exit_code}): "
            f"{result.stderr.strip()[-LOG_TAIL_BYTES:]}",
            step=step["name"],
        )
    proof = answers_proof(step["arm"], result.stdout.encode(), source=step["name"])
    (answers,) = proof.facts.values()
    return StepProgress(
        True,
        {"answers": answers},
        proof.artifacts,
        facts=proof.facts,
        log=f"{step['name']}: {len(answers)} answers\n",
    )


def _launch_bench(
    ctx: StepContext,
    step: Step,
    run_dir: str,
    workload: dict[str, Any],
    concurrency: int,
    seed: int,
    phases: dict[str, Any] | None = None,
) -> None:
    """The bench, alone or (cold_recovery with the profile's seed and flush phases, and not a
    warm-up) as one `sh -c` of the three filled, quoted commands in order; a trace workload
    runs the profile's `trace` command on the replay the replay step uploaded."""
    trace = replay.is_trace(workload) and step["kind"] == "bench"
    dataset = "trace" if trace else workload["dataset"]
    template = ctx.commands["bench"].get(dataset)
    if template is None:
        raise SpecError(
            f"the profile has no bench command for {dataset!r}",
            field="workload.trace" if trace else "workload.dataset",
            step=step["name"],
        )
    values = {
        **ctx.values,
        **workload_values(workload),
        "base_url": ctx.base_url,
        "max_concurrency": concurrency,
        "seed": seed,
        "result_dir": run_dir,
        "result_filename": "result.json",
        **(replay.replay_values(ctx, step, run_dir) if trace else {}),
    }
    argv = fill(template, values)
    steps = ctx.commands.get("phases", {}).get(dataset)
    if phases is not None and steps:
        values.update(phases)
        line = " && ".join(to_shell(fill(t, values)) for t in (steps["seed"], steps["flush"]))
        argv = ["sh", "-c", f"{line} && {to_shell(argv)}"]
    ctx.transport.launch_detached(run_dir, f"{ctx.token}-{Path(run_dir).name}", argv)


def _bench_finished(ctx: StepContext, step: Step, run_dir: str, detail: dict[str, Any]) -> bool:
    status = ctx.transport.status(run_dir)
    if status.finished:
        if status.exit_code != 0:
            raise BenchmarkError(
                f"the bench command exited {status.exit_code}: {tail_of(ctx, run_dir)}",
                step=step["name"],
            )
        return True
    if status.vanished:
        raise BenchmarkError("the bench process vanished without an exit code", step=step["name"])
    if time.time() - detail["since"] > ctx.bench_timeout_s:
        raise BenchmarkError(
            f"the bench did not finish within {ctx.bench_timeout_s:.0f} s", step=step["name"]
        )
    return False


def _collect_bench(
    ctx: StepContext, step: Step, run_dir: str, detail: dict[str, Any]
) -> StepProgress:
    if replay.is_trace(step["workload"]):
        return _collect_replay(ctx, step, run_dir, detail)
    before = detail["metrics_before"]
    local = ctx.scratch / f"{Path(run_dir).name}.json"
    ctx.transport.get(f"{run_dir}/result.json", str(local))
    raw = local.read_bytes()
    after, kept = _scrape(ctx, step, "after")
    services = scrape_services(ctx, step, _cell(step), "after")
    source = f"{step['name']} result.json"
    proof = bench_proof(
        raw,
        cell=_cell(step),
        source=source,
        before=before,
        after=after,
        tool=engine_of(ctx.commands).bench_tool,
    )
    assert proof.measurement is not None  # a bench result always measures its cell
    server = with_service_facts(ctx, step, proof.measurement["server"], detail, services.parsed)
    proof.measurement["server"] = server
    metrics = proof.measurement["metrics"]
    return StepProgress(
        True,
        {"completed": metrics.get("completed"), "failed": metrics.get("failed"), "server": server},
        [*proof.artifacts, kept, *services.artifacts],
        measurement=proof.measurement,
        log=services.log + f"{step['name']}: {metrics.get('completed')} completed, "
        f"{metrics.get('failed')} failed\n",
    )


def _collect_replay(
    ctx: StepContext, step: Step, run_dir: str, detail: dict[str, Any]
) -> StepProgress:
    after, kept = _scrape(ctx, step, "after")
    services = scrape_services(ctx, step, _cell(step), "after")
    server = server_facts(detail["metrics_before"], after)
    server = with_service_facts(ctx, step, server, detail, services.parsed)
    measurement, artifacts = replay.replay_cell(ctx, step, run_dir, server)
    metrics = measurement["metrics"]
    fidelity = metrics["replay"]["fidelity"]
    verdict = "faithful" if fidelity["valid"] else "NOT faithful: " + "; ".join(fidelity["reasons"])
    return StepProgress(
        True,
        {"completed": metrics["completed"], "failed": metrics["failed"], "server": server},
        [*artifacts, kept, *services.artifacts],
        measurement=measurement,
        log=services.log + f"{step['name']}: {metrics['completed']} completed, "
        f"{metrics['failed']} failed; replay {verdict}\n",
    )


def _scrape(ctx: StepContext, step: Step, moment: str) -> tuple[dict[str, Any], Artifact]:
    text = engine_metrics_text(ctx)
    source = f"{step['name']} /metrics"
    tool = engine_of(ctx.commands).metrics_tool
    return metrics_scrape(text, cell=_cell(step), moment=moment, source=source, tool=tool)


def _cell(step: Step) -> Cell:
    return Cell(step["arm"], step["tier"], step["repetition"])


# Blocks on the host until the detached process writes its exit code, or $2 tenths of a
# second pass. A constant script: the run directory arrives as an argument, never as code.
WAIT_SCRIPT = (
    'n=0; while [ ! -f "$1/exit_code" ] && [ "$n" -lt "$2" ]; do '
    "sleep 0.05 2>/dev/null || sleep 1; n=$((n + 1)); done"
)


def wait_for_exit(ctx: StepContext, run_dir: str, seconds: float) -> None:
    """Return when the process of `run_dir` has exited, or after about `seconds`."""
    ticks = max(1, int(seconds * 20))
    argv = fill(["sh", "-c", WAIT_SCRIPT, "sh", "{run_dir}", str(ticks)], {"run_dir": run_dir})
    ctx.transport.run(argv, timeout=seconds + 15)


def run_dir_name(run_dir: str) -> str:
    return Path(run_dir).name


def _soak(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    recorded = soak_host.launch_step(ctx, step, detail)
    log = f"{step['name']}: {'adopted' if recorded.get('adopted') else 'started'}\n"
    return StepProgress(False, recorded, log=log if recorded else "", handoff=True)


# One executor for each step kind a host performs.
EXECUTORS: dict[StepKind, Executor] = {
    "prepare": _prepare,
    "probe": _probe,
    "contract": contract_step,
    "serve": _serve,
    "stop": _stop,
    "offload_server": offload_server_step,
    "bench": _bench,
    "warmup": _warmup,
    "complete": _complete,
    "soak": _soak,
    "replay": replay.replay_step,
}
