"""Replay fidelity: each bar (arrival error p99 under 10 ms, token counts as the trace says, every
request sent) names its reason when missed; a hit rate outside the band is a model error."""

from __future__ import annotations

from runners.traces.fidelity import RequestRecord, check_fidelity, replay_fidelity_summary
from runners.traces.records import TraceRecord
from runners.traces.replay import ReplaySettings, replay_requests

TRACE = [TraceRecord(i * 0.1, 8, 2, (i % 3, 10 + i)) for i in range(200)]
PLANNED = list(replay_requests(TRACE, ReplaySettings(seed=1, block_tokens=4)))


def faithful(late_s: float = 0.002) -> list[RequestRecord]:
    return [
        RequestRecord(r.index, (r.send_at_s or 0) + late_s, True, 8, 2, 5.0, (1.0,), 7.0)
        for r in PLANNED
    ]


def test_a_faithful_replay_is_valid():
    fidelity = check_fidelity(PLANNED, faithful())
    assert fidelity.valid and fidelity.reasons == ()
    assert fidelity.arrival_error_ms is not None
    assert round(fidelity.arrival_error_ms["p99"], 6) == 2.0


def test_a_late_client_is_invalid_with_the_arrival_error_named():
    records = faithful()
    records[:3] = [
        RequestRecord(r.index, r.sent_s + 0.05, True, 8, 2) for r in records[:3]
    ]  # 3 of 200 late by 50 ms: over 1 %
    fidelity = check_fidelity(PLANNED, records)
    assert not fidelity.valid
    assert "arrival-time error p99 52.0 ms is not under 10 ms" in fidelity.reasons[0]


def test_two_late_requests_in_two_hundred_stay_under_the_p99():
    records = faithful()
    records[:2] = [RequestRecord(r.index, r.sent_s + 0.05, True, 8, 2) for r in records[:2]]
    assert check_fidelity(PLANNED, records).valid


def test_token_counts_other_than_the_trace_are_named():
    records = faithful()
    records[4] = RequestRecord(4, records[4].sent_s, True, 9, 2)
    records[7] = RequestRecord(7, records[7].sent_s, True, 8, 1)
    fidelity = check_fidelity(PLANNED, records)
    assert fidelity.reasons == (
        "1 requests had other prompt token counts than the trace (first: #4)",
        "1 requests had other output token counts than the trace (first: #7)",
    )


def test_a_request_never_sent_is_named():
    fidelity = check_fidelity(PLANNED, faithful()[1:])
    assert fidelity.reasons == ("1 planned requests were never sent (first: #0)",)


def test_a_hit_rate_outside_the_band_is_a_model_error_not_invalid():
    fidelity = check_fidelity(PLANNED, faithful(), achieved_hit_rate=0.9, predicted_band=(0.2, 0.4))
    assert fidelity.valid
    assert fidelity.hit_rate == {"achieved": 0.9, "band": [0.2, 0.4], "inside": False}
    assert fidelity.model_error and "not a tier defect" in fidelity.model_error
    inside = check_fidelity(PLANNED, faithful(), achieved_hit_rate=0.3, predicted_band=(0.2, 0.4))
    assert inside.hit_rate and inside.hit_rate["inside"] and inside.model_error is None


def test_the_summary_holds_each_cell_against_its_tiers_band_or_says_why_there_is_none():
    fidelity = check_fidelity(PLANNED, faithful(), achieved_hit_rate=0.9).to_dict()
    cells = [
        {
            "arm": "offload",
            "tier": tier,
            "repetition": 1,
            "metrics": {"replay": {"digest": "d", "fidelity": fidelity}},
        }
        for tier in (4, 16)
    ]
    summary = replay_fidelity_summary(cells, {4: (0.2, 0.4), 16: "no saved KV plan"})
    outside, unknown = summary["cells"]
    assert outside["hit_rate"] == {"achieved": 0.9, "band": [0.2, 0.4], "inside": False}
    assert summary["notes"] == [f"replay offload c=4 r1: {outside['model_error']}"]
    assert unknown["hit_rate"]["band"] is None and unknown["model_error"] is None
    assert summary["hit_band_missing"] == ["no saved KV plan"]
    as_recorded = replay_fidelity_summary(cells)  # no bands given: the cells as measured
    assert as_recorded["cells"][0]["hit_rate"]["band"] is None and as_recorded["notes"] == []
