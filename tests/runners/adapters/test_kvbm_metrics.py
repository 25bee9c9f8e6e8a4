"""Dynamo KVBM's own /metrics, as simhost's KVBM personality writes it (kvbm 1.6.1's names)."""

from __future__ import annotations

import pytest

from runners.adapters import AdapterError, detect, parse
from runners.results import service_facts
from simhost.server.kvbm import KvbmError, kvbm_values

PAGE = """# TYPE kvbm_matched_tokens counter
kvbm_matched_tokens {matched}
# TYPE kvbm_onboard_blocks_h2d counter
kvbm_onboard_blocks_h2d {onboard}
# TYPE kvbm_offload_blocks_d2h counter
kvbm_offload_blocks_d2h 40
# TYPE kvbm_host_cache_hit_rate gauge
kvbm_host_cache_hit_rate {rate}
"""


def page(matched: int, onboard: int, rate: float) -> str:
    return PAGE.format(matched=matched, onboard=onboard, rate=rate)


def test_kvbms_page_is_detected_and_its_facts_are_its_rate_and_the_growth_of_its_counters():
    before, after = page(100, 2, 0.25), page(900, 10, 0.6)
    assert detect(after) == "kvbm-metrics"
    facts = service_facts("kvbm-metrics", parse(before), parse(after))
    assert facts["lookup_hit_rate"] == 0.6
    assert facts["matched_tokens"] == 800 and facts["onboard_blocks_h2d"] == 8
    assert facts["offload_blocks_d2h"] == 0 and facts["offload_blocks_h2d"] is None


def test_a_rate_outside_zero_to_one_is_unknown_and_a_foreign_page_is_refused():
    facts = service_facts("kvbm-metrics", parse(page(1, 1, 0.1)), parse(page(2, 2, 1.5)))
    assert facts["lookup_hit_rate"] is None
    with pytest.raises(AdapterError, match="kvbm_"):
        parse("# TYPE x counter\nx_total 1\n", tool="kvbm-metrics")


DYNAMO = {"kv_connector": "DynamoConnector", "kv_role": "kv_both"}


def test_simhost_sizes_kvbms_tier_and_opens_its_metrics_port_from_its_environment():
    values: dict = {"kv_transfer_config": DYNAMO}
    environ = {"DYN_KVBM_CPU_CACHE_GB": "10", "DYN_KVBM_METRICS": "true"}
    assert kvbm_values(values, environ) == 6880
    assert values["kv_offloading_size"] == pytest.approx(10e9 / 2**30)
    environ["DYN_KVBM_METRICS_PORT"] = "7001"
    assert kvbm_values({"kv_transfer_config": DYNAMO}, environ) == 7001
    assert kvbm_values({"kv_transfer_config": DYNAMO}, {"DYN_KVBM_CPU_CACHE_GB": "1"}) is None
    with pytest.raises(KvbmError, match="DYN_KVBM_CPU_CACHE_GB"):
        kvbm_values({"kv_transfer_config": DYNAMO}, {})
    with pytest.raises(KvbmError, match="DYN_KVBM_METRICS_PORT"):
        kvbm_values({"kv_transfer_config": DYNAMO}, {**environ, "DYN_KVBM_METRICS_PORT": "x"})
