"""Editing a gate's spec from its page: the latest version as JSON (plus a G3's tiers and
repetitions as inputs), proposed through gate_spec_propose exactly as `PUT .../spec/` is, so a
signed version is never changed: a save is a new version both parties sign again. Each error
the spec validation names is listed with its field path and nothing is saved."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from gates import services
from gates.errors import ServiceError, SpecInvalidError
from gates.models import Gate, GateSpec
from gates.pages.hosts.forms import StorableJSONField
from gates.specs.fields import DESCRIPTIONS
from gates.specs.reference import description_key, property_paths
from gates.specs.schema import SCHEMAS
from gates.specs.words import spec_change_words
from gates.tenancy import Viewer, get_visible_or_404, viewer_for_request

# The G3 fields offered as inputs: form field -> its path in the document.
QUICK_PATHS = {
    "tiers": ("tiers",),
    "repetitions_min": ("repetitions", "min"),
    "repetitions_max": ("repetitions", "max"),
}
WORDS_IN_MESSAGE = 3


class SpecDocumentField(StorableJSONField):
    """The document as indented JSON; a syntax error names its line and column."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip():
            try:
                json.loads(value)
            except json.JSONDecodeError as error:
                raise forms.ValidationError(
                    f"not JSON: {error.msg} at line {error.lineno}, column {error.colno}",
                    code="invalid",
                ) from error
        return super().to_python(value)


class SpecForm(forms.Form):
    document = SpecDocumentField(
        label="Spec document (JSON)",
        widget=forms.Textarea(
            attrs={"rows": 24, "spellcheck": "false", "autocomplete": "off", "class": "json-edit"}
        ),
        help_text="Tollgate sets `version` itself; the meaning of every field is listed below.",
    )
    digest = forms.CharField(widget=forms.HiddenInput)

    def __init__(self, data=None, *, spec: GateSpec) -> None:
        document = spec.document
        initial = {"document": document, "digest": spec.digest}
        super().__init__(data, initial=initial)
        if spec.gate.kind == Gate.Kind.G3:
            self._add_g3_fields(document)

    def _add_g3_fields(self, document: dict) -> None:
        repetitions = document.get("repetitions") or {}
        self.fields["tiers"] = forms.CharField(
            label="Concurrency tiers",
            help_text="Whole numbers separated by commas, e.g. 4, 8, 16.",
        )
        self.fields["repetitions_min"] = forms.IntegerField(label="Repetitions, at least")
        self.fields["repetitions_max"] = forms.IntegerField(label="Repetitions, at most")
        self.initial["tiers"] = ", ".join(str(tier) for tier in document.get("tiers") or [])
        self.initial["repetitions_min"] = repetitions.get("min")
        self.initial["repetitions_max"] = repetitions.get("max")
        self.order_fields(["tiers", "repetitions_min", "repetitions_max", "document"])

    def clean_tiers(self) -> list[int]:
        text = self.cleaned_data["tiers"]
        try:
            return [int(part) for part in text.replace(" ", "").split(",") if part]
        except ValueError as error:
            raise forms.ValidationError("whole numbers separated by commas, e.g. 4, 8, 16") from (
                error
            )

    def edited_document(self) -> object:
        """The JSON as typed, with each input the user changed written over its field."""
        document = self.cleaned_data["document"]
        if not isinstance(document, dict):
            return document  # the validation names what is wrong with it
        for name, path in QUICK_PATHS.items():
            if name in self.changed_data and name in self.cleaned_data:
                *parents, leaf = path
                place = document
                for key in parents:
                    if not isinstance(place.get(key), dict):
                        place[key] = {}
                    place = place[key]
                place[leaf] = self.cleaned_data[name]
        return document


def _editor(request: HttpRequest, pk: int) -> tuple[Viewer, Gate]:
    # The lookup first, as the API's PUT: another organization's gate is a 404 for everyone.
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    if not viewer.can("spec.edit"):
        raise PermissionDenied("only vendor staff may change a spec")
    return viewer, gate


@login_required
@require_http_methods(["GET", "POST"])
def spec_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the latest version to edit. POST: propose the edited document as the next version."""
    _, gate = _editor(request, pk)
    latest = gate.current_spec
    form = SpecForm(request.POST if request.method == "POST" else None, spec=latest)
    problems: list[tuple[str | None, str]] = []
    if form.is_bound and form.is_valid():
        try:
            change = services.gate_spec_propose(
                actor=services.Actor.from_request(request),
                gate=gate,
                document=form.edited_document(),
                if_match=form.cleaned_data["digest"],
            )
        except SpecInvalidError as error:
            problems = [(found.field, found.message) for found in error.errors]
        except ServiceError as error:
            problems = [(None if error.field == "If-Match" else error.field, error.detail)]
        else:
            _say_what_changed(request, gate, latest, change)
            return redirect(reverse("gates:gate-detail", args=[gate.pk]) + "#contract")
    _mark_fields(form, problems)
    context = {
        "gate": gate,
        "engagement": gate.engagement,
        "latest": latest,
        "form": form,
        "problems": problems,
        "meanings": field_meanings(gate.kind),
    }
    status = 400 if form.errors or problems else 200
    return render(request, "gates/spec_edit.html", context, status=status)


def _say_what_changed(request, gate: Gate, before: GateSpec, change) -> None:
    spec = change.spec
    if not change.created:
        messages.info(request, f"Nothing changed: {gate.kind} spec v{spec.version} is this.")
        return
    words = [str(line) for line in spec_change_words(before.document, spec.document)]
    more = f" (and {len(words) - WORDS_IN_MESSAGE} more)" if len(words) > WORDS_IN_MESSAGE else ""
    shown = "; ".join(words[:WORDS_IN_MESSAGE]) + more
    messages.info(
        request,
        f"Saved {gate.kind} spec v{spec.version}: {shown}. It is not in force until both "
        "parties sign it.",
    )


def _mark_fields(form: SpecForm, problems: list[tuple[str | None, str]]) -> None:
    """A problem at an input's path is also shown on that input."""
    for path, message in problems:
        for name, parts in QUICK_PATHS.items():
            if name in form.fields and path and path.split("[")[0] == ".".join(parts):
                form.add_error(name, f"{path}: {message}")


def field_meanings(kind: str) -> list[tuple[str, str]]:
    """(path, meaning) of each field of the gate kind's spec, as docs/specs.md prints them."""
    found = []
    for path in property_paths(SCHEMAS[kind]):
        meaning = DESCRIPTIONS.get(description_key(path))
        if meaning:
            found.append((path, meaning.replace("`", "")))
    return found
