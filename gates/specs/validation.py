"""Gate specs: the one validation of each gate kind's JSON contract (the schema and vocabulary
in gates/specs/schema.py, imported from there), the semantic rules, the digest and the defaults.
parse_spec is the edge where JSON becomes a typed documents.spec.Spec: the decision engine
reads only specs this module accepted. Pure: plain JSON in, field errors out; imports no
Django and nothing from gates.decisions (the engine imports this module, never the other way
round).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, overload

from jsonschema import Draft202012Validator, ValidationError, validators

from documents.spec import (
    Arms,
    ClauseSpec,
    Expect,
    G1Spec,
    G2Spec,
    G3Spec,
    G4Spec,
    Spec,
)
from gates.specs import statistics as spec_statistics
from gates.specs.schema import (
    CLAUSE_METRICS,
    GOODPUT,
    KNOWN_METRICS,
    MAX_SOAK_WINDOWS,
    METRICS,
    SCHEMAS,
    TEMPLATES_DIR,
)
from runners import jsonlimits
from runners.commands import PLACEHOLDERS, KindError


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidSpecError(ValueError):
    """A document parse_spec refused; `errors` names every problem (FieldError is a value,
    not an exception, so validate_spec can return them all)."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(error) for error in errors))


_TYPES = Draft202012Validator.TYPE_CHECKER
# jsonschema counts 8.0 as an integer and lets NaN past every bound (NaN compares false);
# the engine slices by repetitions and sums thresholds, so a contract number is a finite
# number and a count is a JSON integer.
_StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=_TYPES.redefine_many(
        {
            "integer": lambda _, value: _TYPES.is_type(value, "integer") and isinstance(value, int),
            "number": lambda _, value: (
                _TYPES.is_type(value, "number")
                and (not isinstance(value, float) or math.isfinite(value))
            ),
        }
    ),
)
_VALIDATORS = {kind: _StrictValidator(schema) for kind, schema in SCHEMAS.items()}


@overload
def parse_spec(document: object, kind: Literal["G1"]) -> G1Spec: ...
@overload
def parse_spec(document: object, kind: Literal["G2"]) -> G2Spec: ...
@overload
def parse_spec(document: object, kind: Literal["G3"]) -> G3Spec: ...
@overload
def parse_spec(document: object, kind: Literal["G4"]) -> G4Spec: ...
@overload
def parse_spec(document: object, kind: str | None = None) -> Spec: ...
def parse_spec(document: object, kind: str | None = None) -> Spec:
    """`document` as the typed spec of gate `kind` (by default the kind it states), or
    InvalidSpecError with every problem validate_spec finds. The same object, not a copy:
    JSON stays the stored form, the type says what its keys hold."""
    if kind is None:
        stated = document.get("gate") if isinstance(document, dict) else None
        kind = stated if isinstance(stated, str) else str(stated)
    errors = validate_spec(kind, document)
    if errors:
        raise InvalidSpecError(errors)
    return _accepted(document)


def validate_spec(kind: str, document: object) -> list[FieldError]:
    """Every problem with `document` as a spec for gate `kind`; empty when it is valid."""
    if kind not in SCHEMAS:
        return [FieldError("gate", f"unknown gate kind {kind!r}")]
    if not isinstance(document, dict):
        return [FieldError("(document)", "a gate spec must be a JSON object")]
    errors = [
        found for error in _VALIDATORS[kind].iter_errors(document) for found in _field_errors(error)
    ] + [
        FieldError(jsonlimits.format_path(path) or "(document)", problem)
        for path, problem in jsonlimits.storable_problems(document)  # what PostgreSQL refuses
    ]
    if errors:
        return sorted(set(errors), key=lambda e: (e.field, e.message))
    return _semantic_errors(_accepted(document))


def _accepted(document: object) -> Spec:
    # The schema (its `gate` const picks the kind) is what makes a JSON object a Spec; a type
    # checker cannot follow it, so the cast records what validation established.
    return cast(Spec, document)


@overload
def default_spec(kind: Literal["G1"]) -> G1Spec: ...
@overload
def default_spec(kind: Literal["G2"]) -> G2Spec: ...
@overload
def default_spec(kind: Literal["G3"]) -> G3Spec: ...
@overload
def default_spec(kind: Literal["G4"]) -> G4Spec: ...
@overload
def default_spec(kind: str) -> Spec: ...
def default_spec(kind: str) -> Spec:
    """The default template for a gate kind (a fresh copy each call)."""
    return parse_spec(json.loads((TEMPLATES_DIR / f"{kind}.json").read_text()), kind)


def spec_digest(document: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON: what both parties sign."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def inventory_digest(engagement_id: int, inventory: Mapping[str, Any]) -> str:
    """What both parties sign to amend an engagement's accepted host inventory: the engagement
    is inside the digest, so a signature given for one engagement holds for no other."""
    return spec_digest({"engagement": engagement_id, "inventory": inventory})


def with_version(document: Mapping[str, Any], version: int) -> dict[str, Any]:
    updated = copy.deepcopy(dict(document))
    updated["version"] = version
    return updated


def _semantic_errors(spec: Spec) -> list[FieldError]:
    """The rules a JSON schema cannot say, run once the document has the schema's shape."""
    server = spec.get("server") if spec["gate"] != "G1" else None  # G1 starts no server
    return _server_errors(cast(Mapping[str, Any], server or {})) + _kind_errors(spec)


def _server_errors(server: Mapping[str, Any]) -> list[FieldError]:
    """Server values a run start would refuse (a model_path with '..' or shell text), checked
    by the same kinds the command templates use, so such a spec is never signed."""
    errors = []
    for name, value in server.items():
        kind = PLACEHOLDERS.get(name)
        try:
            if kind is not None:
                kind.check(value)
        except KindError as problem:
            errors.append(FieldError(f"server.{name}", str(problem)))
    return errors


def _kind_errors(spec: Spec) -> list[FieldError]:
    if spec["gate"] == "G1":
        return _g1_errors(spec["expect"])
    if spec["gate"] == "G2":
        return _metric_errors("noise_floor.metric", spec["noise_floor"]["metric"])
    if spec["gate"] == "G3":
        return _g3_errors(spec)
    return _g4_errors(spec)


def _g4_errors(spec: G4Spec) -> list[FieldError]:
    minutes = spec["duration_h"] * 60
    if spec["window_min"] > minutes:
        return [FieldError("window_min", "a window cannot be longer than the soak")]
    windows = math.ceil(minutes / spec["window_min"] - 1e-9)
    if windows > MAX_SOAK_WINDOWS:
        shortest = minutes / MAX_SOAK_WINDOWS
        return [
            FieldError(
                "window_min",
                f"{spec['duration_h']:g} h of {spec['window_min']:g}-minute windows is "
                f"{windows:,} windows; at most {MAX_SOAK_WINDOWS:,}: make each window at "
                f"least {shortest:.3g} minutes",
            )
        ]
    return []


def _g1_errors(expect: Expect) -> list[FieldError]:
    errors = []
    patterns = {
        "gpu_model_pattern": expect.get("gpu_model_pattern"),
        "kernel_pattern": expect.get("kernel_pattern"),
    }
    for key, pattern in patterns.items():
        try:
            re.compile(pattern or "")
        except (re.error, OverflowError) as error:  # OverflowError: a{4294967296}
            errors.append(
                FieldError(f"expect.{key}", f"is not a valid regular expression: {error}")
            )
    return errors


def _metric_errors(
    field: str, name: str, known: frozenset[str] = KNOWN_METRICS
) -> list[FieldError]:
    if name in known:
        return []
    return [FieldError(field, f"unknown metric {name!r}; known: {', '.join(sorted(known))}")]


def _g3_errors(document: G3Spec) -> list[FieldError]:
    errors: list[FieldError] = []
    repetitions = document["repetitions"]
    if repetitions["min"] > repetitions["max"]:
        errors.append(FieldError("repetitions.min", "must not exceed repetitions.max"))
    for i, clause in enumerate(document["clauses"]):
        where = f"clauses[{i}]"
        errors += _metric_errors(f"{where}.metric", clause["metric"], CLAUSE_METRICS)
        errors += _clause_tier_errors(f"{where}.tiers", clause["tiers"], document["tiers"])
        errors += _slo_errors(where, clause)
        if clause["metric"] == GOODPUT and "arm" in clause:
            errors += _floor_errors(where, clause, document["arms"])
            continue
        errors += _ratio_shape_errors(where, clause)
        if "compare" not in clause or "change" not in clause:
            continue
        errors += _compare_errors(f"{where}.compare", clause["compare"], document["arms"])
        errors += _threshold_errors(where, clause)
        percentile = METRICS.get(clause["metric"], ("", None))[1]
        rules = spec_statistics.clause_problems(clause, percentile, document["workload"])
        errors += [FieldError(f"{where}.{name}", message) for name, message in rules]
    plan = spec_statistics.repetition_problems(repetitions)
    return errors + [FieldError(f"repetitions.{name}", message) for name, message in plan]


def _slo_errors(where: str, clause: ClauseSpec) -> list[FieldError]:
    """An SLO belongs to a goodput clause, and a goodput clause has one."""
    if clause["metric"] == GOODPUT and "slo" not in clause:
        return [FieldError(f"{where}.slo", "is required for metric 'goodput'")]
    if clause["metric"] != GOODPUT and "slo" in clause:
        return [FieldError(f"{where}.slo", "applies only to metric 'goodput'")]
    return []


def _ratio_shape_errors(where: str, clause: ClauseSpec) -> list[FieldError]:
    """A clause comparing arms names them and the change; `arm` belongs to goodput floors."""
    errors = [
        FieldError(f"{where}.{key}", "is required")
        for key in ("compare", "change")
        if key not in clause
    ]
    if "arm" in clause:
        errors.append(FieldError(f"{where}.arm", "only a goodput floor names one arm"))
    return errors


def _floor_errors(where: str, clause: ClauseSpec, arms: Arms) -> list[FieldError]:
    """A goodput floor: one of the spec's arms, its share in percent, nothing of a comparison."""
    errors = [
        FieldError(f"{where}.{key}", "does not apply to a goodput floor (it names one arm)")
        for key in ("compare", "change", "at_least", "claimed", "claimed_pct")
        if key in clause
    ]
    if clause["arm"] not in arms:
        errors.append(
            FieldError(
                f"{where}.arm", f"unknown arm {clause['arm']!r}; the spec's arms are {sorted(arms)}"
            )
        )
    if "at_least_pct" not in clause:
        errors.append(FieldError(f"{where}.at_least_pct", "is required for a goodput floor"))
    elif clause["at_least_pct"] > 100:
        errors.append(FieldError(f"{where}.at_least_pct", "a share cannot exceed 100 %"))
    return errors


def _compare_errors(field: str, compare: str, arms: Arms) -> list[FieldError]:
    a, b = compare.split("/")
    unknown = [role for role in (a, b) if role not in arms]
    if unknown:
        return [
            FieldError(field, f"unknown arm {unknown[0]!r}; the spec's arms are {sorted(arms)}")
        ]
    if a == b:
        return [FieldError(field, "compares an arm with itself")]
    return []


def _threshold_errors(where: str, clause: ClauseSpec) -> list[FieldError]:
    # A ratio is a bare factor (8.6x); a reduction or gain is in percent.
    change = clause["change"]
    key, other = ("at_least", "at_least_pct") if change == "ratio" else ("at_least_pct", "at_least")
    if other in clause:
        return [FieldError(f"{where}.{other}", f"does not apply to change {change!r}; use {key}")]
    if key not in clause:
        return [FieldError(f"{where}.{key}", f"is required for change {change!r}")]
    # For a reduction `key` is at_least_pct, present from here on.
    if change == "reduction" and clause["at_least_pct"] >= 100:
        return [FieldError(f"{where}.{key}", "a reduction must be below 100 %")]
    return []


def _clause_tier_errors(
    field: str, chosen: Literal["all"] | list[int], tiers: list[int]
) -> list[FieldError]:
    odd = [] if chosen == "all" else [tier for tier in chosen if tier not in tiers]
    if odd:
        return [FieldError(field, f"tier {odd[0]} is not one of the spec's tiers {tiers}")]
    return []


def _field_errors(error: ValidationError) -> list[FieldError]:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        return [FieldError(_field_name([*path, name]), "is required") for name in missing]
    if error.validator == "additionalProperties":
        known = error.schema.get("properties", {})
        unknown = sorted(str(name) for name in error.instance if name not in known)
        return [FieldError(_field_name([*path, name]), "is not a known field") for name in unknown]
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return [FieldError(_field_name(path), message)]


def _field_name(path: list[str | int]) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(document)"
