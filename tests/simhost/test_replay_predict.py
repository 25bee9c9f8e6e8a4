"""The replay TTFT predictor: the engine run over a replay's own requests, as its client sends
them (open loop, at most the tier in flight), each arm's p50 as a band."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simhost.engine.predict import arm_config
from simhost.engine.presets import SMALL_1B
from simhost.engine.replay_predict import (
    ReplayedRequest,
    engine_hashes,
    predict_replay_ttft,
    replay_ttfts,
    served_requests,
)

BLOCK = 512
# A GPU cache of 8,192 tokens: the sessions' prefixes below do not all fit, so resuming them
# must load (offload), recompute (recompute) or re-prefill after eviction (resident).
SMALL_CACHE = replace(SMALL_1B, num_gpu_blocks=512)


def session_replay(sessions: int = 6, prefix_blocks: int = 8, gap_s: float = 0.5) -> list:
    """Each session's prefix sent once, then every session resumed with a fresh last block."""
    requests, key = [], 10_000
    for turn in range(2):
        for session in range(sessions):
            keys = tuple(session * 100 + block for block in range(prefix_blocks))
            key += 1
            requests.append(
                ReplayedRequest(
                    send_at_s=(turn * sessions + session) * gap_s,
                    prompt_tokens=(prefix_blocks + 1) * BLOCK,
                    block_keys=(*keys, key),
                    output_tokens=8,
                    measured=turn == 1,
                )
            )
    return requests


def burst(count: int, tokens: int = 2048) -> list:
    """Requests of their own (nothing shared), all due at once."""
    return [ReplayedRequest(0.0, tokens, (i,), 16) for i in range(count)]


def test_engine_blocks_are_shared_exactly_where_the_trace_blocks_are():
    a = ReplayedRequest(0.0, 1024, (1, 2), 1)
    b = ReplayedRequest(0.0, 1024, (1, 3), 1)
    ha, hb = engine_hashes(a, BLOCK, 16, 0), engine_hashes(b, BLOCK, 16, 1)
    assert len(ha) == 64
    assert ha[:32] == hb[:32] and not set(ha[32:]) & set(hb[32:])


def test_a_prompt_cut_inside_its_last_block_shares_that_block_s_head():
    whole = ReplayedRequest(0.0, 1024, (1, 2), 1)
    cut = ReplayedRequest(0.0, 600, (1, 2), 1)
    assert engine_hashes(cut, BLOCK, 16, 0) == engine_hashes(whole, BLOCK, 16, 1)[: 600 // 16]


def test_a_load_shape_trace_shares_nothing():
    first = ReplayedRequest(0.0, 512, None, 1)
    assert not set(engine_hashes(first, None, 16, 0)) & set(engine_hashes(first, None, 16, 1))


def test_ttft_grows_with_the_concurrency_tier_when_requests_arrive_together():
    p50s = [
        predict_replay_ttft(SMALL_1B, burst(24), c, trace_block_tokens=BLOCK, offload_gib=1.0).arms[
            "resident"
        ]
        for c in (1, 4, 16)
    ]
    assert p50s[0].high_s < p50s[1].low_s and p50s[1].high_s < p50s[2].low_s


def test_the_offload_band_lies_below_recompute_when_resumed_prefixes_were_evicted():
    prediction = predict_replay_ttft(
        SMALL_CACHE, session_replay(), 2, trace_block_tokens=BLOCK, offload_gib=4.0
    )
    offload, recompute = prediction.arms["offload"], prediction.arms["recompute"]
    assert offload.high_s < recompute.low_s
    assert offload.runs == 8 and recompute.runs == 4  # links x seeds x clocks; seeds x clocks


def test_the_band_is_the_same_for_the_same_inputs():
    one = predict_replay_ttft(
        SMALL_CACHE, session_replay(), 2, trace_block_tokens=BLOCK, offload_gib=4
    )
    two = predict_replay_ttft(
        SMALL_CACHE, session_replay(), 2, trace_block_tokens=BLOCK, offload_gib=4
    )
    assert one == two
    assert all(band.low_s <= band.high_s for band in one.arms.values())


def test_the_cap_models_the_first_requests_and_says_so():
    capped = predict_replay_ttft(
        SMALL_1B, burst(30), 2, trace_block_tokens=BLOCK, offload_gib=1, max_requests=10
    )
    whole = predict_replay_ttft(SMALL_1B, burst(10), 2, trace_block_tokens=BLOCK, offload_gib=1)
    assert capped.capped and (capped.modelled_requests, capped.kept_requests) == (10, 30)
    assert not whole.capped and whole.arms == capped.arms


def test_prompts_past_the_context_length_are_refused_and_counted():
    long = ReplayedRequest(0.0, SMALL_1B.max_model_len + 1, None, 4)
    prediction = predict_replay_ttft(
        SMALL_1B, [long, *burst(3)], 1, trace_block_tokens=BLOCK, offload_gib=1
    )
    assert prediction.refused_requests == 1
    near = ReplayedRequest(0.0, SMALL_1B.max_model_len - 2, None, 10)
    assert served_requests([near], SMALL_1B.max_model_len)[0].output_tokens == 2


def test_a_replay_with_nothing_measured_is_refused():
    unmeasured = [replace(request, measured=False) for request in burst(2)]
    with pytest.raises(ValueError, match="measures no request"):
        predict_replay_ttft(SMALL_1B, unmeasured, 1, trace_block_tokens=BLOCK, offload_gib=1)


def test_a_request_sent_mid_step_is_clocked_from_its_send_or_from_the_step_start():
    config = arm_config(SMALL_1B, "resident")
    long_first = ReplayedRequest(0.0, 4096, (1, 2, 3, 4, 5, 6, 7, 8), 1, measured=False)
    mid_step = ReplayedRequest(0.001, 512, (9,), 1)
    (at_send,) = replay_ttfts(config, [long_first, mid_step], 2, BLOCK)
    (at_start,) = replay_ttfts(config, [long_first, mid_step], 2, BLOCK, from_step_start=True)
    assert at_start == pytest.approx(at_send + 0.001)
