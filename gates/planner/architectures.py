"""The planner's models: architecture fields, the packaged presets, Hugging Face config.json
parsing, and the input parsers the planner shares. Pure: imports no Django and does no I/O
beyond reading its packaged preset file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

KV_DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
WEIGHT_DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}
MAX_COUNT = 2**63 - 1  # beyond any real count of bytes or tokens; keeps float maths finite
# Layer kinds that keep a fixed-size recurrent state instead of per-token KV.
STATEFUL_LAYER_TYPES = frozenset({"linear_attention", "mamba", "conv"})
# A served model name matches a preset only at a word boundary: "-instruct" yes, ".2" no.
_NAME_SUFFIX = re.compile(r"^[-_ ]")


class PlannerError(ValueError):
    """Bad planner input; `field` names the offending request or config field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ModelArch:
    """What decides KV size. `layers` counts layers that cache KV; MoE plays no part."""

    name: str
    layers: int
    kv_heads: int = 0
    head_dim: int = 0
    mla_latent_dim: int | None = None  # MLA: kv_lora_rank + qk_rope_head_dim, one per layer
    sliding_window: int | None = None
    sliding_layers: int = 0
    max_context: int | None = None
    parameters: int | None = None
    heads: int | None = None  # query heads: the attention cost of prefill (gates.planner.speed)
    active_parameters: int | None = None  # per token (MoE); None: all of `parameters`
    weight_dtype: str = "bf16"
    weight_bytes: int | None = None
    notes: tuple[str, ...] = ()


# ---- models: architecture fields, Hugging Face config.json ------------------------------------


def model_from_fields(data: Mapping[str, Any], path: str = "model") -> ModelArch:
    """A model given by its architecture fields (the preset file's format)."""
    if not isinstance(data, Mapping):
        raise PlannerError(path, "must be a preset name or an object of architecture fields")
    latent = parse_optional_int(data, "mla_latent_dim", path)
    window = parse_optional_int(data, "sliding_window", path)
    model = ModelArch(
        name=str(data.get("name") or data.get("display_name") or "custom"),
        layers=parse_required_int(data, "layers", path),
        kv_heads=0 if latent else parse_required_int(data, "kv_heads", path),
        head_dim=0 if latent else parse_required_int(data, "head_dim", path),
        mla_latent_dim=latent,
        sliding_window=window,
        sliding_layers=(parse_optional_int(data, "sliding_layers", path) or 0) if window else 0,
        max_context=parse_optional_int(data, "max_context", path),
        parameters=parse_optional_int(data, "parameters", path),
        heads=parse_optional_int(data, "heads", path),
        active_parameters=parse_optional_int(data, "active_parameters", path),
        weight_dtype=parse_dtype(data.get("weight_dtype", "bf16"), WEIGHT_DTYPE_BYTES, path),
        weight_bytes=parse_optional_int(data, "weight_bytes", path, minimum=0),
    )
    if model.sliding_layers > model.layers:
        raise PlannerError(f"{path}.sliding_layers", "cannot exceed layers")
    return model


def model_from_config(config: Mapping[str, Any], path: str = "config") -> ModelArch:
    """A model from a Hugging Face config.json (multimodal configs: their `text_config`)."""
    if not isinstance(config, Mapping):
        raise PlannerError(path, "must be a JSON object (the model's config.json)")
    if config.get("text_config") is not None:
        return model_from_config(config["text_config"], f"{path}.text_config")
    layers = parse_required_int(config, "num_hidden_layers", path)
    name = str(config.get("_name_or_path") or config.get("model_type") or "config.json")
    max_context = parse_optional_int(config, "max_position_embeddings", path)
    if config.get("kv_lora_rank") is not None:
        # MLA caches one compressed latent plus the shared RoPE key per layer, not K and V per head.
        latent = parse_required_int(config, "kv_lora_rank", path)
        rope = parse_required_int(config, "qk_rope_head_dim", path)
        return ModelArch(
            name=name, layers=layers, mla_latent_dim=latent + rope, max_context=max_context
        )
    heads = parse_required_int(config, "num_attention_heads", path)
    kv_heads = parse_optional_int(config, "num_key_value_heads", path) or heads
    head_dim = parse_optional_int(config, "head_dim", path) or _derived_head_dim(
        config, heads, path
    )
    kv_layers, window, sliding, notes = _attention_layers(config, layers, path)
    return ModelArch(
        name=name,
        layers=kv_layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        sliding_window=window,
        sliding_layers=sliding,
        notes=notes,
        max_context=max_context,
        heads=heads,
    )


def _derived_head_dim(config: Mapping[str, Any], heads: int, path: str) -> int:
    hidden = parse_required_int(config, "hidden_size", path)
    if hidden % heads:
        raise PlannerError(f"{path}.head_dim", "absent, and hidden_size is not a multiple of heads")
    return hidden // heads


def _attention_layers(
    config: Mapping[str, Any], layers: int, path: str
) -> tuple[int, int | None, int, tuple[str, ...]]:
    """(layers caching KV, window, windowed layers, notes) from layer_types and sliding_window."""
    types = config.get("layer_types")
    if types is None:
        if config.get("sliding_window") and config.get("use_sliding_window") is not False:
            note = "sliding_window without layer_types: every layer counted as full attention"
            return layers, None, 0, (f"{note} (an upper bound).",)
        return layers, None, 0, ()
    if not isinstance(types, list) or len(types) != layers:
        raise PlannerError(f"{path}.layer_types", f"must be a list of {layers} layer types")
    if not all(isinstance(kind, str) for kind in types):
        raise PlannerError(f"{path}.layer_types", "must list layer types as strings")
    stateful = sum(kind in STATEFUL_LAYER_TYPES for kind in types)
    sliding = sum(kind == "sliding_attention" for kind in types)
    notes = (f"{stateful} layers keep a fixed-size state and cache no KV.",) if stateful else ()
    if not sliding:
        return layers - stateful, None, 0, notes
    window = parse_required_int(config, "sliding_window", path)
    return layers - stateful, window, sliding, notes


# ---- presets ---------------------------------------------------------------------------------


@cache
def _preset_table() -> dict[str, dict[str, Any]]:
    text = resources.files("gates.planner").joinpath("presets.json").read_text(encoding="utf-8")
    models: dict[str, dict[str, Any]] = json.loads(text)["models"]
    return models


def preset_names() -> list[str]:
    return sorted(_preset_table())


def preset_display_names() -> dict[str, str]:
    """Preset name -> the human name shown in a picker, in name order."""
    table = _preset_table()
    return {name: str(table[name].get("display_name") or name) for name in sorted(table)}


def preset_model(name: str) -> ModelArch:
    table = _preset_table()
    for key, entry in table.items():
        if name == key or name in entry.get("aliases", ()):
            return model_from_fields({**entry, "name": key}, path=f"presets.{key}")
    raise PlannerError("model", f"unknown model {name!r}; presets: {', '.join(sorted(table))}")


def preset_for_model_name(model_name: str) -> str | None:
    """The preset a served model name refers to ("Qwen/Qwen3-32B-AWQ" -> "qwen3-32b"), or None.

    Case-insensitive, after any "org/" prefix; the longest preset name or alias that the name
    equals or starts with, followed by "-", "_" or a space, wins.
    """
    wanted = model_name.strip().lower().rsplit("/", 1)[-1]
    matches = [
        (len(label), key)
        for key, entry in _preset_table().items()
        for label in (key, *entry.get("aliases", ()))
        if wanted == label
        or (wanted.startswith(label) and _NAME_SUFFIX.match(wanted[len(label) :]))
    ]
    return max(matches)[1] if matches else None


# ---- input parsers shared with the planner --------------------------------------------------


def check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise PlannerError(field, message)


def parse_dtype(value: Any, table: Mapping[str, Any], field: str) -> str:
    if not isinstance(value, str) or value.lower() not in table:
        raise PlannerError(field, f"unknown dtype {value!r}; one of {', '.join(table)}")
    return value.lower()


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_required_int(
    data: Mapping[str, Any], key: str, path: str, minimum: int | None = 1
) -> int:
    value = parse_optional_int(data, key, path, minimum)
    if value is None:
        raise PlannerError(_join(path, key), "is required")
    return value


def parse_optional_int(
    data: Mapping[str, Any], key: str, path: str, minimum: int | None = 1
) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    # bool is an int in Python but never a count; 8.0 from a JSON client is accepted as 8.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerError(_join(path, key), f"must be a whole number, not {value!r}")
    if minimum is not None and value < minimum:
        raise PlannerError(_join(path, key), f"must be at least {minimum}")
    if abs(value) > MAX_COUNT:
        raise PlannerError(_join(path, key), "is too large to be real")
    return value


def parse_number(data: Mapping[str, Any], key: str, default: float | None) -> float:
    value = data.get(key, default)
    if value is None:
        raise PlannerError(key, "is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise PlannerError(key, f"must be a number, not {value!r}")
    return float(value)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        return False
