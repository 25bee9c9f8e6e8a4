"""Two runs compared cell by cell from the engine's own decisions: identical runs change by
nothing, a known shift is found on the right side, and runs that measured different things
are said to be so instead of compared."""

from __future__ import annotations

import copy
import math

import pytest

from gates.decisions import decide_g3
from gates.history.comparison import RunRecord, compare_runs
from tests.gates.charts.test_charts import CONTEXT, synthetic_measurements, template

SPEC = template("G3")


def record(run_id: int, rows: list[dict], spec: dict = SPEC, **extra) -> RunRecord:
    cells = decide_g3(spec, rows, CONTEXT)["clauses"]
    values = {
        "run_id": run_id,
        "attempt": run_id,
        "gate_id": 3,
        "gate_kind": "G3",
        "engagement_id": 1,
        "engagement": "480B long context",
        "spec_version": spec["version"],
        "spec": spec,
        "decision_id": 10 + run_id,
        "verdict": "pass",
        "cells": cells,
    }
    return RunRecord(**(values | extra))


def faster_offload(rows: list[dict], factor: float) -> list[dict]:
    shifted = copy.deepcopy(rows)
    for row in shifted:
        if row["arm"] == "offload":
            row["metrics"]["ttft_ms"]["median"] *= factor
    return shifted


def test_a_run_compared_with_itself_changes_by_nothing_in_every_cell():
    rows = synthetic_measurements(8, seed=3)
    comparison = compare_runs(record(1, rows), record(2, rows))
    assert comparison.comparable and len(comparison.rows) == 8
    for row in comparison.rows:
        assert row.change.log_change == pytest.approx(0.0, abs=1e-12)
        assert row.reading == "no distinguishable change"


def test_a_known_shift_in_offload_ttft_is_found_and_read_as_better():
    before = synthetic_measurements(8, seed=3)
    after = faster_offload(before, 0.8)  # the same noise: the change is exactly the shift
    comparison = compare_runs(record(1, before), record(2, after))
    cells = {row.key: row for row in comparison.rows}
    reduction = cells["ttft_p50:offload/baseline:reduction@c=16"]
    assert reduction.change.log_change == pytest.approx(math.log(0.8))
    assert reduction.change.low < math.log(0.8) < reduction.change.high < 0
    assert reduction.reading == "better"  # a lower offload/baseline TTFT
    # recompute/offload grows as offload gets faster: higher is better there too
    assert cells["ttft_p50:recompute/offload:ratio@c=16"].reading == "better"
    assert reduction.before.estimate < reduction.after.estimate


def test_runs_on_different_workloads_are_not_compared_and_say_which_field_differs():
    other = copy.deepcopy(SPEC) | {"version": 2}
    other["workload"] = {**SPEC["workload"], "prefix_len": 16000}
    rows = synthetic_measurements(8)
    comparison = compare_runs(record(1, rows), record(2, rows, spec=other))
    assert not comparison.comparable and comparison.rows == []
    assert "workload.prefix_len" in comparison.reasons[0]


def test_runs_of_different_gate_kinds_or_without_repetitions_are_not_compared():
    rows = synthetic_measurements(4)
    g3 = record(1, rows)
    g2 = RunRecord(**{**g3.__dict__, "run_id": 2, "attempt": 1, "gate_kind": "G2", "cells": []})
    assert "different things" in compare_runs(g3, g2).reasons[0]
    assert "only G3" in compare_runs(g2, g2).reasons[0]
    undecided = RunRecord(**{**g3.__dict__, "run_id": 5, "attempt": 5, "decision_id": None})
    assert compare_runs(g3, undecided).reasons == ["run #5 has no decision yet"]


def test_runs_of_two_engagements_on_one_workload_are_compared_with_a_note():
    rows = synthetic_measurements(8)
    theirs = record(2, rows, engagement_id=2, engagement="Contoso chat", gate_id=9)
    comparison = compare_runs(record(1, rows), theirs)
    assert comparison.comparable and "two engagements" in comparison.notes[0]


def test_each_arm_is_compared_on_its_own_so_a_moved_ratio_names_the_arm_that_moved():
    before = synthetic_measurements(8, seed=3)
    after = faster_offload(before, 0.8)
    comparison = compare_runs(record(1, before), record(2, after))
    cells = {row.key: row for row in comparison.rows}
    offload, baseline = cells["ttft_p50:offload/baseline:reduction@c=16"].arms
    assert (offload.arm, baseline.arm) == ("offload", "baseline")
    assert offload.unit == "ms" and offload.metric == "ttft_p50" and offload.tier == 16
    assert offload.change.log_change == pytest.approx(math.log(0.8))
    assert offload.after == pytest.approx(offload.before * 0.8)
    assert offload.reading == "better"  # a lower TTFT
    assert baseline.change.log_change == pytest.approx(0.0, abs=1e-12)
    assert baseline.reading == "no distinguishable change"
    # Each arm's metric at each tier once, however many clauses measure against it.
    keys = [(arm.metric, arm.tier, arm.arm) for arm in comparison.arm_rows()]
    assert len(keys) == len(set(keys))
    assert ("ttft_p50", 16, "offload") in keys and ("ttft_p50", 16, "baseline") in keys


def test_a_slower_baseline_alone_moves_the_ratio_and_is_read_as_worse_for_the_baseline():
    before = synthetic_measurements(8, seed=5)
    after = copy.deepcopy(before)
    for row in after:
        if row["arm"] == "baseline":
            row["metrics"]["ttft_ms"]["median"] *= 1.3
    comparison = compare_runs(record(1, before), record(2, after))
    cell = {row.key: row for row in comparison.rows}["ttft_p50:offload/baseline:reduction@c=16"]
    offload, baseline = cell.arms
    assert cell.reading == "better"  # the ratio fell, though the product did not change
    assert offload.reading == "no distinguishable change"
    assert baseline.reading == "worse" and baseline.change.ratio == pytest.approx(1.3)
