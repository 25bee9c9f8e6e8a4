"""The host held to the contract at the start of a run, and watched for XID errors after each
server session: the steps that re-probe it over the transport. The rules are runners.contract's
(pure); this module only runs the probes and hands their output over. No Django.
"""

from __future__ import annotations

import contextlib

from runners import adapters
from runners.adapters.errors import FormatProblem
from runners.adapters.gpu_health import parse_gpu_health_xml
from runners.commands import fill
from runners.contract import GPU_MEMORY_HELD_MAX_MIB, check_host, inventory_of, xid_faults
from runners.errors import InfrastructureError
from runners.results import Artifact, probe_proof
from runners.stepcontext import SHORT_COMMAND_S, StepContext, StepProgress, probe_values


def contract_step(step: dict, detail: dict, ctx: StepContext) -> StepProgress:
    """Re-probe the host and hold it to the accepted inventory, before any server starts."""
    facts: dict = {}
    artifacts: list[Artifact] = []
    health = None
    for name in step["probes"]:
        result = ctx.transport.run(
            fill(ctx.commands["probes"][name], probe_values(ctx)), timeout=SHORT_COMMAND_S
        )
        if not result.ok:
            continue
        proof = probe_proof(name, result.stdout.encode(), source=step["name"])
        artifacts += proof.artifacts
        facts.update({k: v for k, v in proof.facts.items() if facts.get(k) is None})
        if name == "gpu_nvidia":
            with contextlib.suppress(adapters.AdapterError, FormatProblem):
                health = parse_gpu_health_xml(result.stdout)
    held_max = ctx.values.get("gpu_memory_held_max_mib", GPU_MEMORY_HELD_MAX_MIB)
    log = check_host(
        ctx.accepted_inventory,
        facts,
        health,
        step=step["name"],
        held_max_mib=float(held_max),
        since=ctx.window_start,
    )
    if "xid_events" not in facts:
        log += "kernel log not readable: XID errors not checked\n"
    return StepProgress(True, {"contract": inventory_of(facts)}, artifacts, log=log)


def xid_check(step: dict, ctx: StepContext) -> None:
    """After each server session: a critical XID logged since the run started makes the
    session's numbers untrustworthy, so the run ends infra_error naming the GPU and code."""
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
