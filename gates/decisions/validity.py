"""G3 evidence: the measurements fed to the decision engine, parsed, and the validity rules that
run before any clause. Pure: plain data in and out; imports no Django and does no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from documents.cell import G3Context, NoiseFloorContext, ValidityCheck
from gates.decisions.clauses import G3Terms
from gates.decisions.numbers import finite_float, is_number, metric_value

# Which server settings each arm kind must run with: (prefix caching, offload).
ARM_SETTINGS = {
    "resident": (True, False),
    "offload": (True, True),
    "recompute": (False, False),
}


class EvidenceError(ValueError):
    """Measurements or context the engine cannot read; `field` names the bad value."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class Measurement:
    index: int
    arm: str
    kind: str
    tier: int
    repetition: int
    metrics: dict[str, Any]
    server: dict[str, Any]
    raw_sha256: str | None = None

    @property
    def label(self) -> str:
        return f"{self.arm} tier {self.tier} repetition {self.repetition}"


def parse_measurements(raw: Any, spec: G3Terms) -> list[Measurement]:
    """Measurements as dataclasses; raises EvidenceError for shapes the programs never emit."""
    if not isinstance(raw, list):
        raise EvidenceError("measurements", "must be a list")
    parsed = [_parse_measurement(item, i, spec) for i, item in enumerate(raw)]
    seen: set[tuple[str, int, int]] = set()
    for item in parsed:
        key = (item.arm, item.tier, item.repetition)
        if key in seen:
            raise EvidenceError(f"measurements[{item.index}]", f"duplicate {item.label}")
        seen.add(key)
    return parsed


def parse_context(raw: Any) -> G3Context:
    """What the engine knows beyond the measurements: the KV planner's verdict, which attempt
    of the gate this is (1 when not said) and the G2 A/A noise floor (or None)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise EvidenceError("context", "must be an object or null")
    flag = raw.get("kv_exceeds_vram")
    if flag is not None and not isinstance(flag, bool):
        raise EvidenceError("context.kv_exceeds_vram", "must be true, false or null")
    attempt = raw.get("attempt", 1)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise EvidenceError("context.attempt", "must be a positive integer")
    found: G3Context = {
        "kv_exceeds_vram": flag,
        "attempt": attempt,
        "noise_floor": _noise(raw),
        "unavailable_arms": _unavailable_arms(raw),
    }
    carried = raw.get("carried_repetitions", 0)
    if not isinstance(carried, int) or isinstance(carried, bool) or carried < 0:
        raise EvidenceError("context.carried_repetitions", "must be a non-negative integer")
    if carried:
        found["carried_repetitions"] = carried
    return found


def _noise(raw: dict[str, Any]) -> NoiseFloorContext | None:
    noise = raw.get("noise_floor")
    if noise is None:
        return None
    if not isinstance(noise, dict) or not isinstance(noise.get("metric"), str):
        raise EvidenceError("context.noise_floor", "must be {metric, sd_log_ratio} or null")
    sd = read_number(noise, "sd_log_ratio", "context.noise_floor")
    if sd is None or sd < 0:
        raise EvidenceError("context.noise_floor.sd_log_ratio", "must be a non-negative number")
    return {"metric": noise["metric"], "sd_log_ratio": sd}


def _unavailable_arms(raw: dict[str, Any]) -> dict[str, str]:
    """Arm roles this host cannot run, with why (e.g. native offload on a CPU-only host): their
    clauses are not evaluated, and say so."""
    arms = raw.get("unavailable_arms") or {}
    if not isinstance(arms, dict) or not all(
        isinstance(role, str) and isinstance(why, str) and why for role, why in arms.items()
    ):
        raise EvidenceError("context.unavailable_arms", "must map arm roles to reasons")
    return dict(arms)


def read_number(container: Mapping[str, Any], key: str, field: str) -> float | None:
    """A numeric value or None when absent or not finite; other types are an EvidenceError."""
    value = container.get(key)
    if value is None:
        return None
    if not is_number(value):
        raise EvidenceError(f"{field}.{key}", f"must be a number, not {type(value).__name__}")
    return finite_float(value)


def check_validity(
    measurements: list[Measurement], spec: G3Terms, context: G3Context
) -> list[ValidityCheck]:
    """Every validity check, one dict each; `ok` is True, False (invalid) or None (unknown)."""
    checks = [_kv_check(spec, context)] if spec.validity.require_kv_exceeds_vram else []
    checks.extend(_duplicate_raw_checks(measurements))
    checks.extend(_identical_value_checks(measurements, spec))
    for item in measurements:
        checks.extend(
            [
                _completed_check(item),
                _failed_check(item, spec.validity.max_failed_pct),
                _concurrency_check(item),
                _arm_check(item),
            ]
        )
        if item.kind == "offload":
            checks.append(_hit_rate_check(item, spec.validity.min_external_hit_rate))
        if spec.statistics.max_preemptions is not None:
            checks.append(_preemption_check(item, spec.statistics.max_preemptions))
    return checks


def summarize_unknowns(checks: list[ValidityCheck]) -> list[str]:
    """One note per (check, arm) whose state could not be observed: said, never invalidating."""
    counts = Counter((check["check"], check["arm"]) for check in checks if check["ok"] is None)
    return [
        f"{check} unknown for {count} measurement(s) of arm {arm}"
        if arm
        else f"{check} unknown (not invalidating)"
        for (check, arm), count in sorted(
            counts.items(), key=lambda item: (item[0][0], item[0][1] or "")
        )
    ]


def _parse_measurement(item: Any, i: int, spec: G3Terms) -> Measurement:
    where = f"measurements[{i}]"
    if not isinstance(item, dict):
        raise EvidenceError(where, "must be an object")
    arm = item.get("arm")
    if not isinstance(arm, str) or arm not in spec.arms:
        raise EvidenceError(
            f"{where}.arm", f"unknown arm {arm!r}; the spec's arms are {sorted(spec.arms)}"
        )
    tier = _integer(item.get("tier"), f"{where}.tier")
    if tier not in spec.tiers:
        raise EvidenceError(f"{where}.tier", f"tier {tier} is not one of {list(spec.tiers)}")
    repetition = _integer(item.get("repetition"), f"{where}.repetition")
    metrics = item.get("metrics")
    if not isinstance(metrics, dict):
        raise EvidenceError(f"{where}.metrics", "must be an object")
    server = item.get("server")
    if server is not None and not isinstance(server, dict):
        raise EvidenceError(f"{where}.server", "must be an object or null")
    raw_sha256 = item.get("raw_sha256")
    if raw_sha256 is not None and not isinstance(raw_sha256, str):
        raise EvidenceError(f"{where}.raw_sha256", "must be a string or null")
    return Measurement(i, arm, spec.arms[arm], tier, repetition, metrics, server or {}, raw_sha256)


def _integer(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EvidenceError(field, "must be a non-negative integer")
    return value


def _check(
    name: str, item: Measurement | None, observed: Any, limit: Any, ok: bool | None, why: str
) -> ValidityCheck:
    where = f"{item.label}: " if item else ""
    return {
        "check": name,
        "arm": item.arm if item else None,
        "tier": item.tier if item else None,
        "repetition": item.repetition if item else None,
        "observed": observed,
        "limit": limit,
        "ok": ok,
        "reason": where + why,
    }


MAX_COUNT = 2**53


def read_count(container: Mapping[str, Any], key: str, field: str) -> float | None:
    """Like read_number, for counts: a negative count, or one beyond 2^53 (past it a float no
    longer holds every whole number, and shares of it overflow), is an EvidenceError."""
    value = read_number(container, key, field)
    if value is not None and value < 0:
        raise EvidenceError(f"{field}.{key}", "must not be negative")
    if value is not None and value > MAX_COUNT:
        raise EvidenceError(f"{field}.{key}", f"is not a count: above {MAX_COUNT:,}")
    return value


def _completed_check(item: Measurement) -> ValidityCheck:
    completed = read_count(item.metrics, "completed", f"measurements[{item.index}].metrics")
    if completed is None:
        return _check("completed", item, None, "> 0", None, "completed requests not reported")
    ok = completed > 0
    why = f"{completed:g} completed requests" if ok else "no completed requests"
    return _check("completed", item, completed, "> 0", ok, why)


def _failed_check(item: Measurement, limit: float) -> ValidityCheck:
    field = f"measurements[{item.index}].metrics"
    completed = read_count(item.metrics, "completed", field)
    failed = read_count(item.metrics, "failed", field)
    # Percent of attempted requests, so a run that failed everything reads 100 %, not 0.
    if completed is None or failed is None or completed + failed <= 0:
        return _check("failed_pct", item, None, limit, None, "failed share not computable")
    share = 100 * failed / (completed + failed)
    ok = share <= limit
    why = f"{share:.2f} % of requests failed (limit {limit:g} %)"
    return _check("failed_pct", item, share, limit, ok, why)


def _concurrency_check(item: Measurement) -> ValidityCheck:
    client = read_count(item.metrics, "max_concurrency", f"measurements[{item.index}].metrics")
    peak = read_count(item.server, "peak_running", f"measurements[{item.index}].server")
    observed = {"max_concurrency": client, "peak_running": peak}
    known = [value for value in (client, peak) if value is not None]
    if not known:
        return _check("concurrency", item, observed, item.tier, None, "concurrency not reported")
    low = min(known)
    ok = low >= item.tier
    why = f"reached concurrency {low:g} of target {item.tier}"
    return _check("concurrency", item, observed, item.tier, ok, why)


def _arm_check(item: Measurement) -> ValidityCheck:
    expected = dict(
        zip(("prefix_caching", "offload_enabled"), ARM_SETTINGS[item.kind], strict=True)
    )
    observed = {name: item.server.get(name) for name in expected}
    for name, value in observed.items():
        if value is not None and not isinstance(value, bool):
            raise EvidenceError(
                f"measurements[{item.index}].server.{name}", "must be true, false or null"
            )
    wrong = [
        name for name, value in observed.items() if value is not None and value != expected[name]
    ]
    if wrong:
        said = ", ".join(f"{name}={observed[name]}" for name in wrong)
        return _check(
            "arm_config", item, observed, expected, False, f"a {item.kind} arm ran with {said}"
        )
    # Older servers do not export every setting: unknown is said, never held against the run.
    if None in observed.values():
        return _check(
            "arm_config", item, observed, expected, None, "server settings not fully reported"
        )
    return _check("arm_config", item, observed, expected, True, f"ran as a {item.kind} arm")


def _hit_rate_check(item: Measurement, floor: float) -> ValidityCheck:
    rate, what = offload_hit_rate(item)
    if rate is None:
        return _check("external_hit_rate", item, None, floor, None, f"{what} not reported")
    ok = rate >= floor
    return _check(
        "external_hit_rate",
        item,
        rate,
        floor,
        ok,
        f"{what} {rate:.3f} (floor {floor:g})",
    )


def offload_hit_rate(item: Measurement) -> tuple[float | None, str]:
    """The offload arm's hit rate and what it is: the side service's own lookup hit rate when
    the cell's `hit_proof` names one (LMCache's counters), else the engine's external one."""
    where = f"measurements[{item.index}].server"
    proof = item.server.get("hit_proof", "engine")
    if proof in (None, "engine"):
        return read_number(item.server, "external_hit_rate", where), "external hit rate"
    if not isinstance(proof, str):
        raise EvidenceError(f"{where}.hit_proof", "must be a side service's name or engine")
    services = item.server.get("side_services")
    services = {} if services is None else services
    if not isinstance(services, dict) or not isinstance(services.get(proof, {}), dict):
        raise EvidenceError(f"{where}.side_services", "must map service names to objects")
    facts = services.get(proof, {})
    rate = read_number(facts, "lookup_hit_rate", f"{where}.side_services.{proof}")
    return rate, f"{proof} lookup hit rate"


def _kv_check(spec: G3Terms, context: G3Context) -> ValidityCheck:
    flag = context["kv_exceeds_vram"]
    if flag is None:
        return _check("kv_exceeds_vram", None, None, True, None, "KV working set vs VRAM unknown")
    why = (
        "the KV working set exceeds VRAM"
        if flag
        else "the KV working set fits in VRAM, so offload is never exercised"
    )
    return _check("kv_exceeds_vram", None, flag, True, flag, why)


def _duplicate_raw_checks(measurements: list[Measurement]) -> list[ValidityCheck]:
    """Two cells backed by the same raw file (same SHA-256) measured nothing twice: a copied
    result gives zero spread and false certainty, so the run is invalid, naming both."""
    first_seen: dict[str, Measurement] = {}
    checks = []
    for item in measurements:
        if item.raw_sha256 is None:
            continue
        earlier = first_seen.setdefault(item.raw_sha256, item)
        if earlier is not item:
            why = (
                f"the same raw result file (SHA-256 {item.raw_sha256[:12]}) as {earlier.label}: "
                "a duplicated measurement"
            )
            checks.append(_check("duplicate_raw", item, item.raw_sha256, "unique", False, why))
    return checks


def _preemption_check(item: Measurement, limit: int) -> ValidityCheck:
    count = read_count(item.server, "preemptions", f"measurements[{item.index}].server")
    if count is None:
        return _check("preemptions", item, None, limit, None, "preemptions not reported")
    why = f"the server preempted {count:g} requests (limit {limit})"
    return _check("preemptions", item, count, limit, count <= limit, why)


def _identical_value_checks(measurements: list[Measurement], spec: G3Terms) -> list[ValidityCheck]:
    """One arm at one tier reporting exactly the same value of a clause metric in two
    repetitions: independent benches never agree to the last bit, so a copied value (in a
    distinct file, not caught by its hash) makes the run invalid, naming both."""
    # A goodput share is no bench's reported value: two repetitions at 100 % agree honestly.
    names = sorted({clause.metric for clause in spec.clauses if clause.slo is None})
    first_seen: dict[tuple[str, int, str, float], Measurement] = {}
    checks = []
    for item in measurements:
        for name in names:
            value = metric_value(item.metrics, name)
            if not is_number(value) or finite_float(value) is None:
                continue
            key = (item.arm, item.tier, name, float(value))
            earlier = first_seen.setdefault(key, item)
            if earlier is not item:
                why = f"{name} {float(value):g} is exactly the value of {earlier.label}"
                checks.append(
                    _check("identical_values", item, float(value), "distinct", False, why)
                )
    return checks
