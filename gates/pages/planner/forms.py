"""The planner page's form: form fields <-> the planner's inputs (request_from_dict's dict).

No database, no HTTP: the views own those. Planner errors land on the form field they name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms

from gates import figures
from gates.planner import (
    DEFAULT_RESERVED_FRACTION,
    GIB,
    KV_DTYPE_BYTES,
    WEIGHT_DTYPE_BYTES,
    PlannerError,
    PlanRequest,
    PlanResult,
    plan,
    preset_display_names,
    request_from_dict,
)
from runners import jsonlimits
from simhost.engine.predict import SessionWorkload
from simhost.engine.presets import GPUS

# Real config.json files are a few kB; anything this big is not one.
MAX_CONFIG_BYTES = 1024 * 1024
DEFAULTS = {
    "model": "llama-3.1-70b",
    "kv_dtype": "bf16",
    "gpus": 8,
    "gpu_mem_gib": 80,
    "reserved_fraction": DEFAULT_RESERVED_FRACTION,
    "concurrency": 64,
    "context_tokens": 32000,
    "reuse_ratio": 0.5,
}
# The TTFT band's workload: the G3 template's shape (docs/gates.md) until the user changes it.
BAND_DEFAULTS = {
    "prefix_tokens": 32000,
    "suffix_tokens": 512,
    "output_tokens": 256,
    "sessions": 64,
    "resumes": 1,
    "tiers": "1, 2, 4, 8, 16",
}
MAX_BAND_TIERS = 6
MAX_BAND_CONCURRENCY = 256
# The model's work grows with the tokens it prefills: four times the G3 template's (64 sessions
# of 32,768 tokens, about 12 s a tier on one core) keeps a band under about five minutes.
MAX_BAND_WORK_TOKENS = 4 * 64 * 32768
# Planner field (first part of a dotted name) -> the form field a user can fix.
FORM_FIELDS = {
    "model": "model",
    "presets": "model",
    "config": "config_text",
    "weight_bytes": "weight_gib",
    "request": None,
}


def _model_choices() -> list[tuple[str, str]]:
    presets = [(name, label) for name, label in preset_display_names().items()]
    return [("", "the config.json below"), *presets]


class PlannerForm(forms.Form):
    model = forms.ChoiceField(choices=_model_choices, required=False, label="Model preset")
    config_text = forms.CharField(
        required=False,
        label="or paste a config.json",
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        help_text="A Hugging Face config.json, or an object of architecture fields.",
    )
    config_file = forms.FileField(required=False, label="or upload a config.json")
    kv_dtype = forms.ChoiceField(choices=[(d, d) for d in KV_DTYPE_BYTES], label="KV dtype")
    gpus = forms.IntegerField(label="GPUs")
    gpu_mem_gib = forms.FloatField(label="Memory per GPU, GiB")
    tensor_parallel_size = forms.IntegerField(
        required=False, label="Tensor parallel size", help_text="Empty: all GPUs."
    )
    weight_gib = forms.FloatField(
        required=False,
        min_value=0,
        label="Weights, GiB",
        help_text="Empty: from the preset. Needed for a config.json.",
    )
    weight_dtype = forms.ChoiceField(
        choices=[("", "as the preset"), *((d, d) for d in WEIGHT_DTYPE_BYTES)],
        required=False,
        label="Weight dtype",
    )
    reserved_fraction = forms.FloatField(label="Reserved fraction of VRAM")
    concurrency = forms.IntegerField(label="Concurrent requests")
    context_tokens = forms.IntegerField(label="Context, tokens per request")
    reuse_ratio = forms.FloatField(label="Prefix reuse ratio (0..1)")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.planner_inputs: dict[str, Any] = {}
        self.plan_request: PlanRequest | None = None
        self.plan_result: PlanResult | None = None
        if self.errors:
            return cleaned
        inputs = self._inputs(cleaned)
        if self.errors:
            return cleaned
        try:
            request = request_from_dict(inputs)
            # plan() still refuses some inputs, e.g. a config.json model without a weight size.
            self.plan_result = plan(request)
        except PlannerError as error:
            self.add_error(form_field_for(error.field), f"{error.field}: {error.message}")
            return cleaned
        self.plan_request, self.planner_inputs = request, inputs
        return cleaned

    def _inputs(self, cleaned: Mapping[str, Any]) -> dict[str, Any]:
        pasted = self._pasted_model(cleaned)
        if cleaned.get("model") and pasted is not None:
            self.add_error("model", "Choose a preset or give a config.json, not both.")
        inputs = {
            **_model_inputs(cleaned.get("model") or None, pasted),
            "gpus": cleaned["gpus"],
            "gpu_mem_gib": cleaned["gpu_mem_gib"],
            "tensor_parallel_size": cleaned.get("tensor_parallel_size"),
            "kv_dtype": cleaned["kv_dtype"],
            "weight_dtype": cleaned.get("weight_dtype") or None,
            "reserved_fraction": cleaned["reserved_fraction"],
            "concurrency": cleaned["concurrency"],
            "context_tokens": cleaned["context_tokens"],
            "reuse_ratio": cleaned["reuse_ratio"],
        }
        if cleaned.get("weight_gib") is not None:
            inputs["weight_bytes"] = round(cleaned["weight_gib"] * GIB)
        return {name: value for name, value in inputs.items() if value is not None}

    def _pasted_model(self, cleaned: Mapping[str, Any]) -> Any:
        """The uploaded or pasted JSON, parsed; None when neither was given."""
        upload = cleaned.get("config_file")
        text = (cleaned.get("config_text") or "").strip()
        if upload is not None and text:
            self.add_error("config_file", "Upload a config.json or paste one, not both.")
            return None
        if upload is not None:
            return self._parsed(_read_upload(upload), "config_file", upload.name)
        return self._parsed(text, "config_text", "the pasted text") if text else None

    def _parsed(self, text: str | None, field: str, name: str) -> Any:
        if text is None:
            self.add_error(
                field, f"{name} is not UTF-8 text of at most {MAX_CONFIG_BYTES:,} bytes."
            )
            return None
        try:
            return jsonlimits.load(text)
        except ValueError as error:  # invalid JSON, or past runners.jsonlimits' limits
            self.add_error(field, f"{name} is not valid JSON: {error}")
            return None


def _read_upload(upload: Any) -> str | None:
    if upload.size > MAX_CONFIG_BYTES:
        return None
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _model_inputs(preset: str | None, pasted: Any) -> dict[str, Any]:
    """A preset name, a config.json, or (a JSON object with `layers`) architecture fields."""
    if pasted is None:
        return {"model": preset} if preset else {}
    if isinstance(pasted, Mapping) and "layers" in pasted and "num_hidden_layers" not in pasted:
        return {"model": pasted}
    return {"config": pasted}


def form_field_for(planner_field: str) -> str | None:
    """The form field a planner error belongs on (None: the whole form)."""
    head = planner_field.split(".")[0].split("[")[0]
    if head in FORM_FIELDS:
        return FORM_FIELDS[head]
    return head if head in PlannerForm.base_fields else None


def form_data_from_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Saved planner inputs as the form's data (to prefill and plan at once)."""
    data = {**DEFAULTS, **{k: v for k, v in inputs.items() if k in PlannerForm.base_fields}}
    model = inputs.get("model")
    if not isinstance(model, str):
        data["model"] = ""
    pasted = inputs.get("config", model if isinstance(model, Mapping) else None)
    if pasted is not None:
        data["config_text"] = json.dumps(pasted, indent=2)
    if inputs.get("weight_bytes") is not None:
        data["weight_gib"] = inputs["weight_bytes"] / GIB
    return {name: value for name, value in data.items() if value is not None}


class TtftBandForm(forms.Form):
    """The optional TTFT band's inputs: the GPU kind the model has figures for and a cold-recovery
    workload (sessions of a shared prefix, pushed out of VRAM, resumed) at each tier."""

    gpu_kind = forms.ChoiceField(
        choices=[("", "no TTFT band"), *((name, name) for name in GPUS)],
        required=False,
        label="GPU kind",
        help_text="Predict the TTFT saving on these GPUs (simhost's model).",
    )
    prefix_tokens = forms.IntegerField(
        required=False, min_value=0, max_value=131072, label="Shared prefix, tokens"
    )
    suffix_tokens = forms.IntegerField(
        required=False, min_value=1, max_value=32768, label="Fresh tokens per request"
    )
    output_tokens = forms.IntegerField(
        required=False, min_value=1, max_value=8192, label="Output tokens per request"
    )
    sessions = forms.IntegerField(required=False, min_value=1, max_value=1024, label="Sessions")
    resumes = forms.IntegerField(
        required=False, min_value=1, max_value=8, label="Resumes per session"
    )
    tiers = forms.CharField(
        required=False,
        label="Concurrency tiers",
        help_text=f"Comma-separated, at most {MAX_BAND_TIERS}, each 1 to {MAX_BAND_CONCURRENCY}.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.workload: SessionWorkload | None = None
        self.concurrencies: tuple[int, ...] = ()
        if self.errors or not cleaned.get("gpu_kind"):
            return cleaned
        missing = [name for name in BAND_DEFAULTS if cleaned.get(name) in (None, "")]
        for name in missing:
            self.add_error(name, "Needed for the TTFT band.")
        tiers = _concurrencies(cleaned.get("tiers") or "")
        if isinstance(tiers, str) and "tiers" not in missing:
            self.add_error("tiers", tiers)
        if self.errors or isinstance(tiers, str):
            return cleaned
        workload = SessionWorkload(
            sessions=cleaned["sessions"],
            prefix=cleaned["prefix_tokens"],
            suffix=cleaned["suffix_tokens"],
            output=cleaned["output_tokens"],
            resumes=cleaned["resumes"],
        )
        work = workload.sessions * (workload.prefix + workload.suffix * workload.resumes)
        if work > MAX_BAND_WORK_TOKENS:
            self.add_error(
                "sessions",
                f"{figures.number(work)} tokens to prefill; the band takes at most "
                f"{figures.number(MAX_BAND_WORK_TOKENS)} "
                "(sessions x (prefix + fresh tokens x resumes)).",
            )
            return cleaned
        self.workload, self.concurrencies = workload, tiers
        return cleaned


def _concurrencies(text: str) -> tuple[int, ...] | str:
    """ "1, 2, 4" as (1, 2, 4), in order without repeats; or what is wrong with it."""
    parts = [part.strip() for part in text.replace(" ", ",").split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        return "Whole numbers separated by commas, e.g. 1, 4, 16."
    tiers = tuple(sorted({int(part) for part in parts}))
    if len(tiers) > MAX_BAND_TIERS or not 1 <= tiers[0] <= tiers[-1] <= MAX_BAND_CONCURRENCY:
        return f"At most {MAX_BAND_TIERS} tiers, each 1 to {MAX_BAND_CONCURRENCY}."
    return tiers
