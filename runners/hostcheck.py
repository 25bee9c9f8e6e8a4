"""The host held to the contract at the start of a run, and watched for XID and amdgpu faults
after each server session: the steps that re-probe it over the transport. The rules are
runners.contract's (pure); this module only runs the probes and hands their output over.
GPU fitness comes from nvidia-smi on an NVIDIA host, from amd-smi (the amd_metric and
amd_process probes) on an AMD one. No Django.
"""

from __future__ import annotations

import contextlib
from typing import Any

from documents.step import Step
from runners import adapters
from runners.adapters.amd_health import (
    AMD_METRIC,
    AMD_PROCESS,
    inventory_bus_ids,
    parse_amd_health,
)
from runners.adapters.errors import FormatProblem, one_line
from runners.adapters.gpu_health import parse_gpu_health_xml
from runners.artifact import Artifact
from runners.commands import fill
from runners.contract import (
    GPU_MEMORY_HELD_MAX_MIB,
    check_host,
    first_reported,
    inventory_of,
    xid_faults,
)
from runners.errors import ContractError, InfrastructureError
from runners.results import probe_proof
from runners.stepcontext import SHORT_COMMAND_S, StepContext, StepProgress, probe_values


def contract_step(step: Step, detail: dict[str, Any], ctx: StepContext) -> StepProgress:
    """Re-probe the host and hold it to the accepted inventory, before any server starts."""
    found: list[dict[str, Any]] = []
    artifacts: list[Artifact] = []
    health = None
    outputs: dict[str, str] = {}
    for name in step["probes"]:
        result = ctx.transport.run(
            fill(ctx.commands["probes"][name], probe_values(ctx)), timeout=SHORT_COMMAND_S
        )
        if not result.ok:
            continue
        proof = probe_proof(name, result.stdout.encode(), source=step["name"])
        artifacts += proof.artifacts
        found.append(proof.facts)
        outputs[name] = result.stdout
        if name == "gpu_nvidia":
            with contextlib.suppress(adapters.AdapterError, FormatProblem):
                health = parse_gpu_health_xml(result.stdout)
    facts = first_reported(found)
    amd_log = ""
    if health is None and AMD_METRIC in outputs:
        health, amd_log = amd_health(outputs, facts)
    held_max = ctx.values.get("gpu_memory_held_max_mib", GPU_MEMORY_HELD_MAX_MIB)
    try:
        log = check_host(
            ctx.accepted_inventory,
            facts,
            health,
            step=step["name"],
            held_max_mib=float(held_max),
            since=ctx.window_start,
        )
    except ContractError as error:
        error.artifacts = artifacts  # the outputs the changed fields were read from
        raise
    except InfrastructureError as error:
        if error.permanent:  # unfit ends the run; a field not re-read is retried afresh
            error.artifacts = artifacts
        raise
    log = amd_log + log
    if "xid_events" not in facts:
        log += "kernel log not readable: XID errors not checked\n"
    return StepProgress(True, {"contract": inventory_of(facts)}, artifacts, log=log)


def amd_health(outputs: dict[str, str], facts: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The gpu-health form from the amd-smi probes' outputs, and what the run log says of them
    when they fell short; the GPUs' PCI addresses come from the inventory probe's facts."""
    bus_ids = inventory_bus_ids(facts.get("gpu_inventory"))
    processes = outputs.get(AMD_PROCESS)
    try:
        health = parse_amd_health(outputs[AMD_METRIC], processes, bus_ids=bus_ids)
    except FormatProblem as problem:
        return None, f"{one_line(str(problem), 200)}: GPU fitness not checked\n"
    if processes is None:
        return health, "amd-smi process gave nothing: compute processes not listed\n"
    return health, ""


def xid_check(step: Step, ctx: StepContext) -> None:
    """After each server session: a critical XID or amdgpu fault logged since the run started
    makes the session's numbers untrustworthy, so the run ends infra_error naming the GPU."""
    template = ctx.commands.get("probes", {}).get("kernel_log")
    if template is None:
        return
    result = ctx.transport.run(fill(template, probe_values(ctx)), timeout=SHORT_COMMAND_S)
    if not result.ok:
        return
    proof = probe_proof("kernel_log", result.stdout.encode(), source=step["name"])
    faults = xid_faults(proof.facts.get("xid_events") or [], None, ctx.window_start)
    if faults:
        raise InfrastructureError(
            "the host is not fit to measure: " + "; ".join(faults),
            permanent=True,
            step=step["name"],
        )
