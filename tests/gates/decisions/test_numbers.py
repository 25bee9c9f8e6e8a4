"""The numeric helpers the engine and the charts share: what counts as a number and a metric."""

from __future__ import annotations

import math

import pytest

from gates.decisions.numbers import finite_float, is_number, metric_value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        (-1e308, -1e308),
        (True, None),
        (math.nan, None),
        (math.inf, None),
        (10**400, None),
        ("3", None),
        (None, None),
        ([1.0], None),
    ],
)
def test_finite_float_reads_only_finite_json_numbers(value, expected):
    assert finite_float(value) == expected


def test_a_bool_is_not_a_number_though_python_calls_it_an_int():
    assert is_number(0) and is_number(0.5) and not is_number(False) and not is_number("1")


@pytest.mark.parametrize(
    ("metrics", "name", "expected"),
    [
        ({"ttft_ms": {"median": 120.0, "p99": 300.0}}, "ttft_p50", 120.0),
        ({"ttft_ms": {"median": 120.0, "p99": 300.0}}, "ttft_p99", 300.0),
        ({"output_throughput": 41.5}, "output_throughput", 41.5),
        ({"ttft_ms": 120.0}, "ttft_p50", None),
        ({}, "tpot_mean", None),
        ({"output_throughput": "fast"}, "output_throughput", "fast"),
    ],
)
def test_metric_value_reads_the_raw_value_a_spec_metric_names(metrics, name, expected):
    assert metric_value(metrics, name) == expected
