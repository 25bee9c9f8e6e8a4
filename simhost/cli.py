"""`python -m simhost`: the command line of the vLLM host TEST DOUBLE.

Subcommands serve, bench, smi, version, tier, meminfo, dmesg, simulate, scenarios. Bad flags get one
line on stderr and exit status 2. aiohttp and prometheus_client are imported only by serve and
bench, so the probes run on a bare Python 3.9.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from simhost import __version__, lmcache, mooncake
from simhost.host.config import (
    HOST_PRESETS,
    ForeignProcess,
    HeldMemory,
    HostConfig,
    HostConfigError,
    resolve_host_config,
    tier_report,
)
from simhost.host.kernellog import render_kernel_log
from simhost.host.smi import (
    FORMATS,
    GpuLive,
    SmiQueryError,
    SmiUnavailableError,
    render,
)
from simhost.host.statefile import read_live_states, state_dir
from simhost.scenarios import ARMS, SCENARIOS, bench_command, serve_command
from simhost.server.args import UsageError, add_serve_arguments, serve_settings
from simhost.server.sglang import serve_namespace

DESCRIPTION = (
    "simhost: a TEST DOUBLE emulating a vLLM GPU host (no GPU, no model). "
    "Its timings come from a KV-cache model, not from real hardware."
)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as a single line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, "{}: error: {} (see --help)\n".format(self.prog, message))


def _host_arguments() -> OneLineParser:
    common = OneLineParser(add_help=False)
    group = common.add_argument_group("emulated host")
    group.add_argument("--host-config", metavar="PATH", help="host config JSON")
    group.add_argument("--host-preset", metavar="NAME", help=", ".join(sorted(HOST_PRESETS)))
    return common


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="simhost", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version="simhost " + __version__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    common = [_host_arguments()]
    serve = commands.add_parser(
        "serve",
        parents=common,
        help="emulated vLLM OpenAI server",
        description="A TEST DOUBLE of `vllm serve`: OpenAI routes, /health and /metrics, "
        "timed by a KV-cache model instead of a GPU.",
    )
    add_serve_arguments(serve)
    bench = commands.add_parser(
        "bench",
        parents=common,
        help="load client, vLLM result file",
        description="The load client of the simhost test double; flags and result file as "
        "`vllm bench serve`.",
    )
    from simhost.bench.args import add_bench_arguments

    add_bench_arguments(bench)
    _add_sglang_commands(commands, common)
    smi = commands.add_parser("smi", parents=common, help="GPU inventory like nvidia/rocm/amd-smi")
    smi.add_argument("--format", choices=FORMATS, help="default: by GPU vendor")
    smi.add_argument("--query-gpu", help="nvidia-csv fields, comma separated")
    smi.add_argument("--csv-options", default="", help="nvidia-csv: noheader,nounits")
    smi.add_argument("--state-dir", help="where running servers publish live GPU use")
    commands.add_parser("version", parents=common, help="print the vLLM version line")
    tier = commands.add_parser("tier", parents=common, help="report the offload tier")
    tier.add_argument("--json", action="store_true")
    commands.add_parser("meminfo", parents=common, help="host memory as /proc/meminfo shows it")
    commands.add_parser(
        "dmesg",
        parents=common,
        help="kernel log as `dmesg --time-format iso` (XID or amdgpu faults)",
    )
    _add_simulate(commands, common)
    lmcache_server = commands.add_parser(
        "lmcache-server",
        help="LMCache's MP server HTTP frontend: /healthcheck and its lookup counters",
        description="A TEST DOUBLE of LMCache's multi-process server's HTTP frontend: its "
        "lookup counters are what the emulated engine's offload tier looked up and hit.",
    )
    lmcache.add_arguments(lmcache_server)
    mooncake_master = commands.add_parser(
        "mooncake-master",
        help="the Mooncake store's master with its HTTP metadata server: health and counters",
        description="A TEST DOUBLE of mooncake_master: /health, master_* counters off the "
        "emulated engine's offload tier, and the HTTP metadata server's /metadata store.",
    )
    mooncake.add_arguments(mooncake_master)
    scenarios = commands.add_parser("scenarios", help="list scenarios or print one's commands")
    scenarios.add_argument("name", nargs="?", choices=sorted(SCENARIOS))
    return parser


def _add_simulate(
    commands: argparse._SubParsersAction[OneLineParser], common: List[OneLineParser]
) -> None:
    simulate = commands.add_parser(
        "simulate", parents=common, help="run a scenario in virtual time, no HTTP"
    )
    simulate.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    simulate.add_argument("--max-concurrency", type=int, action="append", metavar="N")
    simulate.add_argument("--seed", type=int)


def _add_sglang_commands(commands: Any, common: Sequence[argparse.ArgumentParser]) -> None:
    """The SGLang personality: its server's and its bench client's command lines."""
    from simhost.bench.sglang import add_bench_serving_arguments
    from simhost.server.sglang import add_launch_server_arguments

    add_launch_server_arguments(
        commands.add_parser(
            "launch_server",
            parents=common,
            help="emulated SGLang server",
            description="A TEST DOUBLE of `python -m sglang.launch_server` (HiCache flags).",
        )
    )
    add_bench_serving_arguments(
        commands.add_parser(
            "bench_serving",
            parents=common,
            help="load client, SGLang result lines",
            description="The load client with `python -m sglang.bench_serving`'s flags and "
            "its --output-file JSON lines.",
        )
    )


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _live_gpus(host: HostConfig, directory: str) -> List[GpuLive]:
    """Sum the GPU memory of every live server; idle GPUs show a few MiB used."""
    used = [0.0] * host.gpu_count
    busy = [0.0] * host.gpu_count
    for state in read_live_states(directory):
        for index in range(min(host.gpu_count, len(state.memory_used_mib))):
            used[index] += state.memory_used_mib[index]
            busy[index] = max(busy[index], state.utilization_pct[index])
    held: List[Union[ForeignProcess, HeldMemory]] = [
        *host.gpu_health.foreign_processes,
        *host.gpu_health.held_memory,
    ]
    for process in held:  # someone else's job holds memory too, seen by nvidia-smi or not
        if 0 <= process.gpu < host.gpu_count:
            used[process.gpu] += process.used_memory_mib
    return [GpuLive(max(1.0, min(u, host.gpu_memory_mib)), b) for u, b in zip(used, busy)]  # noqa: B905 (3.9)


def cmd_smi(args: argparse.Namespace, host: HostConfig, environ: Mapping[str, str]) -> int:
    fmt = args.format or ("nvidia-xml" if host.gpu_vendor == "nvidia" else "rocm-json")
    live = _live_gpus(host, args.state_dir or state_dir(environ, args.host_config))
    options = [o.strip() for o in args.csv_options.split(",") if o.strip()]
    try:
        query = (
            args.query_gpu or "index,name,memory.total,memory.used,utilization.gpu,driver_version"
        )
        sys.stdout.write(render(fmt, host, live, datetime.now(), query, options))
    except SmiUnavailableError as error:
        print(str(error), file=sys.stderr)
        return 127
    except SmiQueryError as error:
        print(str(error), file=sys.stderr)
        return 2
    return 0


def cmd_tier(args: argparse.Namespace, host: HostConfig) -> int:
    report = tier_report(host)
    if args.json:
        print(json.dumps(report))
    elif report["present"]:
        print("offload tier: {kind}, {capacity_gib} GiB, {bandwidth_gib_s} GiB/s".format(**report))
    else:
        print("offload tier: none")
    return 0


def cmd_meminfo(host: HostConfig) -> int:
    total_kb = int(host.host_memory_gib * 1024 * 1024)
    print("MemTotal:       {:>12} kB".format(total_kb))
    print("MemFree:        {:>12} kB".format(int(total_kb * 0.9)))
    print("MemAvailable:   {:>12} kB".format(int(total_kb * 0.95)))
    return 0


def cmd_dmesg(host: HostConfig) -> int:
    sys.stdout.write(render_kernel_log(host, datetime.now(timezone.utc)))
    return 0


def cmd_scenarios(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else sorted(SCENARIOS)
    for name in names:
        scenario = SCENARIOS[name]
        print("{}: {}".format(name, scenario.summary))
        if not args.name:
            continue
        for arm in ARMS:
            print(
                "  {} arm:  python -m simhost {}".format(
                    arm, " ".join(serve_command(scenario, arm, 8000))
                )
            )
        print(
            "  bench:  python -m simhost {}".format(
                " ".join(bench_command(scenario, "http://127.0.0.1:8000"))
            )
        )
    return 0


def cmd_simulate(args: argparse.Namespace, host: HostConfig) -> int:
    from simhost.simulation import simulate_scenario

    report = simulate_scenario(SCENARIOS[args.scenario], host, args.max_concurrency, args.seed)
    print(report)
    return 0


def cmd_serve(args: argparse.Namespace, host: HostConfig, environ: Mapping[str, str]) -> int:
    settings = serve_settings(args, host, environ, _read)
    from simhost.server.app import serve_forever

    try:
        return asyncio.run(serve_forever(settings))
    except OSError as error:
        print(
            "simhost serve: cannot listen on {}:{} ({})".format(args.host, args.port, error),
            file=sys.stderr,
        )
        return 1


def cmd_bench(args: argparse.Namespace) -> int:
    from simhost.bench.args import bench_settings
    from simhost.bench.http import HttpError
    from simhost.bench.run import BenchError, run_and_report

    settings = bench_settings(args)
    try:
        return run_and_report(settings)
    except (BenchError, HttpError) as error:
        print("simhost bench: {}".format(error), file=sys.stderr)
        return 1


def cmd_bench_serving(args: argparse.Namespace) -> int:
    from simhost.bench.args import bench_settings
    from simhost.bench.http import HttpError
    from simhost.bench.run import BenchError, run_and_report
    from simhost.bench.sglang import bench_namespace, write_sglang_result

    namespace = bench_namespace(args)
    try:
        status = run_and_report(bench_settings(namespace))
    except (BenchError, HttpError) as error:
        print("simhost bench_serving: {}".format(error), file=sys.stderr)
        return 1
    if status == 0:
        write_sglang_result(args, namespace)
    return status


def _missing_dependency(error: ImportError) -> int:
    print(
        "simhost {}: needs the {} package (pip install aiohttp prometheus_client)".format(
            "serve/bench", error.name
        ),
        file=sys.stderr,
    )
    return 2


def _dispatch(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.command == "scenarios":
        return cmd_scenarios(args)
    if args.command == "lmcache-server":
        return lmcache.serve(args)
    if args.command == "mooncake-master":
        return mooncake.serve(args)
    host = resolve_host_config(args.host_config, args.host_preset, environ)
    handlers: Dict[str, Callable[[], int]] = {
        "serve": lambda: cmd_serve(args, host, environ),
        "bench": lambda: cmd_bench(args),
        "launch_server": lambda: cmd_serve(serve_namespace(args, host), host, environ),
        "bench_serving": lambda: cmd_bench_serving(args),
        "smi": lambda: cmd_smi(args, host, environ),
        "version": lambda: print(host.vllm_version) or 0,
        "tier": lambda: cmd_tier(args, host),
        "meminfo": lambda: cmd_meminfo(host),
        "dmesg": lambda: cmd_dmesg(host),
        "simulate": lambda: cmd_simulate(args, host),
    }
    try:
        return handlers[args.command]()
    except ImportError as error:
        if error.name not in ("aiohttp", "prometheus_client"):
            raise
        return _missing_dependency(error)


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(args, os.environ if environ is None else environ)
    except (HostConfigError, UsageError) as error:
        print("simhost {}: error: {}".format(args.command, error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
