"""What the pages say in words and numbers: gate labels and next actions, number formats,
clause units and comparisons (pure, no database)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gates.decisions.units import clause_comparison, clause_unit
from gates.pages.formatting import duration, fact, fact_label, number, said_once, shown
from gates.pages.overview import (
    did_not_pass,
    gate_label,
    gate_summary,
    gate_tone,
    next_action,
    run_summary,
)


@dataclass
class G:
    kind: str
    state: str = "locked"
    verdict: str = "pending"
    stop_loss_review: bool = False
    readout: dict | None = None


def latest(**brief) -> dict:
    return {"latest_decision": brief}


@pytest.mark.parametrize(
    "gate, label, tone",
    [
        (G("G1", "decided", "pass"), "pass", "verdict-pass"),
        (G("G3", "ready", "fail"), "fail", "verdict-fail"),
        (G("G2", "ready"), "ready", "state-ready"),
        (G("G4"), "locked", "state-locked"),
        (G("G2", "running", "fail"), "running", "state-running"),
        (G("G2", "waived", "fail"), "waived", "state-waived"),
        (G("G1", "decided", "infra_error"), "infra error", "verdict-infra_error"),
        (
            G("G4", "decided", "pass", readout=latest(compressed=True)),
            "pass · compressed",
            "verdict-pass",
        ),
        (
            G("G3", "decided", "pass", readout=latest(rehearsal=True)),
            "pass · rehearsal",
            "verdict-pass",
        ),
        (
            G("G3", "decided", "acknowledged_underpowered"),
            "acknowledged underpowered",
            "verdict-acknowledged_underpowered",
        ),
    ],
)
def test_a_gate_is_labelled_and_coloured_by_its_verdict_or_state(gate, label, tone):
    assert (gate_label(gate), gate_tone(gate)) == (label, tone)


def test_the_next_action_is_the_first_gate_not_cleared():
    passed = G("G1", "decided", "pass")
    assert next_action("active", [passed, G("G2", "ready"), G("G3")]) == "Start a G2 run"
    failed = G("G2", "ready", "fail")
    assert next_action("active", [passed, failed]) == "Re-run G2 (last verdict fail)"
    review = G("G3", "decided", "fail", stop_loss_review=True)
    assert next_action("active", [passed, review]).startswith("Stop-loss review of G3")
    assert next_action("active", [passed, G("G2", "running")]) == "G2 is running"
    assert next_action("stopped", [passed]) == "Stopped at stop-loss"


@pytest.mark.parametrize(
    "value, text",
    [
        (8, "8"),
        (8.0, "8"),
        (0.12345, "0.1235"),
        (26.456, "26.46"),
        (1234.6, "1,235"),
        (None, "—"),
        (-3.5, "-3.5"),
        (12000, "12,000"),
        ("x", "x"),
    ],
)
def test_numbers_read_as_a_person_writes_them(value, text):
    assert number(value) == text


def test_lists_none_and_durations_read_plainly():
    assert shown(["H100", "H100"]) == "H100, H100" and shown(None) == "—" and shown(True) == "yes"
    assert [duration(s) for s in (0.25, 4.2, 42, 185, 8040)] == [
        "250 ms",
        "4.2 s",
        "42 s",
        "3 min 5 s",
        "2 h 14 min",
    ]


@pytest.mark.parametrize(
    "row, unit, comparison",
    [
        ({"metric": "ttft_p50", "change": "reduction"}, "%", "reduction"),
        ({"metric": "output_throughput", "change": "gain"}, "%", "gain"),
        ({"metric": "ttft_p50", "change": "ratio"}, "x", "ratio"),
        ({"check": "gpu_count"}, "GPUs", "equals"),
        ({"check": "host_memory_min_gib"}, "GiB", "at_least"),
        ({"check": "driver_min"}, "version", "at_least"),
        ({"check": "gpu_model"}, None, "matches"),
        ({"check": "health"}, "s", "at_most"),  # G2: seconds until healthy, at most the timeout
        ({"check": "made_up"}, None, None),
    ],
)
def test_each_clause_says_its_unit_and_comparison(row, unit, comparison):
    assert (clause_unit(row), clause_comparison(row)) == (unit, comparison)


def test_a_measurement_panel_carries_its_numbers_as_a_table():
    from gates.pages.dashboards import measurement_table

    rows = [
        {"repetition": 1, "tier": 8, "arm": "offload", "metrics": {"ttft_ms": {"median": 7530.0}}}
    ]
    table = measurement_table(rows, ["ttft_p50"])
    assert table.headers == ["Repetition", "Tier", "Arm", "TTFT p50, ms"]
    assert table.rows == [[1, 8, "offload", 7530.0]]


def test_times_carry_their_zone():
    from datetime import UTC, datetime

    from gates.pages.formatting import moment

    assert moment(datetime(2026, 12, 1, 13, 18, 4, tzinfo=UTC)) == "2026-12-01 13:18:04 UTC"
    assert moment(None) == "—"


def test_inconclusive_is_never_called_failed_and_a_waiver_is_never_every_gate_passed():
    assert did_not_pass("inconclusive") == "did not pass (latest verdict: inconclusive)"
    assert did_not_pass("fail") == "failed"
    review = G("G3", "decided", "inconclusive", stop_loss_review=True)
    assert "fail" not in next_action("active", [G("G1", "decided", "pass"), review])
    waived = [G("G1", "decided", "pass"), G("G2", "waived", "inconclusive")]
    assert next_action("passed", waived) == "Done: G2 waived, every other gate passed"
    assert next_action("active", waived) == "G2 waived, every other gate passed"
    assert next_action("passed", waived[:1]) == "Done: every gate passed"


def test_a_summary_names_the_deciding_clause_with_its_number_and_bar_and_who_acts():
    clauses = [
        {
            "metric": "ttft_p50",
            "change": "reduction",
            "tiers": 8,
            "unit": "%",
            "verdict": "pass",
            "estimate": 40.0,
            "low": 35.0,
            "high": 45.0,
            "threshold": 29.0,
        },
        {
            "metric": "ttft_p50",
            "change": "reduction",
            "tiers": 16,
            "unit": "%",
            "verdict": "inconclusive",
            "estimate": 30.25,
            "low": 26.5,
            "high": 34.0,
            "threshold": 29.0,
            "cause": "the interval straddles the bar",
        },
    ]
    summary = gate_summary(G("G3", "decided", "inconclusive"), clauses)
    assert summary["happened"] == "G3 did not pass: inconclusive."
    assert summary["deciding"] == (
        "TTFT p50 reduction at c=16: 30.25 % (interval 26.50 % to 34.00 %), bar 29 %: "
        "the interval straddles the bar"
    )
    assert summary["who"] == "vendor" and "re-runs G3" in summary["next"]
    review = gate_summary(G("G3", "decided", "fail", stop_loss_review=True), clauses)
    assert review["who"] == "vendor" and "stops the engagement or waives" in review["next"]
    assert gate_summary(G("G4", "decided", "pass"), [])["who"] == "nobody"
    assert gate_summary(G("G2", "running"), [])["who"] == "nobody"
    check = {
        "metric": "error_rate",
        "unit": "%",
        "verdict": "fail",
        "observed": 1.25,
        "expected": 0.5,
        "cause": "too many failed requests",
    }
    assert (
        "error rate: observed 1.25 %, expected 0.5 %"
        in gate_summary(G("G4", "decided", "fail"), [check])["deciding"]
    )


def test_a_run_that_ended_without_a_verdict_says_why_and_that_it_does_not_count():
    summary = run_summary(
        G("G3", "ready"),
        state="finished",
        outcome="infra_error",
        reason="ssh refused",
        verdict=None,
        clauses=[],
    )
    assert summary["happened"] == "The run ended without a verdict (infra error): ssh refused."
    assert summary["deciding"] == "It does not count toward stop-loss."
    assert summary["who"] == "vendor"


def test_a_reason_repeated_for_each_gpu_is_said_once():
    reason = "; ".join(f"GPU {i}: nvidia-smi reported ERR! for memory" for i in range(8))
    assert said_once(reason) == "GPUs 0-7: nvidia-smi reported ERR! for memory"
    assert said_once("GPU 2: lost\nssh refused\nGPU 5: lost") == "GPUs 2, 5: lost; ssh refused"
    assert said_once("ssh refused") == "ssh refused" and said_once("") == ""
    assert said_once("GPU 3: hot") == "GPU 3: hot"


def test_inventory_facts_read_as_words_not_python():
    assert fact(["NVIDIA H100 80GB HBM3"] * 8, "gpu_names") == "8 x NVIDIA H100 80GB HBM3"
    assert fact(True, "offload_present") == "yes" and fact(2199023255552, "host_memory_bytes") == (
        "2 TiB"
    )
    assert fact_label("host_memory_bytes") == "Host memory" and fact_label("gpu_names") == (
        "GPU names"
    )
    assert fact({"capacity_gib": 1024, "present": False}) == "Capacity GiB: 1 TiB; Present: no"
