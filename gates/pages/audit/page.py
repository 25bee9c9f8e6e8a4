"""The audit log page: who did what, when, from where, filtered by engagement, actor, action
and time, each event as a sentence with its JSON behind it. Vendor admins read all of it,
customer owners their organization's (tenancy's visible_audit_events). A constant number of
queries whatever the page holds: the targets' labels are read once per kind of target."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from gates.inputs import whole_number
from gates.models import AuditEvent, Engagement, Gate, GateSpec, Host, Run
from gates.pages.audit.sentences import audit_sentence
from gates.pages.audit.words import AuditFacts, actor_words
from gates.tenancy import Viewer, viewer_for_request, visible, visible_audit_events

PAGE_SIZE = 50
TIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
# Where an event's target links to, when it is a page of its own.
TARGET_PAGES = {
    "Engagement": "gates:engagement-detail",
    "Gate": "gates:gate-detail",
    "Run": "gates:run-detail",
    "Host": "gates:host-detail",
}
Labels = dict[tuple[str, str], str]


class AuditFilterForm(forms.Form):
    engagement = forms.ModelChoiceField(
        queryset=Engagement.objects.none(), required=False, empty_label="any engagement"
    )
    actor = forms.CharField(
        required=False, max_length=150, help_text="A user name, or a label like 'system'."
    )
    action = forms.ChoiceField(required=False)
    since = forms.DateTimeField(
        required=False,
        label="From (UTC)",
        input_formats=TIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    until = forms.DateTimeField(
        required=False,
        label="Until (UTC)",
        input_formats=TIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )

    def __init__(self, data, *, viewer: Viewer, actions: list[str]) -> None:
        super().__init__(data)
        self.fields["engagement"].queryset = visible(Engagement, viewer).order_by("title")
        self.fields["action"].choices = [("", "any action"), *((a, a) for a in actions)]

    def clean(self) -> dict:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until <= since:
            self.add_error("until", "must be after the start of the range")
        return cleaned


@dataclass(frozen=True)
class AuditRow:
    event: AuditEvent
    actor: str
    target: str
    link: str | None
    sentence: str
    detail: str


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    viewer = viewer_for_request(request)
    if not viewer.can("audit.read"):
        raise PermissionDenied("the audit log is for vendor admins and customer owners")
    trail = visible_audit_events(viewer)
    actions = sorted(set(trail.values_list("action", flat=True).distinct()))
    form = AuditFilterForm(request.GET or None, viewer=viewer, actions=actions)
    events = trail.select_related("actor", "organization")
    if form.is_bound and form.is_valid():
        events = filtered(events, **form.cleaned_data)
    elif form.is_bound:
        events = events.none()  # a bad filter shows its error, not the unfiltered trail
    # Hosts are vendor pages: a customer owner's trail names them without a link.
    links = {k: v for k, v in TARGET_PAGES.items() if k != "Host" or viewer.can("host.manage")}
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    labels = target_labels(list(page))
    return render(
        request,
        "audit/list.html",
        {"form": form, "page": page, "rows": [audit_row(e, links, labels) for e in page]},
        status=400 if form.errors else 200,
    )


def filtered(events: QuerySet, *, engagement, actor, action, since, until) -> QuerySet:
    if engagement is not None:
        events = events.filter(engagement_events(engagement))
    if actor:
        events = events.filter(Q(actor__username=actor) | Q(actor_label=actor))
    if action:
        events = events.filter(action=action)
    if since:
        events = events.filter(at__gte=since)
    if until:
        events = events.filter(at__lt=until)
    return events


def engagement_events(engagement: Engagement) -> Q:
    """Events whose target is the engagement or one of its gates, spec versions or runs; the
    target ids are text in the trail, so each id list is a text subquery (no extra query)."""

    def ids(queryset: QuerySet) -> QuerySet:
        return queryset.annotate(text_id=Cast("id", CharField())).values("text_id")

    return (
        Q(target_type="Engagement", target_id=str(engagement.pk))
        | Q(target_type="Gate", target_id__in=ids(Gate.objects.filter(engagement=engagement)))
        | Q(
            target_type="GateSpec",
            target_id__in=ids(GateSpec.objects.filter(gate__engagement=engagement)),
        )
        | Q(target_type="Run", target_id__in=ids(Run.objects.filter(gate__engagement=engagement)))
    )


def target_labels(events: list[AuditEvent]) -> Labels:
    """(type, id) -> how pages name it ("G3 spec v3", "G3 run #2", "G3", "host “gpu-1”"), for
    the events' targets and the runs their details name: one query per kind of target."""
    wanted: dict[str, set[int]] = {}
    for event in events:
        wanted.setdefault(event.target_type, set()).add(whole_number(event.target_id) or 0)
        if isinstance(event.detail, dict) and isinstance(event.detail.get("run"), int):
            wanted.setdefault("Run", set()).add(event.detail["run"])
    labels: Labels = {}
    for kind, read in LABEL_READS.items():
        if wanted.get(kind, set()) - {0}:
            labels.update({(kind, str(pk)): label for pk, label in read(wanted[kind])})
    return labels


def _spec_labels(ids: set[int]) -> list[tuple[int, str]]:
    rows = GateSpec.objects.filter(pk__in=ids).values_list("pk", "gate__kind", "version")
    return [(pk, f"{kind} spec v{version}") for pk, kind, version in rows]


def _run_labels(ids: set[int]) -> list[tuple[int, str]]:
    rows = Run.objects.filter(pk__in=ids).values_list("pk", "gate__kind", "attempt")
    return [(pk, f"{kind} run #{attempt}") for pk, kind, attempt in rows]


def _gate_labels(ids: set[int]) -> list[tuple[int, str]]:
    return list(Gate.objects.filter(pk__in=ids).values_list("pk", "kind"))


def _host_labels(ids: set[int]) -> list[tuple[int, str]]:
    rows = Host.objects.filter(pk__in=ids).values_list("pk", "name")
    return [(pk, f"host “{name}”") for pk, name in rows]


LABEL_READS = {
    "GateSpec": _spec_labels,
    "Run": _run_labels,
    "Gate": _gate_labels,
    "Host": _host_labels,
}


def audit_row(event: AuditEvent, links: dict[str, str], labels: Labels) -> AuditRow:
    username = event.actor.get_username() if event.actor else ""
    actor = username
    if event.actor_label and event.actor_label != "web":
        actor = f"{actor} ({event.actor_label})" if actor else event.actor_label
    page = links.get(event.target_type)
    target_id = whole_number(event.target_id)
    link = reverse(page, args=[target_id]) if page and target_id is not None else None
    label = labels.get((event.target_type, event.target_id), "")
    target = label or (f"{event.target_type} #{event.target_id}" if event.target_type else "")
    detail = json.dumps(event.detail, sort_keys=True, indent=1) if event.detail else ""
    run = event.detail.get("run") if isinstance(event.detail, dict) else None
    facts = AuditFacts(
        action=event.action,
        actor=actor_words(username, event.actor_label),
        target_type=event.target_type,
        target_id=event.target_id,
        target=label,
        detail=event.detail if isinstance(event.detail, dict) else {},
        run=labels.get(("Run", str(run)), "") if isinstance(run, int) else "",
    )
    return AuditRow(
        event=event,
        actor=actor or "unknown",
        target=target,
        link=link,
        sentence=audit_sentence(facts),
        detail=detail,
    )
