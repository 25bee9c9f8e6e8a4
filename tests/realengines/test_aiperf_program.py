"""A G3 run, driven by the real task code, on a simhost host whose profile benches with the real
`aiperf profile` (the vllm-aiperf profile's bench lines): the bench step fetches the summary
AIPerf wrote as result.json and every cell is measured from it by the aiperf adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.models import Artifact, Measurement, Profile
from tests.realengines.test_aiperf import AIPERF_BIN, PROFILE
from tests.runners.program.test_gate_programs import drive, pass_gate, start
from tests.simhosts import COLD_RECOVERY, g3_spec, local_simhost

pytestmark = pytest.mark.django_db

# Shared prefixes small enough for four AIPerf runs an arm on a 2-core machine.
WORKLOAD = {
    **COLD_RECOVERY,
    "dataset": "prefix_repetition",
    "prefix_len": 1024,
    "suffix_len": 64,
    "output_len": 16,
    "num_prefixes": 4,
    "num_prompts": 16,
}


BENCH = PROFILE["commands"]["bench"]


def aiperf_line(template: list[str], tokenizer: Path) -> list[str]:
    """A vllm-aiperf bench line run by the test-engines AIPerf, counting tokens with simhost's
    tokenizer (simhost serves no model folder to load one from)."""
    replaced = {"aiperf": str(AIPERF_BIN / "aiperf"), "{model_path}": str(tokenizer)}
    return [replaced.get(token, token) for token in template]


@pytest.fixture(autouse=True)
def tasks_run_here(monkeypatch, settings):
    from gates.services import pokes
    from worker import tasks

    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    monkeypatch.setattr(pokes, "send", lambda task_name, *args: None)
    settings.TOLLGATE_TASK_BUDGET_S = 3


@pytest.fixture
def aiperf_host(customer_org, tokenizer_dir, tmp_path):
    """simhost's serve and probe lines, AIPerf's bench lines: the engine section and the bench
    section are all that change."""
    simhost = Profile.objects.get(name="simhost")
    commands = {
        **simhost.commands,
        "engine": {"name": "vllm", "bench_tool": "aiperf"},
        "bench": {name: aiperf_line(line, tokenizer_dir) for name, line in BENCH.items()},
    }
    profile = Profile.objects.create(
        name="simhost-aiperf",
        commands=commands,
        parameters=simhost.parameters,
        required_tools=simhost.required_tools,
    )
    host = local_simhost(customer_org, tmp_path / "host", time_scale=0.2)
    host.profile = profile
    host.save(update_fields=["profile"])
    return host


def test_a_g3_run_measures_every_cell_from_the_summary_aiperf_wrote(
    actor, vendor_viewer, engagement, aiperf_host
):
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, aiperf_host)
    spec = g3_spec(workload=WORKLOAD, tiers=[4], repetitions=(4, 4))
    g3 = drive(start(actor, vendor_viewer, engagement, "G3", aiperf_host, spec))
    assert g3.outcome == "completed", g3.log
    measurements = list(Measurement.objects.filter(run=g3))
    assert {m.arm for m in measurements} == {"baseline", "offload", "recompute"}
    assert len(measurements) == 3 * 4  # three arms, four repetitions at one tier
    for measurement in measurements:
        metrics = measurement.metrics
        assert (metrics["completed"], metrics["failed"], metrics["max_concurrency"]) == (16, 0, 4)
        assert metrics["phase_type"] == "concurrency"  # a key only the aiperf adapter writes
        assert metrics["ttft_ms"]["median"] > 0
    tools = set(Artifact.objects.filter(run=g3).values_list("tool", flat=True))
    assert {"aiperf", "vllm-metrics"} <= tools
    assert g3.gate.decisions.first() is not None
