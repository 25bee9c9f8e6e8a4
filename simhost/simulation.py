"""`simhost simulate`: a scenario's three arms run in virtual time, with the ratios a G3 gate
would compute. Pure: builds engines and runs them, returns text; standard library only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from simhost.datasets import DatasetSpec, build_workload
from simhost.engine.batching import Engine
from simhost.engine.simulate import SimResult, simulate
from simhost.host.config import HostConfig
from simhost.scenarios import ARMS, Scenario
from simhost.server.args import engine_config


def arm_values(scenario: Scenario, arm: str) -> Dict[str, object]:
    """serve option values for one arm of a scenario."""
    values: Dict[str, object] = dict(scenario.serve)
    values["enable_prefix_caching"] = arm != "recompute"
    values["kv_offloading_size"] = scenario.offload_gib if arm == "offload" else None
    return values


def scenario_dataset(scenario: Scenario, kv_tokens: int, flush_ratio: float = 1.2) -> DatasetSpec:
    bench = scenario.bench
    return DatasetSpec(
        name=str(bench["dataset_name"]),
        num_prompts=int(bench["num_prompts"]),
        seed=int(bench.get("seed", 0)),
        random_input_len=int(bench.get("random_input_len", 1024)),
        random_output_len=int(bench.get("random_output_len", 128)),
        prefix_len=int(bench.get("prefix_repetition_prefix_len", 256)),
        suffix_len=int(bench.get("prefix_repetition_suffix_len", 256)),
        num_prefixes=int(bench.get("prefix_repetition_num_prefixes", 10)),
        prefix_output_len=int(bench.get("prefix_repetition_output_len", 128)),
        flush_tokens=int(kv_tokens * flush_ratio),
    )


def run_arm(
    scenario: Scenario, arm: str, host: HostConfig, concurrency: int, seed: Optional[int] = None
) -> SimResult:
    engine = Engine(engine_config(arm_values(scenario, arm), host))
    spec = scenario_dataset(scenario, engine.config.num_gpu_blocks * engine.config.block_size)
    if seed is not None:
        spec = replace(spec, seed=seed)
    return simulate(engine, build_workload(spec), concurrency)


def simulate_scenario(
    scenario: Scenario,
    host: HostConfig,
    concurrencies: Optional[Sequence[int]] = None,
    seed: Optional[int] = None,
) -> str:
    tiers = list(concurrencies or [int(scenario.bench["max_concurrency"])])
    lines: List[str] = ["scenario {} (virtual seconds, no HTTP)".format(scenario.name)]
    for concurrency in tiers:
        results = {arm: run_arm(scenario, arm, host, concurrency, seed) for arm in ARMS}
        for arm in ARMS:
            result = results[arm]
            lines.append(
                "  c={:<3} {:<10} ttft_p50={:8.3f} s  output_throughput={:8.1f} tok/s".format(
                    concurrency, arm, result.ttft_median(), result.output_throughput()
                )
            )
        off, res, rec = (results[a] for a in ("offload", "resident", "recompute"))
        lines.append(
            "  c={:<3} offload vs resident: ttft_p50 {:+.1f} %, throughput {:+.1f} %; "
            "recompute/offload ttft_p50 {:.1f}x".format(
                concurrency,
                100 * (off.ttft_median() / res.ttft_median() - 1),
                100 * (off.output_throughput() / res.output_throughput() - 1),
                rec.ttft_median() / off.ttft_median(),
            )
        )
    return "\n".join(lines)
