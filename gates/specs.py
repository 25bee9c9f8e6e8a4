"""Gate specs: the JSON contract of each gate kind, its vocabulary (arm kinds, change kinds,
metric names), its schema, the one validation and the defaults. The decision engine reads only
specs this module accepted. Pure: plain JSON in, field errors out; imports no Django and nothing
from gates.decisions (the engine imports this module, never the other way round).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, validators

from gates import spec_statistics
from runners.adapters import json_limits
from runners.workloads import DATASET_FIELDS

GATE_KINDS = ("G1", "G2", "G3", "G4")
DATASETS = ["random", "prefix_repetition", "cold_recovery", "sharegpt"]
ARM_KINDS = ("resident", "offload", "recompute")
CHANGE_KINDS = ("reduction", "gain", "ratio")
TEMPLATES_DIR = Path(__file__).resolve().parent / "spec_templates"

# A metric a spec may name -> (key in a normalized run's metrics, percentile key or None,
# which way is better).
_LATENCY_STATS = {"p50": "median", "p90": "p90", "p99": "p99", "mean": "mean"}
METRICS: dict[str, tuple[str, str | None, str]] = {
    f"{family}_{stat}": (f"{family}_ms", key, "lower")
    for family in ("ttft", "tpot", "itl", "e2el")
    for stat, key in _LATENCY_STATS.items()
}
METRICS.update(
    {
        name: (name, None, "higher")
        for name in ("output_throughput", "request_throughput", "total_token_throughput")
    }
)
KNOWN_METRICS = frozenset(METRICS)


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _integer(low: int, high: int) -> dict:
    return {"type": "integer", "minimum": low, "maximum": high}


def _number(low: float, high: float) -> dict:
    return {"type": "number", "minimum": low, "maximum": high}


def _obj(properties: dict, required: list[str] | None = None) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required if required is not None else list(properties),
        "additionalProperties": False,
    }


NULLABLE_NUMBER = {"type": ["number", "null"], "minimum": 0, "maximum": 1e9}
VERSION_TEXT = {"type": ["string", "null"], "pattern": r"^[0-9][0-9A-Za-z.+_-]{0,39}$"}
STOP_LOSS = _obj({"max_attempts": _integer(1, 10)})
WORKLOAD = _obj(
    {
        "dataset": {"enum": DATASETS},
        "input_len": _integer(1, 2_000_000),
        "prefix_len": _integer(0, 2_000_000),
        "suffix_len": _integer(0, 2_000_000),
        "output_len": _integer(1, 100_000),
        "num_prompts": _integer(1, 100_000),
        "seed": _integer(0, 2**31 - 1),
        "cold_recovery": {"type": "boolean"},
        "max_concurrency": _integer(1, 4096),
        "num_prefixes": _integer(1, 1_000_000),
    },
    required=["dataset", "num_prompts", "seed"],
)
# The fields a dataset's bench command reads; missing, the run would fail at its first bench.
WORKLOAD["allOf"] = [
    {"if": {"properties": {"dataset": {"const": name}}}, "then": {"required": list(fields)}}
    for name, fields in DATASET_FIELDS.items()
]
SERVER = _obj(
    {
        "model_path": {"type": "string", "minLength": 1, "maxLength": 300},
        "tensor_parallel_size": _integer(1, 64),
        "max_model_len": _integer(1, 10_000_000),
        "gpu_memory_utilization": _number(0.05, 1.0),
        "offload_gib": _number(0, 1_000_000),
    },
    required=[],
)


def _gate(kind: str, sections: dict, *, server: bool = True, optional: dict | None = None) -> dict:
    """A gate kind's spec: gate, version, its own sections and stop_loss; server (and the
    kind's `optional` sections) may be left out."""
    required = {
        "gate": {"const": kind},
        "version": _integer(1, 1_000_000),
        **sections,
        "stop_loss": STOP_LOSS,
    }
    extra = {**({"server": SERVER} if server else {}), **(optional or {})}
    return _obj({**required, **extra}, required=list(required))


G1_SCHEMA = _gate(
    "G1",
    {
        "expect": _obj(
            {
                "gpu_vendor": {"enum": ["nvidia", "amd", None]},
                "gpu_model_pattern": {"type": ["string", "null"], "maxLength": 200},
                "gpu_count": _integer(1, 1024),
                "gpu_memory_min_gib": NULLABLE_NUMBER,
                "driver_min": VERSION_TEXT,
                "cuda_min": VERSION_TEXT,
                "rocm_min": VERSION_TEXT,
                "vllm_min": VERSION_TEXT,
                "host_memory_min_gib": NULLABLE_NUMBER,
                "offload_tier": _obj(
                    {"required": {"type": "boolean"}, "min_capacity_gib": NULLABLE_NUMBER}
                ),
                "free_disk_min_gib": NULLABLE_NUMBER,
                "kernel_pattern": {"type": ["string", "null"], "maxLength": 200},
            },
            required=["gpu_count"],
        ),
    },
    server=False,
)
G2_SCHEMA = _gate(
    "G2",
    {
        "health": _obj({"timeout_s": _integer(1, 86_400)}),
        "equivalence": _obj(
            {
                "prompts": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 500,
                    "items": {"type": "string", "minLength": 1, "maxLength": 20_000},
                },
                "max_tokens": _integer(1, 4096),
                "max_mismatch_pct": _number(0, 100),
            }
        ),
        "offload_hit": _obj(
            {
                "min_external_hit_rate": _number(0, 1),
                "workload": WORKLOAD,
                "tier": _integer(1, 4096),
            }
        ),
        "noise_floor": _obj(
            {
                "repetitions": _integer(2, 50),
                "confidence": {"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 1},
                "metric": {"type": "string"},
                "max_noise_pct": _number(0, 1000),
                "tier": _integer(1, 4096),
                "workload": WORKLOAD,
            },
            required=["repetitions", "metric", "max_noise_pct", "tier", "workload"],
        ),
    },
)
CLAUSE = _obj(
    {
        "metric": {"type": "string", "minLength": 1, "maxLength": 60},
        "compare": {"type": "string", "pattern": r"^[a-z_]{1,30}/[a-z_]{1,30}$"},
        "change": {"enum": list(CHANGE_KINDS)},
        "at_least_pct": {"type": "number", "exclusiveMinimum": 0, "maximum": 100_000},
        "at_least": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000},
        "tiers": {
            "oneOf": [
                {"const": "all"},
                {"type": "array", "minItems": 1, "uniqueItems": True, "items": _integer(1, 4096)},
            ]
        },
    },
    required=["metric", "compare", "change", "tiers"],
)
G3_SCHEMA = _gate(
    "G3",
    {
        "workload": WORKLOAD,
        "arms": {
            "type": "object",
            "properties": {
                role: {"enum": list(ARM_KINDS)} for role in ("baseline", "offload", "recompute")
            },
            "required": ["baseline", "offload"],
            "additionalProperties": False,
        },
        "tiers": {
            "type": "array",
            "minItems": 1,
            "maxItems": 16,
            "uniqueItems": True,
            "items": _integer(1, 4096),
        },
        "repetitions": _obj({"min": _integer(2, 50), "max": _integer(2, 50)}),
        "confidence": {"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 1},
        "clauses": {"type": "array", "minItems": 1, "maxItems": 50, "items": CLAUSE},
        "validity": _obj(
            {
                "max_failed_pct": _number(0, 100),
                "min_external_hit_rate": _number(0, 1),
                "require_kv_exceeds_vram": {"type": "boolean"},
            }
        ),
    },
)
G3_SCHEMA["properties"]["statistics"] = spec_statistics.STATISTICS
CLAUSE["properties"].update(spec_statistics.CLAIMS)
G4_SCHEMA = _gate(
    "G4",
    {
        # Down to seconds, for compressed soaks (the demo's, the fault tests'), labelled so.
        "duration_h": _number(0.001, 24 * 60),
        "window_min": _number(0.01, 24 * 60),
        "load": WORKLOAD,
        "limits": _obj(
            {
                "max_crashes": _integer(0, 1000),
                "max_error_rate_pct": _number(0, 100),
                "max_throughput_drift_pct": _number(0, 1000),
                "max_ttft_p99_change_pct": _number(0, 10_000),
                "max_memory_growth_mib_per_h": _number(0, 1e9),
                "max_unobserved_pct": _number(0, 100),
            }
        ),
    },
    optional={
        # How the agent treats a crashed server and the host's disk (docs/soak.md).
        "soak": _obj(
            {
                "restart_on_crash": {"type": "boolean"},
                "max_restarts": _integer(0, 1000),
                "free_space_floor_gib": _number(0, 1e6),
            },
            required=[],
        )
    },
)
SCHEMAS = {"G1": G1_SCHEMA, "G2": G2_SCHEMA, "G3": G3_SCHEMA, "G4": G4_SCHEMA}
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


def validate_spec(kind: str, document: Any) -> list[FieldError]:
    """Every problem with `document` as a spec for gate `kind`; empty when it is valid."""
    if kind not in SCHEMAS:
        return [FieldError("gate", f"unknown gate kind {kind!r}")]
    if not isinstance(document, dict):
        return [FieldError("(document)", "a gate spec must be a JSON object")]
    errors = [
        found for error in _VALIDATORS[kind].iter_errors(document) for found in _field_errors(error)
    ] + [
        FieldError(json_limits.format_path(path) or "(document)", problem)
        for path, problem in json_limits.storable_problems(document)  # what PostgreSQL refuses
    ]
    if errors:
        return sorted(set(errors), key=lambda e: (e.field, e.message))
    return _semantic_errors(kind, document)


def default_spec(kind: str) -> dict:
    """The default template for a gate kind (a fresh copy each call)."""
    return json.loads((TEMPLATES_DIR / f"{kind}.json").read_text())


def spec_digest(document: dict) -> str:
    """SHA-256 of the canonical JSON: what both parties sign."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def with_version(document: dict, version: int) -> dict:
    updated = copy.deepcopy(document)
    updated["version"] = version
    return updated


def _semantic_errors(kind: str, document: dict) -> list[FieldError]:
    """The rules a JSON schema cannot say, run once the document has the schema's shape."""
    if kind == "G1":
        return _g1_errors(document["expect"])
    if kind == "G2":
        return _metric_errors("noise_floor.metric", document["noise_floor"]["metric"])
    if kind == "G3":
        return _g3_errors(document)
    if document["window_min"] > document["duration_h"] * 60:
        return [FieldError("window_min", "a window cannot be longer than the soak")]
    return []


def _g1_errors(expect: dict) -> list[FieldError]:
    errors = []
    for key in ("gpu_model_pattern", "kernel_pattern"):
        try:
            re.compile(expect.get(key) or "")
        except (re.error, OverflowError) as error:  # OverflowError: a{4294967296}
            errors.append(
                FieldError(f"expect.{key}", f"is not a valid regular expression: {error}")
            )
    return errors


def _metric_errors(field: str, name: str) -> list[FieldError]:
    if name in KNOWN_METRICS:
        return []
    return [FieldError(field, f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}")]


def _g3_errors(document: dict) -> list[FieldError]:
    errors = []
    repetitions = document["repetitions"]
    if repetitions["min"] > repetitions["max"]:
        errors.append(FieldError("repetitions.min", "must not exceed repetitions.max"))
    for i, clause in enumerate(document["clauses"]):
        where = f"clauses[{i}]"
        errors += _metric_errors(f"{where}.metric", clause["metric"])
        errors += _compare_errors(f"{where}.compare", clause["compare"], document["arms"])
        errors += _threshold_errors(where, clause)
        errors += _clause_tier_errors(f"{where}.tiers", clause["tiers"], document["tiers"])
        percentile = METRICS.get(clause["metric"], ("", None))[1]
        rules = spec_statistics.clause_problems(clause, percentile, document["workload"])
        errors += [FieldError(f"{where}.{name}", message) for name, message in rules]
    plan = spec_statistics.repetition_problems(repetitions)
    return errors + [FieldError(f"repetitions.{name}", message) for name, message in plan]


def _compare_errors(field: str, compare: str, arms: dict) -> list[FieldError]:
    a, b = compare.split("/")
    unknown = [role for role in (a, b) if role not in arms]
    if unknown:
        return [
            FieldError(field, f"unknown arm {unknown[0]!r}; the spec's arms are {sorted(arms)}")
        ]
    if a == b:
        return [FieldError(field, "compares an arm with itself")]
    return []


def _threshold_errors(where: str, clause: dict) -> list[FieldError]:
    # A ratio is a bare factor (8.6x); a reduction or gain is in percent.
    change = clause["change"]
    key, other = ("at_least", "at_least_pct") if change == "ratio" else ("at_least_pct", "at_least")
    if other in clause:
        return [FieldError(f"{where}.{other}", f"does not apply to change {change!r}; use {key}")]
    if key not in clause:
        return [FieldError(f"{where}.{key}", f"is required for change {change!r}")]
    if change == "reduction" and clause[key] >= 100:
        return [FieldError(f"{where}.{key}", "a reduction must be below 100 %")]
    return []


def _clause_tier_errors(field: str, chosen: Any, tiers: list[int]) -> list[FieldError]:
    odd = [] if chosen == "all" else [tier for tier in chosen if tier not in tiers]
    if odd:
        return [FieldError(field, f"tier {odd[0]} is not one of the spec's tiers {tiers}")]
    return []


def _field_errors(error) -> list[FieldError]:
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


def _field_name(path: list) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(document)"
