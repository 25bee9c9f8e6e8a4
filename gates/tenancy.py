"""Who may see and do what. Every page and API view scopes its queries through here.

Vendor staff see every organization; customer users and tokens see only their own; an object
of another organization is a 404, never a 403, so ids leak nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Model, QuerySet
from django.http import Http404

from gates.models import (
    Alert,
    ApiToken,
    Artifact,
    AuditEvent,
    Decision,
    Engagement,
    Gate,
    GateSpec,
    Host,
    Measurement,
    Membership,
    Organization,
    Run,
    SoakSample,
    WorkloadTrace,
)

Role = Membership.Role

# The path from each tenant-owned model to its organization, and to its engagement.
ORGANIZATION_PATH = {
    Organization: "",
    Engagement: "organization",
    Host: "organization",
    Gate: "engagement__organization",
    GateSpec: "gate__engagement__organization",
    Run: "gate__engagement__organization",
    Decision: "gate__engagement__organization",
    Alert: "engagement__organization",
    Measurement: "run__gate__engagement__organization",
    SoakSample: "run__gate__engagement__organization",
    Artifact: "run__gate__engagement__organization",
    ApiToken: "organization",
    WorkloadTrace: "engagement__organization",
}
ENGAGEMENT_PATH = {
    Engagement: "",
    Gate: "engagement",
    GateSpec: "gate__engagement",
    Run: "gate__engagement",
    Decision: "gate__engagement",
    Alert: "engagement",
    Measurement: "run__gate__engagement",
    SoakSample: "run__gate__engagement",
    Artifact: "run__gate__engagement",
    WorkloadTrace: "engagement",
}

ROLE_ACTIONS = {
    Role.VENDOR_ADMIN: {
        "engagement.create",
        "spec.edit",
        "spec.sign",
        "trace.upload",
        "run.start",
        "run.cancel",
        "soak.control",
        "gate.review",
        "host.manage",
        "token.manage",
        "alert.ack",
        "alert.configure",
        "audit.read",
    },
    # An engineer proposes specs; only a vendor admin signs them for the vendor.
    Role.VENDOR_ENGINEER: {
        "engagement.create",
        "spec.edit",
        "trace.upload",
        "run.start",
        "run.cancel",
        "soak.control",
        "host.manage",
        "token.manage",
        "alert.ack",
        "alert.configure",
    },
    Role.CUSTOMER_OWNER: {
        "spec.sign",
        # The trace is the customer's own traffic: they may bring it themselves.
        "trace.upload",
        "run.start",
        "run.cancel",
        "token.manage",
        "alert.ack",
        "alert.configure",
        # Their own organization's trail only: see visible_audit_events.
        "audit.read",
    },
    Role.CUSTOMER_VIEWER: set(),
}
# What a token may do, on top of its creator's role: "run" is the write scope for automation;
# signing needs "sign"; managing tokens needs "tokens"; stop-loss review is never a token's.
SCOPE_ACTIONS = {
    ApiToken.Scope.READ: set(),
    ApiToken.Scope.RUN: {
        "run.start",
        "run.cancel",
        "soak.control",
        "spec.edit",
        "trace.upload",
        "engagement.create",
        "host.manage",
        "alert.ack",
    },
    ApiToken.Scope.SIGN: {"spec.sign"},
    ApiToken.Scope.TOKENS: {"token.manage"},
}


@dataclass(frozen=True)
class Viewer:
    """The scope of one request: a signed-in user or an API token."""

    user: object | None
    is_vendor: bool = False
    organization_ids: frozenset[int] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    engagement_id: int | None = None
    token: ApiToken | None = None
    memberships: tuple[Membership, ...] = field(default=(), repr=False, compare=False)

    def can(self, action: str) -> bool:
        allowed = set().union(*(ROLE_ACTIONS[Role(role)] for role in self.roles))
        if self.token is not None:
            allowed &= set().union(*(SCOPE_ACTIONS.get(s, set()) for s in self.token.scopes))
        return action in allowed

    @property
    def party(self) -> str | None:
        """Which party this viewer signs for: "vendor", "customer" or None."""
        if self.is_vendor:
            return "vendor"
        return "customer" if Role.CUSTOMER_OWNER in self.roles else None

    @property
    def signing_party(self) -> str | None:
        """The party this viewer may sign for: a vendor admin for the vendor, a customer
        owner for the customer (and a token only with the `sign` scope)."""
        if not self.can("spec.sign"):
            return None
        if self.is_vendor:
            return "vendor" if Role.VENDOR_ADMIN in self.roles else None
        return "customer" if Role.CUSTOMER_OWNER in self.roles else None


def viewer_for_user(user) -> Viewer:
    if user is None or not user.is_authenticated or not user.is_active:
        return Viewer(user=None)
    memberships = tuple(Membership.objects.filter(user=user).select_related("organization"))
    return Viewer(
        user=user,
        is_vendor=any(m.organization.is_vendor for m in memberships),
        organization_ids=frozenset(m.organization_id for m in memberships),
        roles=frozenset(m.role for m in memberships),
        memberships=memberships,
    )


def viewer_for_token(token: ApiToken) -> Viewer:
    base = viewer_for_user(token.created_by)
    if base.user is None:
        return base
    # The creator's roles in the token's organization only; read from the memberships
    # viewer_for_user loaded (one query per request: tests/gates/api/test_api_queries.py pins it).
    in_org = [m.role for m in base.memberships if m.organization_id == token.organization_id]
    return Viewer(
        user=token.created_by,
        is_vendor=token.organization.is_vendor and base.is_vendor,
        organization_ids=frozenset({token.organization_id}),
        roles=frozenset(in_org),
        engagement_id=token.engagement_id,
        token=token,
    )


def viewer_for_request(request) -> Viewer:
    cached = getattr(request, "_tollgate_viewer", None)
    if cached is None:
        token = getattr(request, "auth", None)
        if isinstance(token, ApiToken):
            cached = viewer_for_token(token)
        else:
            cached = viewer_for_user(getattr(request, "user", None))
        request._tollgate_viewer = cached
    return cached


def visible(model_or_queryset: type[Model] | QuerySet, viewer: Viewer) -> QuerySet:
    """The rows of a tenant-owned model this viewer may see."""
    queryset = (
        model_or_queryset
        if isinstance(model_or_queryset, QuerySet)
        else model_or_queryset.objects.all()
    )
    model = queryset.model
    if viewer.user is None:
        return queryset.none()
    if viewer.engagement_id is not None:
        if model not in ENGAGEMENT_PATH:
            return queryset.none()
        path = ENGAGEMENT_PATH[model]
        queryset = queryset.filter(**{f"{path}__id" if path else "id": viewer.engagement_id})
    if viewer.is_vendor:
        return queryset
    path = ORGANIZATION_PATH[model]
    return queryset.filter(**{f"{path}__id__in" if path else "id__in": viewer.organization_ids})


def get_visible_or_404(
    model_or_queryset: type[Model] | QuerySet, viewer: Viewer, **lookup: object
) -> Model:
    queryset = visible(model_or_queryset, viewer)
    try:
        return queryset.get(**lookup)
    except queryset.model.DoesNotExist as missing:
        raise Http404("not found") from missing


def visible_audit_events(viewer: Viewer) -> QuerySet:
    """The audit trail this viewer may read: all of it for a vendor admin, a customer owner's
    own organization's events, nothing for anyone else (and never through a token)."""
    if viewer.user is None or viewer.token is not None or not viewer.can("audit.read"):
        return AuditEvent.objects.none()
    if viewer.is_vendor and Role.VENDOR_ADMIN in viewer.roles:
        return AuditEvent.objects.all()
    return AuditEvent.objects.filter(organization_id__in=viewer.organization_ids)


def manageable_tokens(viewer: Viewer) -> QuerySet:
    """The API tokens this viewer may list and revoke: its own organization's, vendor staff
    included (tokens are credentials, not data to oversee); a bound token sees its engagement's."""
    if viewer.user is None or not viewer.can("token.manage"):
        return ApiToken.objects.none()
    tokens = ApiToken.objects.filter(organization_id__in=viewer.organization_ids)
    if viewer.engagement_id is not None:
        tokens = tokens.filter(engagement_id=viewer.engagement_id)
    return tokens
