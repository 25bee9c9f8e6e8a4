"""A customer's trace replayed as a gate program's bench (docs/workloads.md section 10).

The `replay` step builds each replay a run sends once (runners.traces.replay, pure, from the
stored trace bytes the work order reads), writes it and its plan (the requests without their
token ids) to the host, and keeps the plan. Each bench cell then runs the profile's `trace`
command on that file at the cell's tier, and its per-request records become the cell's
measurement (the replay-records adapter) with the replay's fidelity (runners.traces.fidelity).

One replay per (trace, tier): every arm and repetition of a tier sends the same bytes, while
two tiers served by one server session send different prompts, so the second tier does not
start on the caches the first one left (as the synthetic workloads' per-cell seeds do).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from documents.step import Step
from runners.adapters.replay_records import parse_replay_records
from runners.adapters.vllm_trace_records import parse_vllm_trace_records, records_lines
from runners.artifact import Artifact
from runners.commands import placeholders_in
from runners.errors import SpecError
from runners.results import Cell
from runners.stepcontext import StepContext, StepProgress
from runners.traces.fidelity import PlannedRequest
from runners.traces.readers.formats import read_trace_bytes
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, replay_requests
from runners.traces.replay_cell import (
    plan_file,
    replay_cell_metrics,
    replay_name,
    replay_seed,
    replay_settings,
    sample_hit_profile,
)
from runners.traces.vllm_replay import chunk_tokens, timed_trace_replay


def is_trace(workload: dict[str, Any] | None) -> bool:
    return bool(workload and workload.get("trace"))


def replay_step(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    """Build, write and upload every replay the plan names (a replay step lists them)."""
    if ctx.trace_source is None:
        raise SpecError("the work order carries no trace", field="workload.trace")
    built: dict[str, Any] = {}
    artifacts, log = [], ""
    for entry in step.get("replays", []):
        workload, tier = entry["workload"], int(entry["tier"])
        name = replay_name(workload, tier)
        summary, plan = _build(ctx, workload, tier, name)
        built[name] = summary
        artifacts.append(Artifact(plan_file(workload, tier), "replay-plan", plan))
        log += (
            f"{name}: {summary['requests']} requests ({summary['measured']} measured), "
            f"{summary['prompt_tokens']} prompt tokens, digest {summary['digest'][:16]}\n"
        )
    return StepProgress(True, {"replays": built}, artifacts, log=log)


def _build(
    ctx: StepContext, workload: dict[str, Any], tier: int, name: str
) -> tuple[dict[str, Any], bytes]:
    trace = workload["trace"]
    assert ctx.trace_source is not None
    try:
        content = ctx.trace_source(trace["sha256"])
    except LookupError as error:
        raise SpecError(str(error), field="workload.trace.sha256") from None
    records = read_trace_bytes(content, trace["format"], trace.get("block_tokens"))
    lines = _replay_lines(ctx.commands, records, replay_settings(workload, tier))
    digest, planned = hashlib.sha256(), []
    local = ctx.scratch / f"{name}.jsonl"
    with local.open("wb") as out:
        for line, request in lines:
            digest.update(line)
            out.write(line)
            planned.append(request.to_row())
    plan = json.dumps({"digest": digest.hexdigest(), "requests": planned}).encode()
    (ctx.scratch / f"{name}.plan.json").write_bytes(plan)
    ctx.transport.put(str(local), replay_path(ctx, name))
    ctx.transport.put(str(ctx.scratch / f"{name}.plan.json"), plan_path(ctx, name))
    summary = {
        "digest": digest.hexdigest(),
        "requests": len(planned),
        "measured": sum(1 for row in planned if row[4]),
        "prompt_tokens": sum(row[2] for row in planned),
    }
    # A down-sample presses the cache less than the whole trace: its own curve is what the
    # planner's hit band reads (gates.services.runs.evaluation), from a second streaming pass.
    sample = sample_hit_profile(
        read_trace_bytes(content, trace["format"], trace.get("block_tokens")), workload, tier
    )
    if sample is not None:
        summary["sample_profile"] = sample
    return summary, plan


def _replay_lines(
    commands: dict[str, Any], records: Iterable[TraceRecord], settings: ReplaySettings
) -> Iterator[tuple[bytes, PlannedRequest]]:
    """Each kept request as the profile's client reads it, with its plan entry."""
    if sends_timed_trace(commands):
        return timed_trace_replay(records, settings)
    return (
        (request.to_json(), PlannedRequest.of(request))
        for request in replay_requests(records, settings)
    )


def sends_timed_trace(commands: dict[str, Any]) -> bool:
    """Whether the profile's trace command is `vllm bench serve`'s timed-trace replay (it names
    {timed_trace_file} and writes vLLM's detailed result) rather than Tollgate's own client
    (it names {replay_file}, the token ids, and writes {records_file})."""
    template = commands.get("bench", {}).get("trace")
    return template is not None and "timed_trace_file" in placeholders_in(template)


def replay_path(ctx: StepContext, name: str) -> str:
    return f"{ctx.run_dir}/{name}.jsonl"


def plan_path(ctx: StepContext, name: str) -> str:
    return f"{ctx.run_dir}/{name}.plan.json"


def replay_values(ctx: StepContext, step: Step, run_dir: str) -> dict[str, Any]:
    """The trace template's own values: the replay file and where the records go; for vLLM's
    timed trace also how many rows it has, the block size it was cut into and the client's
    hash seed (the same on every arm, so each arm's client makes the same prompts)."""
    workload, tier = step["workload"], step["tier"]
    name = replay_name(workload, tier)
    if not sends_timed_trace(ctx.commands):
        return {"replay_file": replay_path(ctx, name), "records_file": f"{run_dir}/records.jsonl"}
    document = json.loads(_fetch_plan(ctx, step, f"{Path(run_dir).name}-plan.json"))
    return {
        "timed_trace_file": replay_path(ctx, name),
        "replay_prompts": len(document["requests"]),
        "trace_block_tokens": chunk_tokens(replay_settings(workload, tier)),
        "replay_seed": replay_seed(workload, tier),
    }


def _fetch_plan(ctx: StepContext, step: Step, local_name: str) -> bytes:
    local = ctx.scratch / local_name
    ctx.transport.get(plan_path(ctx, replay_name(step["workload"], step["tier"])), str(local))
    return local.read_bytes()


def replay_cell(
    ctx: StepContext,
    step: Step,
    run_dir: str,
    server: dict[str, Any] | None,
) -> tuple[dict[str, Any], list[Artifact]]:
    """The cell's measurement from its records: the clauses' metrics and the fidelity."""
    cell = Cell(step["arm"], step["tier"], step["repetition"])
    document = json.loads(_fetch_plan(ctx, step, f"{cell.label}-plan.json"))
    planned = [PlannedRequest.from_row(row) for row in document["requests"]]
    raw, kept = _records(ctx, step, run_dir, cell, planned)
    metrics = replay_cell_metrics(
        document, raw, workload=step["workload"], tier=step["tier"], server=server
    )
    artifact = Artifact(f"{cell.label}/records.jsonl", "replay-records", raw)
    measurement = {
        "arm": cell.arm,
        "tier": cell.tier,
        "repetition": cell.repetition,
        "metrics": metrics,
        "server": server,
        "artifact": artifact.name,
    }
    return measurement, [artifact, *kept]


def _records(
    ctx: StepContext, step: Step, run_dir: str, cell: Cell, planned: list[PlannedRequest]
) -> tuple[bytes, list[Artifact]]:
    """The cell's records file, checked; from vLLM's detailed result when the profile replays
    with `vllm bench serve` (its warm-up flags from the plan, the result kept beside them)."""
    if not sends_timed_trace(ctx.commands):
        local = ctx.scratch / f"{cell.label}-records.jsonl"
        ctx.transport.get(f"{run_dir}/records.jsonl", str(local))
        raw = local.read_bytes()
        parse_replay_records(raw, source=f"{step['name']} records.jsonl")  # names a bad line
        return raw, []
    local = ctx.scratch / f"{cell.label}-result.json"
    ctx.transport.get(f"{run_dir}/result.json", str(local))
    result = local.read_bytes()
    records = parse_vllm_trace_records(result, source=f"{step['name']} result.json")
    measured = {request.index: request.measured for request in planned}
    for record in records:
        record["measured"] = measured.get(record["index"], True)
    return records_lines(records), [Artifact(f"{cell.label}/result.json", "vllm-bench", result)]
