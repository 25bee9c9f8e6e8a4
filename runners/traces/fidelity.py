"""Whether a replay matched its trace: arrival-time error (p99 under 10 ms), prompt and output
tokens as the trace says, and the achieved hit rate against the predicted band. A replay that
misses a bar is invalid with the reason named; a hit rate outside the band is a model error
(policy, block size, touch semantics), reported, never a tier defect. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from runners.traces.replay import ReplayRequest

MAX_ARRIVAL_ERROR_P99_MS = 10.0


@dataclass(frozen=True)
class RequestRecord:
    """One sent request as the client saw it; times in seconds from the replay's start."""

    index: int
    sent_s: float
    ok: bool
    prompt_tokens: int | None
    output_tokens: int | None
    ttft_ms: float | None = None
    itl_ms: tuple[float, ...] = ()
    e2el_ms: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestRecord:
        return cls(
            index=int(data["index"]),
            sent_s=float(data["sent_s"]),
            ok=bool(data["ok"]),
            prompt_tokens=data.get("prompt_tokens"),
            output_tokens=data.get("output_tokens"),
            ttft_ms=data.get("ttft_ms"),
            itl_ms=tuple(data.get("itl_ms") or ()),
            e2el_ms=data.get("e2el_ms"),
        )


@dataclass(frozen=True)
class PlannedRequest:
    """What the check needs of a planned request: the replay file without its token ids, small
    enough to keep beside the run (a run's worker rebuilds nothing to check a replay)."""

    index: int
    send_at_s: float | None
    prompt_tokens: int
    output_tokens: int
    measured: bool = True

    @classmethod
    def of(cls, request: ReplayRequest | PlannedRequest) -> PlannedRequest:
        if isinstance(request, PlannedRequest):
            return request
        return cls(
            request.index,
            request.send_at_s,
            len(request.prompt_token_ids),
            request.output_tokens,
            request.measured,
        )

    def to_row(self) -> list[Any]:
        return [self.index, self.send_at_s, self.prompt_tokens, self.output_tokens, self.measured]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PlannedRequest:
        index, send_at_s, prompt_tokens, output_tokens, measured = row
        at = None if send_at_s is None else float(send_at_s)
        return cls(int(index), at, int(prompt_tokens), int(output_tokens), bool(measured))


@dataclass(frozen=True)
class Fidelity:
    valid: bool
    reasons: tuple[str, ...]
    requests: int
    sent: int
    arrival_error_ms: dict[str, float] | None
    prompt_token_mismatches: int
    output_token_mismatches: int
    hit_rate: dict[str, Any] | None = None
    model_error: str | None = None
    arrival_bar_ms: float = MAX_ARRIVAL_ERROR_P99_MS
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reasons"], data["notes"] = list(self.reasons), list(self.notes)
        return data


def check_fidelity(
    requests: Sequence[ReplayRequest | PlannedRequest],
    records: Sequence[RequestRecord],
    *,
    achieved_hit_rate: float | None = None,
    predicted_band: tuple[float, float] | None = None,
    max_arrival_error_p99_ms: float = MAX_ARRIVAL_ERROR_P99_MS,
) -> Fidelity:
    """Each bar in turn; every one missed is a reason, so the reader fixes them all at once."""
    planned = [PlannedRequest.of(request) for request in requests]
    by_index = {record.index: record for record in records}
    reasons: list[str] = []
    missing = [request.index for request in planned if request.index not in by_index]
    if missing:
        reasons.append(f"{len(missing)} planned requests were never sent (first: #{missing[0]})")
    errors = _arrival_errors_ms(planned, by_index)
    arrival = _summary(errors)
    if arrival and arrival["p99"] >= max_arrival_error_p99_ms:
        reasons.append(
            f"arrival-time error p99 {arrival['p99']:.1f} ms is not under "
            f"{max_arrival_error_p99_ms:g} ms: the client fell behind the trace's schedule"
        )
    prompts = _mismatches(planned, by_index, "prompt")
    outputs = _mismatches(planned, by_index, "output")
    for kind, wrong in (("prompt", prompts), ("output", outputs)):
        if wrong:
            reasons.append(
                f"{len(wrong)} requests had other {kind} token counts than the trace "
                f"(first: #{wrong[0]})"
            )
    hit, model_error = _hit_rate(achieved_hit_rate, predicted_band)
    return Fidelity(
        valid=not reasons,
        reasons=tuple(reasons),
        requests=len(planned),
        sent=len(by_index),
        arrival_error_ms=arrival,
        prompt_token_mismatches=len(prompts),
        output_token_mismatches=len(outputs),
        hit_rate=hit,
        model_error=model_error,
        arrival_bar_ms=max_arrival_error_p99_ms,
    )


def _arrival_errors_ms(
    planned: Sequence[PlannedRequest], by_index: Mapping[int, RequestRecord]
) -> list[float]:
    """How late (or early) each request left against its scheduled time, in ms."""
    return [
        (by_index[request.index].sent_s - request.send_at_s) * 1000.0
        for request in planned
        if request.send_at_s is not None and request.index in by_index
    ]


def _summary(errors: Sequence[float]) -> dict[str, float] | None:
    if not errors:
        return None
    values = np.abs(np.asarray(errors, dtype=float))  # nearest rank, as the characterisation
    return {
        "p50": float(np.percentile(values, 50, method="inverted_cdf")),
        "p99": float(np.percentile(values, 99, method="inverted_cdf")),
        "max": float(values.max()),
    }


def _mismatches(
    planned: Sequence[PlannedRequest], by_index: Mapping[int, RequestRecord], kind: str
) -> list[int]:
    """Indices of completed requests whose server-reported token count is not the trace's."""
    wrong = []
    for request in planned:
        record = by_index.get(request.index)
        if record is None or not record.ok:
            continue
        expected = request.prompt_tokens if kind == "prompt" else request.output_tokens
        got = record.prompt_tokens if kind == "prompt" else record.output_tokens
        if got != expected:
            wrong.append(request.index)
    return wrong


def _hit_rate(
    achieved: float | None, band: tuple[float, float] | None
) -> tuple[dict[str, Any] | None, str | None]:
    if achieved is None:
        return None, None
    if band is None:
        return {"achieved": achieved, "band": None, "inside": None}, None
    low, high = band
    inside = low <= achieved <= high
    error = None
    if not inside:
        error = (
            f"achieved hit rate {achieved:.1%} is outside the predicted {low:.1%} to "
            f"{high:.1%}: a model error (eviction policy, block size, replicas), not a tier defect"
        )
    return {"achieved": achieved, "band": [low, high], "inside": inside}, error


def replay_fidelity_summary(
    measurements: Sequence[Mapping[str, Any]],
    hit_bands: Mapping[int, tuple[float, float] | str] | None = None,
) -> dict[str, Any] | None:
    """Over a run's measurements: each replayed cell's fidelity, the reasons that make the run
    invalid (a cell that missed a bar) and the notes (a hit rate outside its band, a model
    error). `hit_bands`, per concurrency tier: the planner's predicted hit-rate band for the
    cell's achieved hit rate, or why there is none (gates.planner.trace_tiers.replay_hit_bands).
    None when no measurement was a replay."""
    cells, reasons, notes, missing = [], [], [], set()
    for item in measurements:
        replay = (item.get("metrics") or {}).get("replay")
        if not isinstance(replay, Mapping) or not isinstance(replay.get("fidelity"), Mapping):
            continue
        fidelity = _against_band(replay["fidelity"], hit_bands, item.get("tier"))
        label = f"{item.get('arm')} c={item.get('tier')} r{item.get('repetition')}"
        cells.append({"cell": label, "digest": replay.get("digest"), **fidelity})
        reasons += [f"replay {label}: {reason}" for reason in fidelity.get("reasons") or []]
        if fidelity.get("model_error"):
            notes.append(f"replay {label}: {fidelity['model_error']}")
        if (fidelity.get("hit_rate") or {}).get("band_missing"):
            missing.add(fidelity["hit_rate"]["band_missing"])
    if not cells:
        return None
    digests = {cell["digest"] for cell in cells}
    summary = {
        "cells": cells,
        "reasons": reasons,
        "notes": notes,
        "digests": sorted(digests),
        "hit_band_missing": sorted(missing),
    }
    if hit_bands is not None:
        # The bands as used, [tier, [low, high] or why none] (JSON keys would be strings): the
        # offline verifier recomputes the cells against these, since it has no KV plan.
        summary["hit_bands"] = [
            [tier, list(band) if not isinstance(band, str) else band]
            for tier, band in sorted(hit_bands.items())
        ]
    return summary


def recorded_hit_bands(summary: Mapping[str, Any]) -> dict[int, tuple[float, float] | str] | None:
    """The `hit_bands` a summary recorded, back as replay_fidelity_summary takes them."""
    rows = summary.get("hit_bands")
    if rows is None:
        return None
    return {
        int(tier): band if isinstance(band, str) else (float(band[0]), float(band[1]))
        for tier, band in rows
    }


def with_replay_fidelity(result: Mapping[str, Any], fidelity: Mapping[str, Any]) -> dict[str, Any]:
    """The replays' fidelity beside the engine's result: a cell that missed a bar (late
    arrivals, other token counts, requests not sent) makes the run invalid with each reason
    named, since it did not send the customer's trace; a hit rate outside its band is a note."""
    decided = {**result, "replay_fidelity": dict(fidelity)}
    decided["notes"] = [*result.get("notes", []), *fidelity["notes"]]
    if fidelity["reasons"]:
        decided["verdict"] = "invalid"
        decided["reasons"] = [*fidelity["reasons"], *result.get("reasons", [])]
    return decided


def _against_band(
    fidelity: Mapping[str, Any],
    hit_bands: Mapping[int, tuple[float, float] | str] | None,
    tier: Any,
) -> dict[str, Any]:
    """The cell's achieved hit rate against its tier's band: outside is the model-error note;
    a tier without a band says why (never a guessed band). Without bands: as recorded."""
    hit = fidelity.get("hit_rate") or {}
    if hit_bands is None or hit.get("achieved") is None:
        return dict(fidelity)
    band = hit_bands.get(tier, f"no band was predicted for c={tier}")
    if isinstance(band, str):
        missing = {**hit, "band": None, "inside": None, "band_missing": band}
        return {**fidelity, "hit_rate": missing, "model_error": None}
    rate, error = _hit_rate(float(hit["achieved"]), (band[0], band[1]))
    return {**fidelity, "hit_rate": rate, "model_error": error}
