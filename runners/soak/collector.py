"""G4 soak, the pure part: the agent's config from a spec and a profile, what one collector read
returned (checked), each window's sample metrics (read with the adapters), and the gaps between
windows. No I/O, no Django: runners/soak/host.py talks to the host, gates/services/soak/ticks.py
stores.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from runners import adapters
from runners.artifact import Artifact
from runners.commands import fill
from runners.engine import engine_of
from runners.errors import SpecError
from runners.results import server_facts
from runners.soak import fitness
from runners.soak.sides import SOAK_ARM, agent_side_services, side_numbers, side_tools
from runners.workloads import workload_values

AGENT_FILE = "soakagent.py"
WATCH_FILE = "soakwatch.py"
PROCESSES_FILE = "soakprocesses.py"
# The window's line exactly as the agent wrote it, kept beside its raw files so that the offline
# verifier re-derives the stored sample from what the host reported (docs/evidence.md).
LINE_FILE = "window-line.json"
# A raw file that came damaged is not kept: its note is all that is left of it.
NOT_KEPT = "SHA-256 mismatch, not kept"
DEFAULT_MAX_RESTARTS = 3
# The GPU probes in the order the agent tries them, and whose GPUs each one reads.
# The bench clients whose result file a soak window reads (docs/adapters.md).
BENCH_TOOLS = ("vllm-bench", "aiperf", "sglang-bench", "guidellm")
GPU_PROBE_VENDORS = {"gpu_nvidia": "nvidia", "gpu_amd": "amd", "gpu_rocm": "amd"}


@dataclass(frozen=True)
class SoakPaths:
    """Where a soak lives on the host: one data directory for its whole life, and one wrapper
    directory per agent generation (a relaunched agent continues the same data directory)."""

    run_dir: str

    @property
    def data_dir(self) -> str:
        return f"{self.run_dir}/soak-data"

    @property
    def agent_path(self) -> str:
        return f"{self.run_dir}/{AGENT_FILE}"

    @property
    def config_path(self) -> str:
        return f"{self.data_dir}/agent.json"

    def agent_dir(self, generation: int) -> str:
        return f"{self.run_dir}/soak-agent-{generation}"


def agent_config(
    spec: dict[str, Any], commands: dict[str, Any], values: dict[str, Any], paths: SoakPaths
) -> dict[str, Any]:
    """The agent's config: the offload arm's serve command and the spec's load as a bench
    command, both filled from the profile with validated values; the window and the limits."""
    load = spec["load"]
    template = commands["bench"].get(load["dataset"])
    if template is None:
        raise SpecError(
            f"the profile has no bench command for dataset {load['dataset']!r}",
            field="load.dataset",
        )
    base_url = f"http://{values['host_address']}:{values['port']}"
    engine = engine_of(commands)
    bench_values = {
        **values,
        **workload_values(load),
        "base_url": base_url,
        "max_concurrency": load.get("max_concurrency", 8),
        "seed": load["seed"],
        "result_dir": paths.data_dir,
        "result_filename": "bench-current.json",
    }
    soak = spec.get("soak", {})
    return {
        "data_dir": paths.data_dir,
        "duration_s": spec["duration_h"] * 3600,
        "window_s": spec["window_min"] * 60,
        "serve_argv": fill(commands["serve"][SOAK_ARM], values),
        "bench_argv": fill(template, bench_values),
        "bench_result": f"{paths.data_dir}/bench-current.json",
        # The adapter that reads it; every window line carries it (windows before it: vllm-bench).
        "bench_tool": engine.bench_tool,
        "health_url": base_url + engine.health_path,
        "metrics_url": base_url + engine.metrics_path,
        **_gpu_probes(commands, values),
        "kernel_log_argv": _probe_argv(commands, values, "kernel_log"),
        "restart_on_crash": soak.get("restart_on_crash", True),
        # Restarting past the crash limit measures nothing: the gate has failed by then.
        "max_restarts": soak.get("max_restarts", spec["limits"]["max_crashes"] + 1),
        "free_space_floor_bytes": int(soak.get("free_space_floor_gib", 1.0) * 2**30),
        "heartbeat_s": 1 if spec["window_min"] * 60 < 30 else 5,
        "serve_timeout_s": values.get("serve_timeout_s", 600),
        "boot_id_file": values.get("boot_id_file"),
        **agent_side_services(commands, values, paths.run_dir),
    }


def _gpu_probes(commands: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """What the agent probes of the GPUs each window: the first of `smi_argvs` that works
    (its vendor in `smi_vendors`), and on a host where that was an AMD one also `amd_probes`
    (amd-smi's metric and process views, which carry the health AMD's inventory lacks)."""
    names, probes = _smi_names(commands, values), commands.get("probes", {})
    amd = [(name, file) for name, file in fitness.AMD_FILES.items() if name in probes]
    return {
        "smi_argvs": [_probe_argv(commands, values, name) for name in names],
        "smi_vendors": [GPU_PROBE_VENDORS.get(name) for name in names],
        "amd_probes": [
            {"name": name, "file": file, "argv": _probe_argv(commands, values, name)}
            for name, file in amd
        ],
    }


def _smi_names(commands: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """The profile's GPU probes, the host's `gpu_probe` first, then in a fixed order: the
    agent runs the first that works. (Not the profile's key order: a JSON column may keep
    keys sorted by length, which put amd-smi before nvidia-smi.)"""
    probes = commands.get("probes", {})
    names = sorted((n for n in probes if n.startswith("gpu_")), key=_gpu_probe_rank)
    wanted = values.get("gpu_probe")
    return [wanted] + [n for n in names if n != wanted] if wanted in probes else names


def _gpu_probe_rank(name: str) -> tuple[int, str]:
    order = list(GPU_PROBE_VENDORS)
    return (order.index(name) if name in order else len(order), name)


def _probe_argv(
    commands: dict[str, Any], values: dict[str, Any], name: str | None
) -> list[str] | None:
    probes = commands.get("probes", {})
    return fill(probes[name], values) if name in probes else None


@dataclass
class Window:
    """One window line as the agent wrote it, and its raw files (verified against SHA-256)."""

    line: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def seq(self) -> int:
        seq: int = self.line["seq"]
        return seq


@dataclass
class Read:
    """What one `hostctl.py soak-read` printed: the agent's state and the next windows."""

    now: float
    heartbeat: float | None
    exit: dict[str, Any] | None
    boot_id: str | None
    started: float | None
    deadline: float | None
    offset: int
    windows: list[Window]


class ReadError(ValueError):
    """The read's output is not what soak-read prints (a truncated or foreign reply)."""


def parse_read(text: str) -> Read:
    lines = text.splitlines()
    try:
        header = json.loads(lines[0])
        windows = [_window(json.loads(line)) for line in lines[1:] if line.strip()]
        if header["count"] != len(windows):
            raise ReadError(f"expected {header['count']} windows, got {len(windows)}")
        return Read(
            now=float(header["now"]),
            heartbeat=header.get("heartbeat"),
            exit=header.get("exit"),
            boot_id=header.get("boot_id"),
            started=header.get("started"),
            deadline=header.get("deadline"),
            offset=int(header["offset"]),
            windows=windows,
        )
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise ReadError(f"unreadable soak-read output: {error}") from error


def _window(record: dict[str, Any]) -> Window:
    line = json.loads(record["line"])
    if not isinstance(line.get("seq"), int) or line["seq"] < 0:
        raise ReadError("a window line without a sequence number")
    window = Window(line, text=record["line"])
    for name, item in sorted(record.get("files", {}).items()):
        content = base64.b64decode(item["base64"])
        if hashlib.sha256(content).hexdigest() != item["sha256"]:
            window.problems.append(f"{name}: {NOT_KEPT}")
            continue
        window.files[name] = content
    return window


def window_artifacts(window: Window) -> list[Artifact]:
    tools = {
        "bench.json": bench_tool(window.line) or "bench-unknown",
        "smi.txt": "gpu-inventory",
        "bench.log": "bench-log",
        fitness.KERNEL_LOG_FILE: "kernel-log",
        **{fitness.AMD_FILES[name]: tool for name, tool in fitness.AMD_TOOLS.items()},
        **side_tools(window.line),
    }
    folder = window_folder(window.seq)
    kept = [
        Artifact(f"{folder}{name}", tools.get(name, "vllm-metrics"), content)
        for name, content in window.files.items()
    ]
    if window.text:
        kept.append(Artifact(f"{folder}{LINE_FILE}", "soak-window", window.text.encode()))
    return kept


def window_folder(seq: int) -> str:
    return f"soak/w{seq:06d}/"


def window_sample(window: Window, *, watch_health: bool = True) -> dict[str, Any]:
    """The window's metrics as decide_g4 reads them, plus what the live view shows, and what
    its smi output and kernel log say of the host's health (`health`; not for a window stored
    before the soak watched it, which the verifier re-derives as it was stored)."""
    line, notes = window.line, list(window.problems)
    sample: dict[str, Any] = {
        "crashed": bool(line.get("crashed")),
        "boot_id": line.get("boot_id"),
        "agent_pid": line.get("agent_pid"),
        "server_pid": line.get("server_pid"),
        # What `health` was judged with, so that a window whose line is missing from a bundle
        # still re-derives it from its own sample.
        "server_pids": line.get("server_pids"),
        "probe_errors": line.get("probe_errors"),
        "completed": None,
        "failed": None,
        "output_throughput": None,
        "ttft_p50_ms": None,
        "ttft_p99_ms": None,
        "external_hit_rate": None,
        "kv_cache_usage": None,
        "memory_bytes": line.get("server_rss_bytes"),
        "server_rss_bytes": line.get("server_rss_bytes"),
        "gpu_memory_used_mib": None,
        "host_available_bytes": line.get("host_available_bytes"),
        "free_disk_bytes": line.get("free_disk_bytes"),
    }
    if line.get("crash"):
        sample["crash"] = line["crash"]
    _bench_numbers(window, sample, notes)
    _server_numbers(window, sample, notes)
    side_numbers(window.line, window.files, sample, notes)
    _smi_numbers(window, sample)
    if watch_health:
        sample["health"] = fitness.window_health(line, window.files)
        notes += sample["health"]["notes"]
    sample["notes"] = notes
    return sample


def _bench_numbers(window: Window, sample: dict[str, Any], notes: list[str]) -> None:
    raw = window.files.get("bench.json")
    if raw is None:
        if not sample["crashed"]:
            notes.append(f"the bench left no result (exit {window.line.get('bench_exit')})")
        return
    tool = bench_tool(window.line)
    if tool is None:
        notes.append(f"bench result unread: unknown bench tool {window.line['bench_tool']!r:.60}")
        return
    try:
        run = adapters.parse(raw, tool=tool)["runs"][0]
    except (adapters.AdapterError, IndexError) as error:
        notes.append(f"bench result unreadable: {error}")
        return
    sample["completed"], sample["failed"] = run.get("completed"), run.get("failed")
    sample["output_throughput"] = run.get("output_throughput")
    ttft = run.get("ttft_ms") or {}
    # AIPerf names its 50th percentile `median`; vllm-bench's is `p50` (--metric-percentiles),
    # and a stored vllm-bench window without it stays without it (the verifier re-derives it).
    median = None if tool == "vllm-bench" else ttft.get("median")
    sample["ttft_p50_ms"] = ttft.get("p50", median)
    sample["ttft_p99_ms"] = ttft.get("p99")


def bench_tool(line: dict[str, Any]) -> str | None:
    """The adapter of the window's bench result: the one the agent's config named (a line
    naming none was written by an agent that only ran vllm-bench); None for a name that is no
    bench client's."""
    tool = line.get("bench_tool", "vllm-bench")
    return tool if tool in BENCH_TOOLS else None


def _server_numbers(window: Window, sample: dict[str, Any], notes: list[str]) -> None:
    before, after = window.files.get("metrics-before.txt"), window.files.get("metrics-after.txt")
    if not before or not after:
        return
    try:
        # Detected: every engine's metrics page names its engine (vllm:, sglang:).
        first = adapters.parse(before)
        last = adapters.parse(after, tool=first["tool"])
        sample["external_hit_rate"] = server_facts(first, last)["external_hit_rate"]
    except adapters.AdapterError as error:
        notes.append(f"/metrics: {error}")
        return
    gauges = last.get("gauges") or {}
    sample["kv_cache_usage"] = gauges.get("kv_cache_usage")  # a fraction, at the window's end
    rss = gauges.get("process_resident_memory_bytes")
    if rss is not None:
        sample["memory_bytes"] = rss


def _smi_numbers(window: Window, sample: dict[str, Any]) -> None:
    raw = window.files.get("smi.txt")
    if not raw:
        return
    try:
        gpus = adapters.parse(raw, tool="gpu-inventory")["gpus"]
    except adapters.AdapterError:
        return
    used = [gpu.get("memory_used_mib") for gpu in gpus if gpu.get("memory_used_mib") is not None]
    sample["gpu_memory_used_mib"] = sum(used) if used else None


@dataclass(frozen=True)
class TickState:
    """The collector's view before the tick: where to read from and what to pass on."""

    paths: SoakPaths
    python: str
    token: str
    generation: int
    offset: int
    ack_seq: int
    stop: bool
    deadline: float | None
    cancel: bool
    may_relaunch: bool
    config: dict[str, Any]


@dataclass
class TickOutcome:
    """What one tick found: the read, whether the agent runs, what the tick did about it."""

    read: Read
    agent_running: bool
    relaunched: int | None = None
    cause: str = ""
    killed: bool = False
