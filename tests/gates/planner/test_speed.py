"""The planner's predicted TTFT band comes from simhost's model: for the demo's workload it
contains what simhost itself measures (in virtual time) on the demo's scenario."""

from __future__ import annotations

import pytest

from gates.demo.world import COLD_RECOVERY
from gates.planner.architectures import PlannerError, preset_model
from gates.planner.speed import SpeedRequest, ttft_band
from simhost.engine.predict import SessionWorkload
from simhost.host.config import resolve_host_config
from simhost.scenarios import SCENARIOS
from simhost.simulation import run_arm

SCENARIO = SCENARIOS["offload-helps"]


def demo_request(concurrency: int) -> SpeedRequest:
    workload = SessionWorkload(
        sessions=COLD_RECOVERY["num_prefixes"],
        prefix=COLD_RECOVERY["prefix_len"],
        suffix=COLD_RECOVERY["suffix_len"],
        output=COLD_RECOVERY["output_len"],
        resumes=COLD_RECOVERY["num_prompts"] // COLD_RECOVERY["num_prefixes"],
    )
    host = resolve_host_config(None, None, {})
    return SpeedRequest(
        model=preset_model("qwen3-coder-480b-a35b"),
        gpu="H100-SXM5-80GB",
        gpus=8,
        kv_tokens=int(SCENARIO.serve["num_gpu_blocks_override"]) * 16,
        workload=workload,
        concurrency=concurrency,
        tier_gib_s=host.offload_tier.bandwidth_gib_s,
    )


@pytest.mark.parametrize("concurrency", [8, 16])
def test_the_planners_band_holds_what_simhost_measures_on_the_demo_workload(concurrency):
    band = ttft_band(demo_request(concurrency))
    host = resolve_host_config(None, None, {})
    resident = run_arm(SCENARIO, "resident", host, concurrency).ttft_median()
    offload = run_arm(SCENARIO, "offload", host, concurrency).ttft_median()
    measured = offload / resident - 1
    # the band's ends are whole runs of the same engine; 0.1 covers the prompts' own order
    assert band.ttft_change_low - 0.1 <= measured <= band.ttft_change_high + 0.1
    assert band.ttft_change_low < 0


def test_the_band_needs_what_the_model_runs_on():
    request = demo_request(8)
    with pytest.raises(PlannerError):
        ttft_band(SpeedRequest(**{**request.__dict__, "gpu": "TPU"}))
