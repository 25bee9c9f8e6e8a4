"""A G4 soak, COMPRESSED, on a simhost host behind a loopback sshd whose profile benches with
the real `aiperf profile` (the vllm-aiperf profile's bench lines): the agent runs AIPerf every
window, its summary becomes the window's bench.json, and the collector reads it with the
`aiperf` adapter (the agent's config and every window line name the bench tool)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.models import Artifact, Profile, SoakSample
from tests.realengines.test_aiperf_program import BENCH, aiperf_line
from tests.runners.soak.test_soak import (  # noqa: F401 (tasks_run_here: a fixture)
    LOOSE_DRIFT,
    assert_every_seq_once,
    begin,
    g4_spec,
    soak_host,
    tasks_run_here,
    tick_until_ended,
)
from tests.sshd import SshServer, loopback_sshd

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
# AIPerf starts its services for every run: a run took about 35 s on a loaded 2-core machine
# (2026-12-03), so each window stretches to its bench and a 30 s soak stored one window.
SOAK_S = 80
PROMPTS = 16


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshServer]:
    workdir = tmp_path / "sshd"
    workdir.mkdir()
    with loopback_sshd(workdir) as server:
        yield server


@pytest.fixture
def aiperf_soak_host(customer_org, own_sshd, tokenizer_dir, tmp_path):
    host = soak_host(customer_org, own_sshd, tmp_path)
    simhost = Profile.objects.get(name="simhost")
    commands = {
        **simhost.commands,
        "engine": {"name": "vllm", "bench_tool": "aiperf"},
        "bench": {name: aiperf_line(line, tokenizer_dir) for name, line in BENCH.items()},
    }
    host.profile = Profile.objects.create(
        name="simhost-aiperf",
        commands=commands,
        parameters=simhost.parameters,
        required_tools=simhost.required_tools,
    )
    host.save(update_fields=["profile"])
    return host


def test_a_soak_benched_by_aiperf_reads_every_window_from_aiperfs_summary(
    actor, vendor_viewer, engagement, aiperf_soak_host
):
    spec = g4_spec(seconds=SOAK_S, **LOOSE_DRIFT)
    # simhost's own cold_recovery bench flushes VRAM inside each run; AIPerf's line only sends
    # prefixed prompts, so its prefixes together outgrow the compact scenario's 65k-token VRAM
    # cache: each window finds the previous one's prefixes evicted to the offload tier.
    spec["load"].update(prefix_len=8192, num_prefixes=16, num_prompts=PROMPTS)
    run = begin(actor, vendor_viewer, engagement, aiperf_soak_host, spec)
    run = tick_until_ended(run, timeout=SOAK_S + 240)
    assert (run.state, run.outcome) == ("finished", "completed"), run.reason
    seqs = assert_every_seq_once(run)
    for sample in SoakSample.objects.filter(run=run).order_by("seq"):
        metrics = sample.metrics
        assert (metrics["completed"], metrics["failed"]) == (PROMPTS, 0), metrics["notes"]
        assert metrics["output_throughput"] > 0
        assert 0 < metrics["ttft_p50_ms"] <= metrics["ttft_p99_ms"]
        assert not [note for note in metrics["notes"] if "bench" in note], metrics["notes"]
    benches = Artifact.objects.filter(run=run, name__endswith="/bench.json")
    assert benches.count() == len(seqs)
    assert set(benches.values_list("tool", flat=True)) == {"aiperf"}
    assert len(seqs) >= 2
    decision = run.decisions.get()
    checks = {row["check"]: row for row in decision.clauses}
    assert checks["crashes"]["observed"] == 0
    assert checks["offload_hits"]["verdict"] == "pass", checks["offload_hits"]
