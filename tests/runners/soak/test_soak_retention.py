"""Which soak windows keep their raw files once the evidence is sealed: the telling ones (crashed,
failed requests, a note or fault, a change point, the hit-rate stop, first and last) and every
Nth, and the dropped windows as seq ranges. Pure: no database."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runners.soak.retention import (
    WindowFlags,
    kept_windows,
    ranges_seqs,
    raw_file_dropped,
    seq_ranges,
    window_flags,
)


def plain(count: int) -> list[WindowFlags]:
    return [WindowFlags(seq) for seq in range(count)]


def test_a_quiet_soak_keeps_the_first_the_last_and_every_nth_window():
    assert kept_windows(plain(130), [], 60) == {0, 60, 120, 129}


def test_every_nth_counts_seqs_so_a_gap_does_not_shift_the_sample():
    flags = [WindowFlags(seq) for seq in (0, 1, 2, 7, 8, 9, 10, 11)]
    assert kept_windows(flags, [], 5) == {0, 10, 11}


@pytest.mark.parametrize(
    ("flag", "seq"),
    [("crashed", 17), ("failed", 33), ("noted", 41)],
)
def test_a_window_that_tells_something_keeps_its_raw_files(flag, seq):
    flags = [WindowFlags(s, **({flag: True} if s == seq else {})) for s in range(100)]
    assert kept_windows(flags, [], 60) == {0, 60, 99, seq}


def test_the_decisions_change_points_and_the_hit_rate_stop_keep_their_windows():
    clauses = [
        {"check": "throughput_drift", "change_points": [{"seq": 23}, {"seq": 71}]},
        {"check": "ttft_p99_change", "change_points": []},
        {"check": "offload_hits", "stopped_seq": 88},
        {"check": "crashes"},
    ]
    assert kept_windows(plain(100), clauses, 1000) == {0, 23, 71, 88, 99}


def test_every_nth_of_one_keeps_everything_and_no_windows_keep_nothing():
    assert kept_windows(plain(7), [], 1) == set(range(7))
    assert kept_windows([], [{"stopped_seq": 3}], 60) == set()


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"crashed": True}, WindowFlags(5, crashed=True)),
        ({"failed": 2, "notes": []}, WindowFlags(5, failed=True)),
        ({"failed": 0, "notes": ["probe smi: timed out"]}, WindowFlags(5, noted=True)),
        ({"health": {"notes": ["GPU 0 clocks held down"]}}, WindowFlags(5, noted=True)),
        ({"health": {"notes": [], "xid_events": [{"code": 13}]}}, WindowFlags(5, noted=True)),
        ({"failed": None, "notes": [], "health": {"notes": []}}, WindowFlags(5)),
        (None, WindowFlags(5)),
    ],
)
def test_a_windows_flags_come_from_its_stored_sample(metrics, expected):
    assert window_flags(5, metrics) == expected


@given(st.sets(st.integers(0, 5000), max_size=200))
def test_dropped_ranges_give_back_the_same_seqs(seqs):
    ranges = seq_ranges(seqs)
    assert ranges_seqs(ranges) == seqs
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(ranges))


def test_a_dropped_windows_raw_files_go_but_its_line_stays():
    assert raw_file_dropped("soak/w000007/bench.json", {7})
    assert not raw_file_dropped("soak/w000007/window-line.json", {7})
    assert not raw_file_dropped("soak/w000008/bench.json", {7})
    assert not raw_file_dropped("probes/kernel.txt", {7})
