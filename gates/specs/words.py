"""A spec field as a person names it, and a change between two versions in those words:
"TTFT p50 reduction at c=8, at least: 29 % → 25 %", "Soak duration: 72 h → 96 h". Names by the
dotted paths of gates/specs/fields.py; numbers through gates.figures. Pure: documents in, words out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gates import figures
from gates.specs.diff import ABSENT, FieldChange, spec_changes
from gates.specs.fields import CANONICAL_WORKLOAD, WORKLOAD_PATHS

Shown = Callable[[Any], str]
FAMILIES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "end-to-end latency"}
LIST_ITEMS = 6
TEXT_CHARS = 60


def metric_name(name: str) -> str:
    """'TTFT p50', 'output throughput': a metric name as a customer reads it."""
    family, _, stat = name.partition("_")
    if family in FAMILIES and stat:
        return f"{FAMILIES[family]} {stat}"
    return name.replace("_", " ") or "metric"


def _unit(unit: str) -> Shown:
    return lambda value: figures.number(value, unit)


def _count(noun: str, plural: str | None = None) -> Shown:
    return lambda value: figures.count(value, noun, plural)


def _tiers(value: Any) -> str:
    if value == "all":
        return "every tier"
    items = value if isinstance(value, list) else [value]
    return "c=" + ", ".join(figures.number(item) for item in items)


def duration_words(ms: Any) -> str:
    """A bound in ms as a person writes it: '50 ms', '2 s', '1.5 s'."""
    found = figures.finite(ms)
    if found is None:
        return figures.number(ms)
    return figures.number(found / 1000, "s") if found >= 1000 else figures.number(found, "ms")


def slo_words(slo: Mapping[str, Any]) -> str:
    """'TTFT ≤ 2 s and TPOT ≤ 50 ms': the stated bounds of a goodput clause's SLO."""
    bounds = [
        f"{name} ≤ {duration_words(slo[key])}"
        for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"))
        if slo.get(key) is not None
    ]
    return " and ".join(bounds)


def _compare(value: Any) -> str:
    return str(value).replace("/", " vs ")


def _metric(value: Any) -> str:
    return metric_name(str(value))


PERCENT, RATIO = _unit("%"), _unit("x")
IN_FLIGHT = _count("request in flight", "requests in flight")
TEXTUAL: tuple[Shown, ...] = (_tiers, _metric, _compare)  # the others read numbers only
# Each field's short name and how its value reads (None: as written). Workload fields are named
# once, under `workload.`, and prefixed by the workload they belong to (WORKLOADS).
NAMES: dict[str, tuple[str, Shown | None]] = {
    "gate": ("Gate kind", None),
    "version": ("Version", None),
    "stop_loss": ("Stop-loss", None),
    "stop_loss.max_attempts": ("Failed attempts before stop-loss review", _count("attempt")),
    "server": ("Server settings", None),
    "server.model_path": ("Model weights", None),
    "server.tensor_parallel_size": ("GPUs per server (tensor parallel)", _count("GPU")),
    "server.max_model_len": ("Longest request (max model length)", _count("token")),
    "server.gpu_memory_utilization": ("Share of GPU memory vLLM may take", figures.share),
    "server.offload_gib": ("Offload tier size", figures.gib),
    "expect": ("Expected host", None),
    "expect.gpu_vendor": ("GPU maker", None),
    "expect.gpu_model_pattern": ("GPU model (pattern)", None),
    "expect.gpu_count": ("GPUs on the host, exactly", _count("GPU")),
    "expect.gpu_memory_min_gib": ("Memory of the smallest GPU, at least", figures.gib),
    "expect.driver_min": ("GPU driver, at least", None),
    "expect.cuda_min": ("CUDA, at least", None),
    "expect.rocm_min": ("ROCm, at least", None),
    "expect.vllm_min": ("vLLM, at least", None),
    "expect.engine_min": ("Serving engine, at least", None),
    "expect.host_memory_min_gib": ("Host memory, at least", figures.gib),
    "expect.offload_tier": ("Offload tier", None),
    "expect.offload_tier.required": ("Offload tier required", None),
    "expect.offload_tier.min_capacity_gib": ("Offload tier capacity, at least", figures.gib),
    "expect.free_disk_min_gib": ("Free disk, at least", figures.gib),
    "expect.kernel_pattern": ("Kernel release (pattern)", None),
    "health": ("Health check", None),
    "health.timeout_s": ("Time to answer /health", _unit("s")),
    "equivalence": ("Greedy equivalence", None),
    "equivalence.prompts": ("Equivalence prompts", None),
    "equivalence.max_tokens": ("Tokens per equivalence answer", _count("token")),
    "equivalence.max_mismatch_pct": ("Answers that may differ, at most", PERCENT),
    "offload_hit": ("Offload hit check", None),
    "offload_hit.min_external_hit_rate": ("Offload tier hit rate, at least", figures.share),
    "offload_hit.workload": ("Hit check workload", None),
    "offload_hit.tier": ("Hit check concurrency", IN_FLIGHT),
    "noise_floor": ("A/A noise floor", None),
    "noise_floor.repetitions": ("A/A pairs", _count("pair")),
    "noise_floor.confidence": ("A/A interval confidence", figures.share),
    "noise_floor.metric": ("A/A metric", _metric),
    "noise_floor.max_noise_pct": ("A/A noise, at most", PERCENT),
    "noise_floor.tier": ("A/A concurrency", IN_FLIGHT),
    "noise_floor.workload": ("A/A workload", None),
    "workload": ("Workload", None),
    "arms": ("Arms", None),
    "arms.baseline": ("Baseline arm", None),
    "arms.offload": ("Offload arm", None),
    "arms.recompute": ("Recompute arm", None),
    "tiers": ("Concurrency tiers", _tiers),
    "repetitions": ("Repetitions", None),
    "repetitions.min": ("Repetitions before the first look", _count("repetition")),
    "repetitions.max": ("Repetitions, at most", _count("repetition")),
    "confidence": ("Confidence of the gate", figures.share),
    "clauses": ("Clauses", None),
    # A clause's fields follow the clause's own words (clause_words).
    "clauses[].metric": ("metric", _metric),
    "clauses[].compare": ("arms compared", _compare),
    "clauses[].change": ("change", None),
    "clauses[].at_least_pct": ("at least", PERCENT),
    "clauses[].at_least": ("at least", RATIO),
    "clauses[].tiers": ("tiers", _tiers),
    "clauses[].claimed_pct": ("claimed", PERCENT),
    "clauses[].claimed": ("claimed", RATIO),
    "clauses[].slo": ("SLO", lambda value: slo_words(value) if isinstance(value, Mapping) else ""),
    "clauses[].slo.ttft_ms": ("SLO TTFT bound", lambda value: duration_words(value)),
    "clauses[].slo.tpot_ms": ("SLO TPOT bound", lambda value: duration_words(value)),
    "clauses[].arm": ("arm", None),
    "validity": ("Validity checks", None),
    "validity.max_failed_pct": ("Failed requests per bench, at most", PERCENT),
    "validity.min_external_hit_rate": ("Offload arm hit rate, at least", figures.share),
    "validity.require_kv_exceeds_vram": ("KV working set must exceed VRAM", None),
    "statistics": ("Statistics", None),
    "statistics.attempts": ("Attempts the error budget is split over", _count("attempt")),
    "statistics.sd_floor": ("Spread floor (sd of log-ratios)", _unit("")),
    "statistics.noise_cv_pct": ("Assumed noise (CV)", PERCENT),
    "statistics.noise_source": ("Source of the assumed noise", None),
    "statistics.sd_floor_fraction": ("Spread floor, share of the reference noise", figures.share),
    "statistics.spread_level": ("Implausibly low spread, level", _unit("")),
    "statistics.min_power": ("Power wanted at the claimed effects", figures.share),
    "statistics.require_power": ("Refuse runs while underpowered", None),
    "statistics.pool_tiers": ("Pool the spread across tiers", None),
    "statistics.carry_repetitions": ("Carry repetitions into the next attempt", None),
    "statistics.outliers": ("Outlier rule", None),
    "statistics.outliers.max_reruns": ("Disturbed repetitions re-run, at most", _count("rerun")),
    "statistics.outliers.max_preemptions": ("Preemptions per bench, at most", _count("preemption")),
    "statistics.outliers.screen_level": ("Outlier screen, level", _unit("")),
    "statistics.outliers.step_level": ("Step check, level", _unit("")),
    "duration_h": ("Soak duration", _unit("h")),
    "window_min": ("Window length", _unit("min")),
    "load": ("Soak load", None),
    "limits": ("Limits", None),
    "limits.max_crashes": ("Crashed windows, at most", _count("crash", "crashes")),
    "limits.max_error_rate_pct": ("Failed requests, at most", PERCENT),
    "limits.max_throughput_drift_pct": ("Throughput drop, at most", PERCENT),
    "limits.max_ttft_p99_change_pct": ("TTFT p99 rise, at most", PERCENT),
    "limits.max_memory_growth_mib_per_h": ("Memory growth, at most", _unit("MiB/h")),
    "limits.max_unobserved_pct": ("Unobserved time, at most", PERCENT),
    "soak": ("Soak agent", None),
    "soak.restart_on_crash": ("Restart a crashed server", None),
    "soak.max_restarts": ("Restarts, at most", _count("restart")),
    "soak.free_space_floor_gib": ("Free disk floor", figures.gib),
    "retention": ("Raw-file retention", None),
    "retention.keep_every_nth_window": ("Raw files kept for one window in", _count("window")),
    "retention.keep_after_sealed_days": ("Raw files pruned after sealing, wait", _unit("days")),
    "workload.dataset": ("dataset", None),
    "workload.input_len": ("prompt length", _count("token")),
    "workload.prefix_len": ("shared prefix length", _count("token")),
    "workload.suffix_len": ("suffix length", _count("token")),
    "workload.output_len": ("output length", _count("token")),
    "workload.num_prompts": ("requests per bench", _count("request")),
    "workload.seed": ("seed", None),
    "workload.cold_recovery": ("a prefix per prompt", None),
    "workload.max_concurrency": ("concurrency", IN_FLIGHT),
    "workload.num_prefixes": ("distinct prefixes", _count("prefix", "prefixes")),
    "workload.trace": ("trace", None),
    "workload.trace.sha256": ("trace SHA-256", None),
    "workload.trace.format": ("trace format", None),
    "workload.trace.block_tokens": ("tokens per hash id", _count("token")),
    "workload.trace.time_scale": ("replay time scale", RATIO),
    "workload.trace.sample_fraction": ("share of sessions replayed", figures.share),
    "workload.trace.warmup_s": ("unmeasured warm-up", _unit("s")),
    "workload.trace.max_arrival_error_p99_ms": ("arrival error p99, at most", _unit("ms")),
}
WORKLOADS = {path: NAMES[path][0] for path in WORKLOAD_PATHS}
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class ChangeWords:
    """One change as a person reads it; `field` keeps the dotted path for engineers."""

    field: str
    name: str
    before: str
    after: str
    kind: str  # "changed", "added" or "removed"

    def __str__(self) -> str:
        if self.kind == "added":
            return f"{self.name}: added, {self.after}"
        if self.kind == "removed":
            return f"{self.name}: removed (was {self.before})"
        return f"{self.name}: {self.before} → {self.after}"


def spec_change_words(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ChangeWords]:
    """Every change between two versions in words: a section added or removed reads field by
    field, a clause added or removed as the whole clause."""
    words: list[ChangeWords] = []
    for change in spec_changes(before, after):
        for leaf in _leaves(change):
            words.append(change_words(leaf, before, after))
    return words


def change_words(
    change: FieldChange, before: Mapping[str, Any], after: Mapping[str, Any]
) -> ChangeWords:
    kind = (
        "added" if change.before is ABSENT else "removed" if change.after is ABSENT else "changed"
    )
    return ChangeWords(
        field=change.field,
        # A clause is named as the older version has it (the one the reader knows), a new one
        # as the newer version has it.
        name=field_name(change.field, after if kind == "added" else before),
        before="" if change.before is ABSENT else value_words(change.field, change.before),
        after="" if change.after is ABSENT else value_words(change.field, change.after),
        kind=kind,
    )


def changes_lines(words: list[ChangeWords], limit: int = 20) -> str:
    """The changes as a plain-text list, for alert bodies."""
    lines = [f"- {change}" for change in words[:limit]]
    if len(words) > limit:
        lines.append(f"- ... and {len(words) - limit} more")
    return "\n".join(lines) if lines else "- no field changed"


def field_name(path: str, document: Mapping[str, Any]) -> str:
    """ "Soak duration", "Workload, requests per bench", "TTFT p50 reduction at c=8, at least"."""
    clause = re.fullmatch(r"clauses\[(\d+)\](?:\.([\w.]+))?", path)
    if clause:
        item = _clause_at(document, int(clause[1]))
        if clause[2] is None:
            return f"Clause {int(clause[1]) + 1}"
        return f"{clause_words(item)}, {_names(f'clauses[].{clause[2]}', clause[2])}"
    for workload in sorted(WORKLOAD_PATHS, key=len, reverse=True):
        if path.startswith(f"{workload}."):
            inner = CANONICAL_WORKLOAD + path.removeprefix(workload)
            return f"{WORKLOADS[workload]}, {_names(inner, path)}"
    return _names(_INDEX.sub("[]", path), path)


def clause_words(clause: Mapping[str, Any]) -> str:
    """ "TTFT p50 reduction at c=8"; the arms are named unless offload vs baseline. A goodput
    clause names its SLO: "goodput (TTFT ≤ 2 s) of offload at every tier" for a floor."""
    metric = metric_name(str(clause.get("metric", "")))
    slo = clause.get("slo")
    if isinstance(slo, Mapping):
        metric = f"{metric} ({slo_words(slo)})"
    if "arm" in clause:
        return f"{metric} of {clause['arm']} at {_tiers(clause.get('tiers'))}"
    compare = clause.get("compare")
    arms = f", {_compare(compare)}," if compare and compare != "offload/baseline" else ""
    return f"{metric} {clause.get('change', 'change')}{arms} at {_tiers(clause.get('tiers'))}"


def value_words(path: str, value: Any) -> str:
    """A value in its field's unit: "25 %", "96 h", "8 GPUs", "c=8, 16"; null and booleans as
    words; a whole clause as its sentence."""
    if value is None:
        return "not checked" if path.startswith("expect.") else "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if re.fullmatch(r"clauses\[\d+\]", path) and isinstance(value, Mapping):
        return _clause_sentence(value)
    shown = NAMES.get(_canonical(path), ("", None))[1]
    if shown is not None and (figures.finite(value) is not None or shown in TEXTUAL):
        return shown(value)
    if isinstance(value, list):
        items = [value_words("", item) for item in value[:LIST_ITEMS]]
        more = f" and {len(value) - LIST_ITEMS} more" if len(value) > LIST_ITEMS else ""
        return ", ".join(items) + more if items else "none"
    if isinstance(value, Mapping):
        return "; ".join(f"{key}: {value_words('', item)}" for key, item in value.items()) or "none"
    if isinstance(value, str) and (len(value) > TEXT_CHARS or not value or " " in value):
        return f"“{value[:TEXT_CHARS]}…”" if len(value) > TEXT_CHARS else f"“{value}”"
    return figures.number(value) if figures.finite(value) is not None else str(value)


def _clause_sentence(clause: Mapping[str, Any]) -> str:
    ratio = clause.get("change") == "ratio"
    bar = clause.get("at_least") if ratio else clause.get("at_least_pct")
    return f"{clause_words(clause)}, at least {(RATIO if ratio else PERCENT)(bar)}"


def _leaves(change: FieldChange) -> list[FieldChange]:
    """A dict section added or removed, as one change per leaf (a clause stays whole)."""
    side = change.after if change.before is ABSENT else change.before
    if not isinstance(side, dict) or not side or re.fullmatch(r"clauses\[\d+\]", change.field):
        return [change]
    leaves: list[FieldChange] = []
    for key, value in side.items():
        path = f"{change.field}.{key}"
        pair = (ABSENT, value) if change.before is ABSENT else (value, ABSENT)
        leaves += _leaves(FieldChange(path, *pair))
    return leaves


def _canonical(path: str) -> str:
    path = _INDEX.sub("[]", path)
    for workload in sorted(WORKLOAD_PATHS, key=len, reverse=True):
        if path.startswith(f"{workload}."):
            return CANONICAL_WORKLOAD + path.removeprefix(workload)
    return path


def _names(canonical: str, path: str) -> str:
    return NAMES[canonical][0] if canonical in NAMES else path


def _clause_at(document: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    clauses = document.get("clauses")
    item: object = clauses[index] if isinstance(clauses, list) and index < len(clauses) else {}
    return item if isinstance(item, Mapping) else {}
