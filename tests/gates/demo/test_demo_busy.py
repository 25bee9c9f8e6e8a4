"""bench/demo_busy.py's tally (issue 29: the demo reaches every outcome it was built to show,
10 runs out of 10 under load): which runs reached every outcome, which steps missed and how
often, and whether the load floor held. Pure: the bench's own summary reader on demo output."""

from __future__ import annotations

from bench.demo_busy import DemoTiming, summary_marks, tally

SUMMARY = """worker: ready
Demo summary:
  ok   480B long-context agents (offload helps) G3: pass: every clause passed
  {mark} 480B long-context agents (offload helps) outcome: {detail}
  ok   480B short chat (offload does not help) G3: fail: throughput gain 1.2 % under 29 %
"""


def timing(mark: str, detail: str, exit_code: int, loads: list[float]) -> DemoTiming:
    ok, failed = summary_marks(SUMMARY.format(mark=mark, detail=detail))
    return DemoTiming("side-by-side", 400.0, exit_code, ok, failed, loads)


def test_a_run_reaches_every_outcome_only_when_every_step_is_ok_and_it_exits_0():
    good = timing("ok  ", "passed as built", 0, [8.5, 9.0])
    missed = timing("FAIL", "G3 inconclusive twice: the engagement never passed (run 7)", 1, [8.2])
    assert good.reached_every_outcome and not missed.reached_every_outcome
    assert (missed.ok, len(missed.failed)) == (2, 1)
    stopped = DemoTiming("side-by-side", 90.0, 1, 0, [], [8.1])  # broke before its summary
    assert not stopped.reached_every_outcome


def test_the_tally_counts_runs_names_missed_steps_once_each_and_says_if_the_floor_held():
    runs = [timing("ok  ", "passed as built", 0, [8.4, 9.1]) for _ in range(8)]
    runs += [timing("FAIL", f"G3 inconclusive twice (run {n})", 1, [7.6, 8.8]) for n in (3, 9)]
    lines = tally("side-by-side", runs, load_floor=8)
    assert lines[0] == "side-by-side: 8/10 runs reached every outcome the demo shows"
    # The two misses differ in their figures but are one step, counted twice.
    assert "  missed 2x: 480B long-context agents (offload helps) outcome" in lines
    assert lines[-1] == "  load average 7.6-9.1 (floor 8 NOT held)"
    held = tally("side-by-side", runs[:8], load_floor=8)
    assert held == [
        "side-by-side: 8/8 runs reached every outcome the demo shows",
        "  load average 8.4-9.1 (floor 8 held)",
    ]
