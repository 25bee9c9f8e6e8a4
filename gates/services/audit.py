"""The audit trail writer: every service that changes something records who did it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Model

from gates.models import AuditEvent


@dataclass(frozen=True)
class Actor:
    """Who acts: a user (through the web or a token) or the system itself."""

    user: Any = None
    label: str = ""
    ip: str | None = None
    request_id: str = ""

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(label=label)

    @classmethod
    def from_request(cls, request) -> Actor:
        token = getattr(request, "auth", None)
        prefix = getattr(token, "prefix", None)
        user = request.user if getattr(request.user, "is_authenticated", False) else None
        return cls(
            user=user,
            label=f"api-token:{prefix}" if prefix else "web",
            ip=request.META.get("REMOTE_ADDR"),
            request_id=request.META.get("HTTP_X_REQUEST_ID", "")[:64],
        )


def audit_record(
    *,
    actor: Actor,
    action: str,
    target: Model | None = None,
    organization_id: int | None = None,
    detail: dict | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor.user,
        actor_label=actor.label,
        organization_id=organization_id,
        action=action,
        target_type=type(target).__name__ if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        detail=detail or {},
        ip=actor.ip,
        request_id=actor.request_id,
    )
