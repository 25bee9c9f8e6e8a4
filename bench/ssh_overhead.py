"""Per-command overhead on a reused connection: Tollgate's SSH transport vs OpenSSH's `ssh`
with a ControlMaster connection, against the same throwaway sshd, interleaved in one run.

    .venv/bin/python bench/ssh_overhead.py [--rounds 300] [--json]

Each round runs `true` once through each client, alternating the order (A B C, C B A, ...)
so drift on a shared, noisy machine hits all equally. A local `true` is timed as a reference.
Target: median ratio tollgate/openssh <= 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# `make bench` runs this file as a script; the sshd fixture lives in tests/, not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.targets import timing_target_status
from runners.transport import open_transport
from tests.sshd import SshServer, loopback_sshd


def openssh_command(server: SshServer, workdir: Path) -> list[str]:
    """`ssh` options for a multiplexed connection that trusts only the pinned host key."""
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[{server.address}]:{server.port} {server.host_key_line}\n")
    return [
        "ssh",
        "-F", "/dev/null",
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", "ControlMaster=auto",
        "-o", f"ControlPath={workdir}/control-%C",
        "-o", "ControlPersist=120",
        "-i", str(server.user_key_path),
        "-p", str(server.port),
        f"{server.username}@{server.address}",
    ]  # fmt: skip


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(rounds: int, workdir: Path) -> dict[str, list[float]]:
    with loopback_sshd(workdir) as server, open_transport(server.target()) as transport:
        ssh = openssh_command(server, workdir)

        def paramiko_true() -> None:
            transport.run(["true"], timeout=30)

        def openssh_true() -> None:
            subprocess.run([*ssh, "true"], check=True)

        def local_true() -> None:
            subprocess.run(["true"], check=True)

        clients = {
            "tollgate (paramiko)": paramiko_true,
            "openssh ControlMaster": openssh_true,
            # Reference only: what starting any process costs here (the ssh client pays it).
            "local fork+exec": local_true,
        }
        for action in clients.values():  # warm up: connect, start the master
            action()
        samples: dict[str, list[float]] = {name: [] for name in clients}
        order = list(clients)
        for round_number in range(rounds):
            for name in order if round_number % 2 == 0 else reversed(order):
                samples[name].append(timed(clients[name]))
        subprocess.run([*ssh[:-1], "-O", "exit", ssh[-1]], capture_output=True)
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {
            "median_ms": 1000 * statistics.median(values),
            "p90_ms": 1000 * percentile(values, 0.9),
            "n": len(values),
        }
        for name, values in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ssh-overhead-") as workdir:
        summary = summarize(measure(options.rounds, Path(workdir)))
    ours, theirs = summary["tollgate (paramiko)"], summary["openssh ControlMaster"]
    ratio = {key: ours[key] / theirs[key] for key in ("median_ms", "p90_ms")}
    if options.json:
        print(json.dumps({"clients": summary, "ratio": ratio}, indent=2))
    else:
        for name, figures in summary.items():
            print(
                f"{name:24} median {figures['median_ms']:6.2f} ms   p90 {figures['p90_ms']:6.2f} ms"
            )
        print(
            f"ratio tollgate/openssh   median {ratio['median_ms']:.2f}   p90 {ratio['p90_ms']:.2f}"
        )
    return timing_target_status(ratio["median_ms"] <= 2, "paramiko within 2x of ControlMaster")


if __name__ == "__main__":
    sys.exit(main())
