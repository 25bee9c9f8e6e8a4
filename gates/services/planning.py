"""Saving the KV planner's inputs to an engagement (Engagement.kv_plan), audited."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from gates.errors import NotAllowedError, ServiceError
from gates.models import Engagement
from gates.planner import PlannerError, plan, request_from_dict
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer

# Planner inputs shape the G3 contract, so the people who may edit specs may save them.
SAVE_ACTION = "spec.edit"


def engagement_kv_plan_save(
    *, actor: Actor, viewer: Viewer, engagement: Engagement, inputs: Mapping[str, Any]
) -> Engagement:
    """Store validated planner inputs (request_from_dict's fields) as the engagement's kv_plan."""
    if not viewer.can(SAVE_ACTION):
        raise NotAllowedError("only vendor engineers and admins may save planner inputs")
    cleaned = {name: value for name, value in inputs.items() if value is not None}
    try:
        plan(request_from_dict(cleaned))  # plan() refuses a few inputs the parser lets by
    except PlannerError as error:
        raise ServiceError(error.message, field=error.field) from None
    with transaction.atomic():
        locked = Engagement.objects.select_for_update().get(pk=engagement.pk)
        previous = locked.kv_plan
        locked.kv_plan = cleaned
        locked.save(update_fields=["kv_plan"])
        audit_record(
            actor=actor,
            action="engagement.kv_plan_save",
            target=locked,
            organization_id=locked.organization_id,
            detail={"before": audit_summary(previous), "after": audit_summary(cleaned)},
        )
    engagement.kv_plan = cleaned
    return engagement


def audit_summary(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs for the audit trail; a pasted config.json is kept as its SHA-256 only."""
    summary = dict(inputs)
    if "config" in summary:
        canonical = json.dumps(summary["config"], sort_keys=True, separators=(",", ":"))
        summary["config"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return summary
