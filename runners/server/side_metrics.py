"""The side services' own counters around a bench: every side service of the arm that names a
`metrics` command (LMCache's /metrics, ...) is scraped before and after the bench like the
engine's page, each scrape kept as a file named by the service and read with the service's
`metrics_tool` adapter into the cell's server facts (`side_services`, runners/results.py).

A scrape that fails is said in the step's log and leaves the service out of the cell; it fails
the bench only when the profile names that service's counters as the hit proof
(`engine.hit_proof.side_service`, runners/engine.py). No Django; I/O through the transport.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from documents.step import Step
from runners.adapters import AdapterError
from runners.artifact import Artifact
from runners.commands import fill
from runners.engine import SideService, engine_of
from runners.errors import BenchmarkError
from runners.results import Cell, service_facts, service_scrape, with_side_services
from runners.stepcontext import SHORT_COMMAND_S, StepContext


@dataclass
class ServiceScrapes:
    """One moment's scrapes of the arm's side services: parsed by service name, the files to
    keep, and a log line for each service whose counters could not be read."""

    parsed: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    log: str = ""


def metered_services(ctx: StepContext, step: Step) -> list[SideService]:
    """The arm's side services that name a metrics command, in start order."""
    return engine_of(ctx.commands).metered_for(step.get("arm_kind", ""), ctx.values)


def scrape_services(ctx: StepContext, step: Step, cell: Cell, moment: str) -> ServiceScrapes:
    """Scrape each metered side service once ("before" or "after" the bench)."""
    proof = engine_of(ctx.commands).hit_proof_service
    scrapes = ServiceScrapes()
    for service in metered_services(ctx, step):
        try:
            parsed, kept = _scrape(ctx, step, cell, service, moment)
        except (BenchmarkError, AdapterError) as problem:
            why = f"{service.name} metrics {moment} the bench not read: {_reason(problem)}"
            if service.name == proof:
                raise BenchmarkError(
                    f"{why} (its counters are the profile's hit proof)", step=step["name"]
                ) from problem
            scrapes.log += f"{step['name']}: {why}; its counters are not in the cell\n"
            continue
        scrapes.parsed[service.name] = parsed
        scrapes.artifacts.append(kept)
    return scrapes


def with_service_facts(
    ctx: StepContext,
    step: Step,
    server: dict[str, Any],
    detail: dict[str, Any],
    after: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The cell's server facts with the facts of each side service read both before (the bench
    step's recorded `services_before`) and after the bench; unchanged for an arm without
    metered side services."""
    services = metered_services(ctx, step)
    if not services:
        return server
    # A bench launched before side services were scraped recorded none before it.
    before = detail.get("services_before", {})
    facts = {
        service.name: service_facts(
            str(service.metrics_tool), before[service.name], after[service.name]
        )
        for service in services
        if service.name in before and service.name in after
    }
    return with_side_services(server, facts, engine_of(ctx.commands).hit_proof_service)


def _scrape(
    ctx: StepContext, step: Step, cell: Cell, service: SideService, moment: str
) -> tuple[dict[str, Any], Artifact]:
    assert service.metrics is not None and service.metrics_tool is not None
    argv = fill(service.metrics, {**ctx.values, "run_dir": ctx.run_dir})
    result = ctx.transport.run(argv, timeout=SHORT_COMMAND_S)
    if not result.ok:
        raise BenchmarkError(f"exit {result.exit_code}: {result.stderr.strip()[-300:]}")
    return service_scrape(
        result.stdout,
        cell=cell,
        service=service.name,
        moment=moment,
        source=f"{step['name']} {service.name} metrics",
        tool=service.metrics_tool,
    )


def _reason(problem: Exception) -> str:
    return str(problem).strip()[-300:] or type(problem).__name__
