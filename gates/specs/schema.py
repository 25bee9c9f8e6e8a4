"""The gate specs' vocabulary (gate kinds, datasets, arm kinds, change kinds, metric names)
and the JSON schema of each gate kind. Pure; gates/specs/validation.py validates against these and
is
the module callers use (it re-exports the vocabulary).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from documents.cell import Better
from documents.spec import ArmKind, ChangeKind, Dataset, GateKind, TraceFormatName
from gates.specs import statistics as spec_statistics
from runners.workloads import DATASET_FIELDS

# The vocabularies are documents.spec's Literals: one definition for the schema and the types.
GATE_KINDS: tuple[str, ...] = get_args(GateKind)
DATASETS: list[str] = list(get_args(Dataset))
ARM_KINDS: tuple[str, ...] = get_args(ArmKind)
CHANGE_KINDS: tuple[str, ...] = get_args(ChangeKind)
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

# A metric a spec may name -> (key in a normalized run's metrics, percentile key or None,
# which way is better).
_LATENCY_STATS = {"p50": "median", "p90": "p90", "p99": "p99", "mean": "mean"}
METRICS: dict[str, tuple[str, str | None, Better]] = {
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
# Not a normalized metric: the share of a bench's requests within a clause's `slo`, computed
# from its per-request numbers (gates/decisions/goodput.py).
GOODPUT = "goodput"
KNOWN_METRICS = frozenset(METRICS)
CLAUSE_METRICS = KNOWN_METRICS | {GOODPUT}
ARM_ROLES = ("baseline", "offload", "recompute")


# A JSON schema (or a part of one) is free-form JSON.
JsonSchema = dict[str, Any]


def _integer(low: int, high: int) -> JsonSchema:
    return {"type": "integer", "minimum": low, "maximum": high}


def _number(low: float, high: float) -> JsonSchema:
    return {"type": "number", "minimum": low, "maximum": high}


def _obj(properties: JsonSchema, required: list[str] | None = None) -> JsonSchema:
    return {
        "type": "object",
        "properties": properties,
        "required": required if required is not None else list(properties),
        "additionalProperties": False,
    }


# A bound of an SLO in ms: above zero, below a day.
_SLO_BOUND = {"type": "number", "exclusiveMinimum": 0, "maximum": 86_400_000}
SLO = {**_obj({"ttft_ms": _SLO_BOUND, "tpot_ms": _SLO_BOUND}, required=[]), "minProperties": 1}
NULLABLE_NUMBER = {"type": ["number", "null"], "minimum": 0, "maximum": 1e9}
VERSION_TEXT = {"type": ["string", "null"], "pattern": r"^[0-9][0-9A-Za-z.+_-]{0,39}$"}
STOP_LOSS = _obj({"max_attempts": _integer(1, 10)})
TRACE_FORMATS: tuple[str, ...] = get_args(TraceFormatName)
TRACE = _obj(
    {
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "format": {"enum": list(TRACE_FORMATS)},
        "block_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000_000},
        "time_scale": _number(0.001, 1000),
        "sample_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "warmup_s": _number(0, 1_000_000),
        "max_arrival_error_p99_ms": _number(0.1, 60_000),
    },
    required=["sha256", "format"],
)
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
        "trace": TRACE,
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


def _gate(
    kind: str, sections: JsonSchema, *, server: bool = True, optional: JsonSchema | None = None
) -> JsonSchema:
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
                "engine_min": VERSION_TEXT,
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
        "slo": SLO,
        "arm": {"enum": list(ARM_ROLES)},
        "tiers": {
            "oneOf": [
                {"const": "all"},
                {"type": "array", "minItems": 1, "uniqueItems": True, "items": _integer(1, 4096)},
            ]
        },
    },
    # compare and change, or a goodput floor's arm: validation.py says which one is missing.
    required=["metric", "tiers"],
)
G3_SCHEMA = _gate(
    "G3",
    {
        "workload": WORKLOAD,
        "arms": {
            "type": "object",
            "properties": {role: {"enum": list(ARM_KINDS)} for role in ARM_ROLES},
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
# A soak plans at most this many windows (duration_h x 60 / window_min): 72 h of 10 s windows is
# 25,920. Each window keeps a stored sample and up to ten raw files, which its evidence bundle
# carries (gates.evidence.layout sizes the bundle's member limit from this).
MAX_SOAK_WINDOWS = 30_000
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
        ),
        # Which windows' raw files Tollgate keeps once the evidence is sealed (docs/soak.md
        # "Retention"); left out, every window's raw files are kept.
        "retention": _obj(
            {
                "keep_every_nth_window": _integer(1, 1_000_000),
                "keep_after_sealed_days": _number(0, 3650),
            }
        ),
    },
)
SCHEMAS = {"G1": G1_SCHEMA, "G2": G2_SCHEMA, "G3": G3_SCHEMA, "G4": G4_SCHEMA}
