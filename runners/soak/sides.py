"""A soak window's side services (LMCache's server, ...), the pure part: which the agent runs and
how (from the profile), the raw files their scrapes are kept in, and what a window's scrapes say
(read with each service's metrics adapter, as G3's cells are: runners/results.py service_facts).
No I/O, no Django: runners/soak/collector.py calls it; runners/soak/processes.py is the agent's
side.
"""

from __future__ import annotations

from typing import Any

from runners import adapters
from runners.commands import fill
from runners.engine import engine_of
from runners.results import service_facts

SOAK_ARM = "offload"


def agent_side_services(
    commands: dict[str, Any], values: dict[str, Any], run_dir: str
) -> dict[str, Any]:
    """The offload arm's side services as the agent runs them (started before the server,
    stopped after it, the metered ones scraped around every window's bench), and the one whose
    counters are the profile's hit proof; nothing for an arm without side services."""
    engine = engine_of(commands)
    services = engine.services_for(SOAK_ARM, values)
    if not services:
        return {}
    filled = {**values, "run_dir": run_dir}
    return {
        "side_services": [
            {
                "name": service.name,
                "start_argv": fill(service.start, filled) if service.start else None,
                "health_argv": fill(service.health, filled) if service.health else None,
                "metrics_argv": fill(service.metrics, filled) if service.metrics else None,
                "metrics_tool": service.metrics_tool,
            }
            for service in services
        ],
        "hit_proof": engine.hit_proof_service,
    }


def side_file(service: str, moment: str) -> str:
    """A side service's metrics scrape in a window's raw files, named as G3's cells name it."""
    return f"{service}-metrics-{moment}.txt"


def side_tools(line: dict[str, Any]) -> dict[str, str]:
    """The adapter of each side service's kept scrape, by file name, from the window's line."""
    return {
        side_file(str(service["name"]), moment): str(service["metrics_tool"])
        for service in side_lines(line)
        for moment in ("before", "after")
    }


def side_lines(line: dict[str, Any]) -> list[dict[str, Any]]:
    services = line.get("side_services")
    return (
        [item for item in services if isinstance(item, dict)] if isinstance(services, list) else []
    )


def side_numbers(
    line: dict[str, Any], files: dict[str, bytes], sample: dict[str, Any], notes: list[str]
) -> None:
    """The metered side services' facts about the window's bench (`side_services`, by name, as
    a G3 cell's server facts hold them), each one not read with why (`side_services_unread`),
    and `hit_proof`. When the profile's hit proof is a side service, the window's
    `external_hit_rate` is that service's lookup hit rate (the engine's own stays as
    `engine_external_hit_rate`); when it could not be read, the rate is unknown and the window
    says why in its notes. Nothing is added for a window without metered side services."""
    services = side_lines(line)
    if not services:
        return
    facts: dict[str, dict[str, Any]] = {}
    unread: dict[str, str] = {}
    for service in services:
        name, tool = str(service.get("name")), str(service.get("metrics_tool"))
        try:
            facts[name] = _side_facts(line, files, service, name, tool)
        except (adapters.AdapterError, ValueError) as problem:
            unread[name] = str(problem)
    proof = line.get("hit_proof")
    sample["side_services"], sample["side_services_unread"] = facts, unread
    sample["hit_proof"] = proof if isinstance(proof, str) and proof else "engine"
    if sample["hit_proof"] == "engine" or sample["crashed"]:
        return
    sample["engine_external_hit_rate"] = sample["external_hit_rate"]
    if sample["hit_proof"] in facts:
        sample["external_hit_rate"] = facts[sample["hit_proof"]].get("lookup_hit_rate")
        return
    sample["external_hit_rate"] = None
    why = unread.get(sample["hit_proof"], "not scraped")
    notes.append(
        f"{sample['hit_proof']} metrics not read ({why}); its counters are the profile's hit "
        "proof: the window's offload hit rate is unknown"
    )


def _side_facts(
    line: dict[str, Any], files: dict[str, bytes], service: dict[str, Any], name: str, tool: str
) -> dict[str, Any]:
    given = service.get("errors")
    errors: dict[str, Any] = given if isinstance(given, dict) else {}
    parsed = {}
    for moment in ("before", "after"):
        raw = files.get(side_file(name, moment))
        if raw is None:
            said = errors.get(moment) or (
                "the window crashed" if line.get("crashed") else "no file"
            )
            raise ValueError(f"{moment} the bench: {said}")
        parsed[moment] = adapters.parse(raw, tool=tool)
    return service_facts(tool, parsed["before"], parsed["after"])
