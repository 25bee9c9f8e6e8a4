"""What tool outputs prove, as plain data for the decision engine: a bench cell's measurement,
a probe's G1 facts, the greedy answers of G2, what a server's /metrics say about the arm it ran,
and the raw files each keeps.

Pure (adapters only): the one reading of results, for the gate programs and uploads alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from runners import adapters, jsonlimits
from runners.adapters import AdapterError
from runners.adapters.kvbm_metrics import kvbm_facts
from runners.adapters.lmcache_metrics import lookup_facts
from runners.adapters.mooncake_metrics import store_facts
from runners.artifact import Artifact
from runners.engine import Engine

PROBE_TOOLS = {
    "vllm_version": "vllm-version",
    # Any engine's version probe (runners/engine.py `version_probe`): its last version line.
    "engine_version": "engine-version",
    "meminfo": "meminfo",
    "disk": "df",
    "kernel": "uname",
    "rocm_version": "rocm-version",
    "kernel_log": "kernel-log",
}
# A kept file: its content and the name it came under (an uploaded file's name, a step's path).
NamedFile = tuple[bytes, str]


class ResultError(AdapterError):
    """Tool output that cannot prove what its step needs; `field` names the input it came in.

    An AdapterError (so a BenchmarkError on a remote run); the upload API answers it with 400.
    """

    def __init__(self, problem: str, *, source: str, field: str = "file"):
        self.field = field
        super().__init__(problem, source=source)


@dataclass
class Proof:
    """What one tool output proves: the files to keep and the measurement or facts they give."""

    artifacts: list[Artifact]
    measurement: dict[str, Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    """One measurement cell, the unique key of a Measurement; its files are kept under `label`,
    so an uploaded cell and a fetched one keep the same names."""

    arm: str
    tier: int
    repetition: int

    @property
    def label(self) -> str:
        return f"{self.arm}-c{self.tier}-r{self.repetition}"


def metrics_scrape(
    text: str | bytes, *, cell: Cell, moment: str, source: str, tool: str = "vllm-metrics"
) -> tuple[dict[str, Any], Artifact]:
    """One /metrics scrape around a bench ("before" or "after"): parsed with the engine's
    metrics adapter (`tool`, runners/engine.py), and the file to keep."""
    content = text.encode() if isinstance(text, str) else text
    parsed = _parse(content, tool, source=source, field=f"metrics_{moment}")
    return parsed, Artifact(f"{cell.label}/metrics-{moment}.txt", tool, content)


def service_scrape(
    text: str | bytes, *, cell: Cell, service: str, moment: str, source: str, tool: str
) -> tuple[dict[str, Any], Artifact]:
    """One side service's metrics scrape around a bench (LMCache's own /metrics, ...), parsed
    with the service's `metrics_tool`, and the file to keep, named by the service."""
    content = text.encode() if isinstance(text, str) else text
    parsed = _parse(content, tool, source=source, field=f"{service}_metrics_{moment}")
    return parsed, Artifact(f"{cell.label}/{service}-metrics-{moment}.txt", tool, content)


# What each side service's metrics adapter says about one bench, from its two scrapes.
SERVICE_FACTS = {
    "lmcache-metrics": lookup_facts,
    "mooncake-metrics": store_facts,
    "kvbm-metrics": kvbm_facts,
}


def service_facts(tool: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A side service's facts about one bench; a service whose adapter gives no bench facts
    is named by its tool only, so the cell still says its counters were read."""
    read = SERVICE_FACTS.get(tool)
    return read(before, after) if read else {"metrics_tool": tool}


def with_side_services(
    server: dict[str, Any], facts: dict[str, dict[str, Any]], proof: str | None
) -> dict[str, Any]:
    """The engine's server facts with the side services' own (`side_services`, by name) and
    `hit_proof`: the side service whose lookup hit rate proves the offload tier's hits when
    the profile names one that ran, else "engine" (the engine's external hit rate).

    A tier behind a KV connector (LMCacheMPConnector, MooncakeStoreConnector) is its side
    services': vLLM's cache config then reports no offloading of its own, so when a side
    service's counters were read the arm's `offload_enabled` is true, and the engine's own
    report is kept beside it (`engine_offload_enabled`)."""
    named = proof if proof in facts else "engine"
    found = {**server, "side_services": facts, "hit_proof": named}
    if facts and server.get("offload_enabled") is False:
        found["engine_offload_enabled"] = server.get("offload_enabled")
        found["offload_enabled"] = True
    return found


def kept_side_services(
    server: dict[str, Any], recorded: dict[str, Any] | None, files: Mapping[str, bytes], label: str
) -> dict[str, Any]:
    """A kept cell's server facts (`server`, from the engine's scrapes) with its side services'
    read again from their kept scrapes (`<label>/<service>-metrics-before.txt` and `-after`,
    each adapter told by the page itself): what the offline verifier compares with the
    `recorded` facts. The hit proof named is the recorded one; it holds only when that
    service's kept pages were read. Unchanged when the cell kept no side service's pages and
    recorded none."""
    prefix = f"{label}/"
    names = sorted(
        name[len(prefix) : -len(SIDE_BEFORE)]
        for name in files
        if name.startswith(prefix) and name.endswith(SIDE_BEFORE) and "/" not in name[len(prefix) :]
    )
    said = (recorded or {}).get("side_services")
    if not names and not isinstance(said, dict):
        return server
    facts = {}
    for name in names:
        pages = {}
        for moment in ("before", "after"):
            source = f"{label}/{name}-metrics-{moment}.txt"
            if source not in files:
                break
            tool = adapters.detect(files[source], source=source)
            pages[moment] = adapters.parse(files[source], tool=tool, source=source)
        else:
            facts[name] = service_facts(tool, pages["before"], pages["after"])
    proof = (recorded or {}).get("hit_proof")
    return with_side_services(server, facts, proof if isinstance(proof, str) else None)


SIDE_BEFORE = "-metrics-before.txt"


def bench_proof(
    raw: bytes,
    *,
    cell: Cell,
    source: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    tool: str = "vllm-bench",
) -> Proof:
    """A bench result file (read by the engine's bench adapter, `tool`) -> the cell's
    measurement; with both /metrics scrapes (parsed), the server facts that say which arm
    really ran."""
    result = _parse(raw, tool, source=source, field="file")
    # A file may hold a sweep; the cell is the one run at its concurrency (or one unlabelled).
    runs = [run for run in result["runs"] if run.get("max_concurrency") in (None, cell.tier)]
    if len(runs) != 1:
        raise ResultError(
            f"expected one run at concurrency {cell.tier}, found {len(runs)}", source=source
        )
    artifact = Artifact(f"{cell.label}/result.json", tool, raw)
    server = _server(before, after) if before is not None and after is not None else None
    measurement = {
        "arm": cell.arm,
        "tier": cell.tier,
        "repetition": cell.repetition,
        "metrics": runs[0],
        "server": server,
        "artifact": artifact.name,
    }
    return Proof([artifact], measurement=measurement)


def bench_files_proof(
    result: NamedFile,
    *,
    cell: Cell,
    before: NamedFile | None = None,
    after: NamedFile | None = None,
    engine: Engine | None = None,
) -> Proof:
    """A bench cell from kept files (an upload): the result file and, when both were kept, the
    /metrics texts before and after it, read with the engine's adapters; without an engine,
    the adapters are told by the files' content (vLLM's when it says nothing)."""
    bench = engine.bench_tool if engine else _detected(result[0], "vllm-bench")
    if before is None or after is None:
        return bench_proof(result[0], cell=cell, source=result[1], tool=bench)
    metrics = engine.metrics_tool if engine else _detected(before[0], "vllm-metrics")
    scrape = partial(metrics_scrape, cell=cell, tool=metrics)
    first, kept_first = scrape(before[0], moment="before", source=before[1])
    last, kept_last = scrape(after[0], moment="after", source=after[1])
    proof = bench_proof(
        result[0], cell=cell, source=result[1], before=first, after=last, tool=bench
    )
    return Proof([*proof.artifacts, kept_first, kept_last], measurement=proof.measurement)


@dataclass(frozen=True)
class ServicePages:
    """One metered side service's metrics pages around an uploaded bench (None: not sent)
    and the adapter that reads them (its `metrics_tool`)."""

    name: str
    tool: str
    before: NamedFile | None = None
    after: NamedFile | None = None


def with_uploaded_services(
    proof: Proof, services: list[ServicePages], *, cell: Cell, hit_proof: str | None
) -> Proof:
    """An uploaded bench cell with its side services' pages read as the bench step reads its
    scrapes, kept under the same names and merged into the engine's server facts (which they
    need). The hit proof service's two pages are required, another's are both or neither (none:
    left out, as a failed scrape is). Unchanged without metered services."""
    if not services or proof.measurement is None:
        return proof
    facts, kept = {}, []
    for service in services:
        if service.name == hit_proof or service.before or service.after:
            first, last = (_service_page(service, cell, m, hit_proof) for m in ("before", "after"))
            facts[service.name] = service_facts(service.tool, first[0], last[0])
            kept += [first[1], last[1]]
    server = proof.measurement["server"]
    if server is None and facts:
        raise ResultError(
            "required with a side service's pages, whose facts join the engine's",
            source=cell.label,
            field="metrics_before",
        )
    server = server and with_side_services(server, facts, hit_proof)
    measurement = {**proof.measurement, "server": server}
    return Proof([*proof.artifacts, *kept], measurement=measurement, facts=proof.facts)


def _service_page(
    service: ServicePages, cell: Cell, moment: str, hit_proof: str | None
) -> tuple[dict[str, Any], Artifact]:
    page = service.before if moment == "before" else service.after
    if page is None:
        why = "the profile's hit proof" if service.name == hit_proof else "sent with the other"
        raise ResultError(
            f"{service.name}'s metrics page {moment} the bench is required ({why})",
            source=cell.label,
            field=f"{service.name}_metrics_{moment}",
        )
    return service_scrape(
        page[0], cell=cell, service=service.name, moment=moment, source=page[1], tool=service.tool
    )


def _detected(content: bytes, default: str) -> str:
    try:
        return adapters.detect(content)
    except AdapterError:
        return default  # the named adapter then says what is wrong with the file


def probe_proof(name: str, output: bytes, *, source: str, required: bool = False) -> Proof:
    """One probe's output, kept as probes/<name>.txt, and its G1 facts. An unreadable output
    gives none (G1 then finds the fact missing), or, when `required`, a ResultError."""
    tool = probe_tool(name)
    facts = probe_facts(name, output.decode("utf-8", "replace"))
    if required and not facts:
        raise ResultError(f"not readable as {tool} output for probe {name}", source=source)
    return Proof([Artifact(f"probes/{name}.txt", tool, output)], facts=facts)


def answers_proof(arm: str, output: bytes, *, source: str) -> Proof:
    """Greedy completions as JSON lines ({"text": ...} each) -> the arm's answers for G2."""
    try:
        lines = [jsonlimits.load(line) for line in output.decode().splitlines() if line.strip()]
        answers = [line["text"] if isinstance(line, dict) else str(line) for line in lines]
    except (ValueError, KeyError, TypeError) as error:
        # UnicodeDecodeError is a ValueError.
        raise ResultError(
            f"expected JSON lines with a 'text' field ({error})", source=source
        ) from error
    artifact = Artifact(f"g2/answers-{arm}.jsonl", "completions", output)
    return Proof([artifact], facts={f"answers_{arm}": answers})


def health_proof(seconds: float) -> Proof:
    """How long the offload arm's server took to answer /health (G2), when told by a person."""
    return Proof([], facts={"offload_healthy_after_s": seconds})


def _server(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    try:
        return server_facts(before, after)
    except AdapterError as error:
        # A counter that went backwards: the server restarted between the two scrapes.
        raise ResultError(error.problem, source=error.source, field="metrics_after") from error


def _parse(raw: bytes, tool: str, *, source: str, field: str) -> dict[str, Any]:
    try:
        return adapters.parse(raw, tool=tool, source=source)
    except AdapterError as error:
        raise ResultError(error.problem, source=error.source, field=field) from error


def probe_tool(name: str) -> str:
    return "gpu-inventory" if name.startswith("gpu_") else PROBE_TOOLS.get(name, name)


def probe_facts(name: str, output: str) -> dict[str, Any]:
    """The G1 facts one probe's output gives; an unreadable output gives none."""
    try:
        if name.startswith("gpu_"):
            return {"gpu_inventory": adapters.parse(output, tool="gpu-inventory")}
        if name == "offload_tier":
            return {"offload_tier": _tier(jsonlimits.load(output))}
        parsed = adapters.parse(output, tool=PROBE_TOOLS.get(name))
    except (adapters.AdapterError, ValueError, TypeError):
        return {}
    return _host_fact(name, parsed)


def _host_fact(name: str, parsed: dict[str, Any]) -> dict[str, Any]:
    if name == "vllm_version":
        return {"vllm_version": parsed.get("version"), "engine_version": parsed.get("version")}
    if name == "engine_version":
        return {"engine_version": parsed.get("version")}
    if name == "meminfo":
        return {"host_memory_bytes": parsed.get("mem_total_bytes")}
    if name == "disk":
        mounts = parsed.get("mounts") or [{}]
        return {"free_disk_bytes": mounts[-1].get("available_bytes")}
    if name == "kernel":
        return {"kernel": parsed.get("kernel_release")}
    if name == "rocm_version":
        return {"rocm_version": parsed.get("version")}
    if name == "kernel_log":
        return {"xid_events": parsed.get("xid_events")}
    return {}


def _tier(document: dict[str, Any]) -> dict[str, Any]:
    capacity = document.get("capacity_gib")
    return {
        "present": bool(document.get("present")),
        "capacity_gib": float(capacity) if capacity is not None else None,
    }


def server_facts(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """What the server's /metrics prove about one benchmark: the arm it ran and its hits.

    Engine-neutral: every metrics adapter gives the same normalized counters and a
    `cache_config` with `enable_prefix_caching` and, where the engine says it,
    `kv_offloading_size` (docs/adapters.md); a setting the engine does not export is None."""
    delta = adapters.metrics_delta(first, last)
    config = last.get("cache_config") or {}
    return {
        "engine_metrics": last.get("tool"),
        "prefix_caching": config.get("enable_prefix_caching"),
        "offload_enabled": _offload_enabled(config),
        # Tokens the offload tier gave back to the GPU (SGLang's load-back), where counted.
        "offload_load_tokens": delta["counters"].get("kv_offload_load_tokens"),
        "external_hit_rate": delta["external_prefix_cache_hit_rate"],
        "prefix_cache_hit_rate": delta["prefix_cache_hit_rate"],
        # Requests the server preempted during the bench: the G3 outlier rule can read them.
        "preemptions": delta["counters"].get("preemptions"),
        # Two scrapes cannot see the peak; the bench's own max_concurrency is checked instead.
        "peak_running": None,
    }


def _offload_enabled(config: dict[str, Any]) -> bool | None:
    """An engine that says whether its tier is on says so (SGLang: its host-cache gauges);
    vLLM says it by its offload size (None: off); a server that says neither is unknown."""
    if "offload_enabled" in config:
        value = config["offload_enabled"]
        return value if isinstance(value, bool) else None
    if "kv_offloading_size" not in config:
        return None
    return bool(config["kv_offloading_size"])
