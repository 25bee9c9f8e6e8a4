"""G3 decisions: clause verdicts, validity before verdict, missing data and the plan."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gates.decisions import KNOWN_METRICS, EvidenceError, decide_g3
from gates.specs.schema import CHANGE_KINDS
from gates.specs.validation import validate_spec

ARM_SERVER = {
    "baseline": {"prefix_caching": True, "offload_enabled": False},
    "offload": {"prefix_caching": True, "offload_enabled": True},
    "recompute": {"prefix_caching": False, "offload_enabled": False},
}


def g3_spec(clauses: list[dict] | None = None, **changes) -> dict:
    spec = {
        "gate": "G3",
        "version": 3,
        "workload": {
            "dataset": "prefix_repetition",
            **{"prefix_len": 1000, "suffix_len": 100, "output_len": 64},
            **{"num_prompts": 64, "seed": 1},
        },
        "arms": {"baseline": "resident", "offload": "offload", "recompute": "recompute"},
        "tiers": [8],
        "repetitions": {"min": 4, "max": 8},
        "confidence": 0.90,
        "clauses": clauses
        or [
            {
                "metric": "ttft_p50",
                "compare": "offload/baseline",
                "change": "reduction",
                "at_least_pct": 25,
                "tiers": "all",
            }
        ],
        "validity": {
            "max_failed_pct": 1.0,
            "min_external_hit_rate": 0.2,
            "require_kv_exceeds_vram": True,
        },
        "stop_loss": {"max_attempts": 2},
    }
    spec.update(changes)
    return valid("G3", spec)


def valid(kind: str, spec: dict) -> dict:
    """`spec`, once the validator accepts it: the engines read only specs it accepted."""
    assert validate_spec(kind, spec) == [], validate_spec(kind, spec)
    return spec


def measurement(arm: str, repetition: int, ttft: float, tier: int = 8, **metrics) -> dict:
    server = {**ARM_SERVER[arm], "peak_running": tier}
    server["external_hit_rate"] = 0.6 if arm == "offload" else None
    values = {
        "completed": 64,
        "failed": 0,
        "max_concurrency": tier,
        "ttft_ms": {"median": ttft, "p99": 3 * ttft},
        "output_throughput": 1e6 / ttft,
    }
    values.update(metrics)
    return {"arm": arm, "tier": tier, "repetition": repetition, "metrics": values, "server": server}


def paired(ratios: list[float], base: float = 1000.0, tier: int = 8) -> list[dict]:
    """Baseline and offload measurements whose per-repetition ratio offload/baseline is given."""
    rows = []
    for rep, ratio in enumerate(ratios, start=1):
        rows.append(measurement("baseline", rep, base * (1 + 0.01 * rep), tier))
        rows.append(measurement("offload", rep, base * (1 + 0.01 * rep) * ratio, tier))
    return rows


CONTEXT = {"kv_exceeds_vram": True}


def only_cell(result: dict) -> dict:
    (cell,) = result["clauses"]
    return cell


def test_it_passes_when_the_whole_interval_clears_the_threshold():
    result = decide_g3(g3_spec(), paired([0.60, 0.62, 0.59, 0.61]), CONTEXT)
    cell = only_cell(result)
    assert result["verdict"] == "pass"
    assert cell["verdict"] == "pass"
    assert cell["low"] > 25 and cell["low"] <= cell["estimate"] <= cell["high"]
    assert result["plan"]["action"] == "decide"


def test_it_fails_when_the_whole_interval_misses_the_threshold():
    result = decide_g3(g3_spec(), paired([0.95, 0.97, 0.96, 0.96]), CONTEXT)
    assert result["verdict"] == "fail"
    assert only_cell(result)["high"] < 25
    assert "short of the bar 0.75x (25 %)" in result["reasons"][0]


def test_it_is_inconclusive_when_the_interval_straddles_the_threshold():
    result = decide_g3(g3_spec(), paired([0.70, 0.80, 0.74, 0.78, 0.72]), CONTEXT)
    cell = only_cell(result)
    assert result["verdict"] == "inconclusive"
    assert cell["low"] < 25 < cell["high"]
    assert result["plan"] == {
        "action": "run",
        "more": 1,
        "reason": "1 clause cell(s) undecided after 5 repetition(s); run 1 more",
    }


def test_the_interval_is_scipys_t_interval_on_the_log_ratios_at_the_looks_confidence():
    ratios = [0.61, 0.66, 0.58, 0.70, 0.64, 0.62]
    result = decide_g3(g3_spec(), paired(ratios), CONTEXT)
    cell = only_cell(result)
    logs = np.log(ratios)[: cell["n"]]
    assert cell["look"] == cell["n"] == 6  # too wide at the first look with this spread
    low, high = stats.ttest_1samp(logs, 0).confidence_interval(cell["confidence_at_look"])
    assert cell["ratio"]["low"] == pytest.approx(math.exp(low))
    assert cell["ratio"]["high"] == pytest.approx(math.exp(high))
    assert cell["low"] == pytest.approx(100 * (1 - math.exp(high)))
    assert cell["estimate"] == pytest.approx(100 * (1 - math.exp(logs.mean())))


def test_a_gain_and_a_ratio_clause_report_in_their_own_units():
    clauses = [
        {
            "metric": "output_throughput",
            "compare": "offload/baseline",
            "change": "gain",
            "at_least_pct": 29,
            "tiers": [8],
        },
        {
            "metric": "ttft_p50",
            "compare": "baseline/offload",
            "change": "ratio",
            "at_least": 1.2,
            "tiers": "all",
        },
    ]
    ratios = [0.6, 0.62, 0.59, 0.61]
    result = decide_g3(g3_spec(clauses), paired(ratios), CONTEXT)
    gain, ratio = result["clauses"]
    # throughput is 1e6/ttft here, so a 0.6 TTFT ratio is a +67 % throughput gain
    assert gain["estimate"] == pytest.approx(100 * (1 / np.exp(np.log(ratios).mean()) - 1))
    assert gain["better"] == "higher" and gain["verdict"] == "pass"
    assert ratio["estimate"] == pytest.approx(1 / np.exp(np.log(ratios).mean()))
    assert ratio["better"] == "lower" and ratio["verdict"] == "pass"


def test_a_cell_decided_at_an_early_look_keeps_that_verdict_with_more_data():
    ratios = [0.60, 0.61, 0.59, 0.60, 0.74, 0.76]  # later pairs alone would straddle 0.75
    cell = only_cell(decide_g3(g3_spec(), paired(ratios), CONTEXT))
    assert cell["verdict"] == "pass" and cell["look"] == 4 and len(cell["pairs"]) == 6


def test_every_number_needed_to_recompute_is_in_the_result_and_it_is_strict_json():
    result = decide_g3(g3_spec(), paired([0.70, 0.80, 0.74, 0.78, 0.72]), CONTEXT)
    text = json.dumps(result, allow_nan=False)
    cell = json.loads(text)["clauses"][0]
    logs = [math.log(pair["a"] / pair["b"]) for pair in cell["pairs"]][: cell["n"]]
    assert logs == pytest.approx([pair["log_ratio"] for pair in cell["pairs"]][: cell["n"]])
    half = cell["log_ratio"]["t_quantile"] * np.std(logs, ddof=1) / math.sqrt(cell["n"])
    assert cell["ratio"]["high"] == pytest.approx(math.exp(np.mean(logs) + half))
    look_index = result["inputs"]["plan"]["looks"].index(cell["look"])
    alpha = result["inputs"]["plan"]["look_alphas"][look_index]
    assert cell["confidence_at_look"] == pytest.approx(1 - alpha)


@pytest.mark.parametrize(
    ("arm", "changes", "server_changes", "check"),
    [
        ("offload", {"completed": 0}, {}, "completed"),
        ("baseline", {"completed": 90, "failed": 10}, {}, "failed_pct"),
        ("offload", {"max_concurrency": 4}, {}, "concurrency"),
        ("baseline", {}, {"peak_running": 5}, "concurrency"),
        ("offload", {}, {"offload_enabled": False}, "arm_config"),
        ("baseline", {}, {"offload_enabled": True}, "arm_config"),
        ("offload", {}, {"external_hit_rate": 0.05}, "external_hit_rate"),
    ],
)
def test_a_broken_validity_rule_makes_the_gate_invalid_and_never_fail(
    arm, changes, server_changes, check
):
    rows = paired([0.95, 0.97, 0.96])  # these clauses alone would fail
    target = next(row for row in rows if row["arm"] == arm and row["repetition"] == 2)
    target["metrics"].update(changes)
    target["server"].update(server_changes)
    result = decide_g3(g3_spec(), rows, CONTEXT)
    assert result["verdict"] == "invalid"
    assert only_cell(result)["verdict"] == "invalid"
    broken = [entry for entry in result["validity"] if entry["ok"] is False]
    assert [entry["check"] for entry in broken] == [check]
    assert f"{arm} tier 8 repetition 2" in result["reasons"][0]
    assert result["plan"]["action"] == "decide"


def test_a_recompute_arm_with_prefix_caching_on_is_invalid():
    rows = paired([0.6, 0.6, 0.6])
    rows.append(measurement("recompute", 1, 9000.0))
    rows[-1]["server"]["prefix_caching"] = True
    result = decide_g3(g3_spec(), rows, CONTEXT)
    assert result["verdict"] == "invalid"
    assert "a recompute arm ran with prefix_caching=True" in result["reasons"][0]


def test_a_kv_working_set_that_fits_in_vram_is_invalid_when_the_spec_requires_otherwise():
    result = decide_g3(g3_spec(), paired([0.6, 0.6, 0.6]), {"kv_exceeds_vram": False})
    assert result["verdict"] == "invalid"
    assert "fits in VRAM" in result["reasons"][0]


def test_unknown_server_state_is_said_but_does_not_invalidate():
    rows = paired([0.60, 0.62, 0.59, 0.61])
    for row in rows:
        row["server"] = None
    result = decide_g3(g3_spec(), rows, None)
    assert result["verdict"] == "pass"
    assert "arm_config unknown for 4 measurement(s) of arm offload" in result["notes"]
    assert "kv_exceeds_vram unknown (not invalidating)" in result["notes"]


def test_a_missing_arm_is_inconclusive_with_the_reason():
    rows = [row for row in paired([0.6, 0.6, 0.6]) if row["arm"] == "baseline"]
    result = decide_g3(g3_spec(), rows, CONTEXT)
    cell = only_cell(result)
    assert result["verdict"] == "inconclusive"
    assert cell["cause"].startswith("0 complete pair(s) of offload/baseline")
    assert cell["dropped"][0] == "repetition 1: no measurement of arm offload"


def test_a_single_pair_is_inconclusive_and_the_plan_asks_for_the_first_look():
    result = decide_g3(g3_spec(), paired([0.5]), CONTEXT)
    assert result["verdict"] == "inconclusive"
    assert result["plan"]["action"] == "run" and result["plan"]["more"] == 3


def test_two_pairs_show_the_estimate_and_each_repetition_but_no_interval_before_the_first_look():
    cell = only_cell(decide_g3(g3_spec(), paired([0.5, 0.52]), CONTEXT))
    assert cell["verdict"] == "inconclusive" and cell["estimate"] == pytest.approx(49, abs=0.1)
    assert cell["low"] is None and cell["high"] is None and cell["shown"]["interval"] is None
    assert "first look at 4 repetitions" in cell["cause"]
    assert "r1 0.5x, r2 0.52x" in cell["cause"]
    assert cell["shown"]["look"] == "before the first look (at 4 repetitions)"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -5.0, 0.0, None])
def test_a_non_finite_or_non_positive_metric_drops_the_pair_with_the_reason(bad):
    rows = paired([0.60, 0.62, 0.59, 0.61])
    rows[3]["metrics"]["ttft_ms"]["median"] = bad  # offload, repetition 2
    result = decide_g3(g3_spec(), rows, CONTEXT)
    cell = only_cell(result)
    assert [pair["repetition"] for pair in cell["pairs"]] == [1, 3, 4]
    reason = "repetition 2: ttft_p50 of arm offload is missing or not a positive finite number"
    assert cell["dropped"] == [reason]
    assert result["notes"] == [f"ttft_p50 offload/baseline reduction at tier 8: {reason}"]


def test_pairs_beyond_the_budget_are_ignored_and_said():
    cell = only_cell(decide_g3(g3_spec(), paired([0.74, 0.76] * 5), CONTEXT))
    assert len(cell["pairs"]) == 8
    assert cell["dropped"][-1] == "repetition 10: beyond repetitions.max (8)"


def test_the_plan_stops_as_soon_as_any_clause_fails():
    clauses = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        },
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 80,
            "tiers": "all",
        },
    ]
    result = decide_g3(g3_spec(clauses), paired([0.70, 0.80, 0.74, 0.76]), CONTEXT)
    assert [cell["verdict"] for cell in result["clauses"]] == ["inconclusive", "fail"]
    assert result["verdict"] == "fail"
    assert result["plan"]["action"] == "decide"


def test_the_plan_never_asks_beyond_the_budget():
    spec = g3_spec(repetitions={"min": 4, "max": 8})
    rows = paired([0.70, 0.80, 0.74, 0.78, 0.72, 0.75])  # 6 done, next look 8
    assert decide_g3(spec, rows, CONTEXT)["plan"]["more"] == 2
    rows = paired([0.70, 0.80, 0.74, 0.78, 0.72, 0.75, 0.77, 0.73])
    final = decide_g3(spec, rows, CONTEXT)["plan"]
    assert final["action"] == "decide" and "budget of 8 repetitions is spent" in final["reason"]


def test_a_missing_repetition_shifts_the_look_and_the_plan_counts_complete_pairs():
    rows = paired([0.70, 0.80, 0.74, 0.78, 0.72])
    rows = [row for row in rows if not (row["arm"] == "offload" and row["repetition"] == 5)]
    result = decide_g3(g3_spec(), rows, CONTEXT)
    assert only_cell(result)["look"] == 4
    assert result["plan"] == {
        "action": "run",
        "more": 2,
        "reason": "1 clause cell(s) undecided after 5 repetition(s); run 2 more",
    }


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda rows: rows.append(copy.deepcopy(rows[0])), "measurements[6]"),
        (lambda rows: rows[0].update(arm="ghost"), "measurements[0].arm"),
        (lambda rows: rows[0].update(tier=32), "measurements[0].tier"),
        (lambda rows: rows[0].update(repetition="2"), "measurements[0].repetition"),
        (lambda rows: rows[0].update(metrics=[]), "measurements[0].metrics"),
        (
            lambda rows: rows[0]["metrics"].update(completed="64"),
            "measurements[0].metrics.completed",
        ),
        (lambda rows: rows[0]["metrics"].update(failed=-1), "measurements[0].metrics.failed"),
        (
            lambda rows: rows[1]["server"].update(offload_enabled="yes"),
            "measurements[1].server.offload_enabled",
        ),
    ],
)
def test_malformed_measurements_raise_an_evidence_error_naming_the_field(mutate, field):
    rows = paired([0.6, 0.6, 0.6])
    mutate(rows)
    with pytest.raises(EvidenceError) as caught:
        decide_g3(g3_spec(), rows, CONTEXT)
    assert caught.value.field == field


def test_the_engine_exposes_its_metric_names_and_change_kinds():
    assert {"ttft_p50", "ttft_p99", "tpot_p50", "output_throughput"} <= KNOWN_METRICS
    assert {"reduction", "gain", "ratio"} == set(CHANGE_KINDS)


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-bench"


def real_run(name: str) -> dict:
    """A real `vllm bench serve` result, normalized (the adapters' expected output)."""
    return json.loads((FIXTURES / f"{name}.expected.json").read_text())["runs"][0]


def test_a_real_run_where_every_request_failed_makes_the_gate_invalid_not_failed():
    good = real_run("er0080__bench_serve_v0.25.1__opt-125m_cpu")
    failed = real_run("er0080__bench_serve_all_requests_failed_v0.25.1")
    rows = []
    for rep in (1, 2, 3):
        for arm, metrics in (("baseline", good), ("offload", failed)):
            rows.append(
                {
                    "arm": arm,
                    "tier": 2,
                    "repetition": rep,
                    "metrics": metrics,
                    "server": {**ARM_SERVER[arm], "external_hit_rate": 0.5},
                }
            )
    result = decide_g3(g3_spec(tiers=[2]), rows, CONTEXT)
    assert result["verdict"] == "invalid"
    assert "offload tier 2 repetition 1: no completed requests" in result["reasons"]
    assert (
        "offload tier 2 repetition 1: 100.00 % of requests failed (limit 1 %)" in result["reasons"]
    )
    assert only_cell(result)["n"] == 0  # the failed run has no TTFT at all


def test_a_real_run_at_its_concurrency_passes_validity():
    good = real_run("er0080__bench_serve_v0.25.1__opt-125m_cpu")

    def measured_again(rep: int, arm: str) -> dict:
        """The run as another repetition measures it: its TTFT a little different (the
        same value twice would be a copied measurement, `identical_values`)."""
        ttft = {**good["ttft_ms"], "median": good["ttft_ms"]["median"] * (1 + rep / 100)}
        return {**good, "ttft_ms": ttft, "output_throughput": good["output_throughput"] * rep}

    rows = [
        {
            "arm": arm,
            "tier": 2,
            "repetition": rep,
            "metrics": measured_again(rep, arm),
            "server": {**ARM_SERVER[arm], "external_hit_rate": 0.5},
        }
        for rep in (1, 2, 3, 4)
        for arm in ("baseline", "offload")
    ]
    result = decide_g3(g3_spec(tiers=[2]), rows, CONTEXT)
    assert not [check for check in result["validity"] if check["ok"] is False]
    assert result["verdict"] == "fail"  # identical arms: no reduction at all


def test_clauses_on_an_arm_the_host_cannot_run_are_not_evaluated_and_never_pass():
    clauses = [
        {
            "metric": "ttft_p50",
            "compare": "offload/baseline",
            "change": "reduction",
            "at_least_pct": 25,
            "tiers": "all",
        },
        {
            "metric": "ttft_p50",
            "compare": "recompute/baseline",
            "change": "ratio",
            "at_least": 1.5,
            "tiers": "all",
        },
    ]
    rows = [
        row
        for rep in (1, 2, 3, 4)  # the first look is at 4 repetitions
        for row in (
            measurement("baseline", rep, 100.0 + rep),
            measurement("recompute", rep, 400.0 + 3 * rep),
        )
    ]
    context = {**CONTEXT, "unavailable_arms": {"offload": "needs a GPU"}}
    result = decide_g3(g3_spec(clauses), rows, context)
    offload, recompute = result["clauses"]
    assert offload["verdict"] == "inconclusive" and offload["not_evaluated"] is True
    assert offload["cause"] == "not evaluated: the offload arm needs a GPU"
    assert recompute["verdict"] == "pass"
    assert result["verdict"] == "inconclusive"
    assert any("needs a GPU" in reason for reason in result["reasons"])
    assert result["plan"]["action"] == "decide" and result["plan"]["more"] == 0


def test_unavailable_arms_must_name_a_reason():
    with pytest.raises(EvidenceError, match="unavailable_arms"):
        decide_g3(g3_spec(), paired([0.6, 0.6, 0.6]), {"unavailable_arms": {"offload": ""}})


def lmcache_proven(rows: list[dict], lookup_hit_rate: float | None) -> list[dict]:
    """The offload cells proven by LMCache's own lookup counters, their engine's external hit
    rate high (it must not be the one read)."""
    for row in rows:
        if row["arm"] == "offload":
            facts = {"metrics_tool": "lmcache-metrics", "lookup_hit_rate": lookup_hit_rate}
            row["server"].update(
                external_hit_rate=0.9, hit_proof="lmcache", side_services={"lmcache": facts}
            )
    return rows


def test_a_side_services_lookup_hit_rate_is_the_offload_arms_hit_proof_when_named():
    result = decide_g3(g3_spec(), lmcache_proven(paired([0.6, 0.6, 0.6]), 0.05), CONTEXT)
    assert result["verdict"] == "invalid"
    broken = [entry for entry in result["validity"] if entry["ok"] is False]
    assert {entry["check"] for entry in broken} == {"external_hit_rate"}
    assert "lmcache lookup hit rate 0.050 (floor 0.2)" in result["reasons"][0]


def test_a_side_services_good_lookup_hit_rate_keeps_the_gate_valid():
    result = decide_g3(g3_spec(), lmcache_proven(paired([0.60, 0.62, 0.59, 0.61]), 0.7), CONTEXT)
    assert result["verdict"] == "pass"


def test_an_unreported_side_service_hit_rate_is_unknown_never_the_engines():
    result = decide_g3(g3_spec(), lmcache_proven(paired([0.60, 0.62, 0.59, 0.61]), None), CONTEXT)
    assert result["verdict"] == "pass"
    assert "external_hit_rate unknown for 4 measurement(s) of arm offload" in result["notes"]
    checks = [entry for entry in result["validity"] if entry["check"] == "external_hit_rate"]
    assert {(entry["ok"], entry["observed"]) for entry in checks} == {(None, None)}
    assert "lmcache lookup hit rate not reported" in checks[0]["reason"]


@pytest.mark.parametrize(
    ("server", "field"),
    [
        ({"hit_proof": 3}, "measurements[1].server.hit_proof"),
        ({"hit_proof": "lmcache", "side_services": []}, "measurements[1].server.side_services"),
        (
            {"hit_proof": "lmcache", "side_services": {"lmcache": {"lookup_hit_rate": "high"}}},
            "measurements[1].server.side_services.lmcache.lookup_hit_rate",
        ),
    ],
)
def test_a_malformed_side_service_hit_proof_is_an_evidence_error(server, field):
    rows = paired([0.6, 0.6, 0.6])
    rows[1]["server"].update(server)
    with pytest.raises(EvidenceError) as caught:
        decide_g3(g3_spec(), rows, CONTEXT)
    assert caught.value.field == field
