"""Tollgate's domain models, split by sub-domain; import them from `gates.models`."""

from gates.models.audit import AuditEvent
from gates.models.choices import Verdict
from gates.models.engagements import Engagement, Gate, GateSpec
from gates.models.health import ServiceHeartbeat
from gates.models.hosts import Host, Profile
from gates.models.outcomes import Alert, Decision
from gates.models.runs import Artifact, Measurement, Run, RunStep, SoakSample
from gates.models.soak import Soak
from gates.models.tenancy import ApiToken, Membership, Organization

__all__ = [
    "Alert",
    "ApiToken",
    "Artifact",
    "AuditEvent",
    "Decision",
    "Engagement",
    "Gate",
    "GateSpec",
    "Host",
    "Measurement",
    "Membership",
    "Organization",
    "Profile",
    "Run",
    "RunStep",
    "ServiceHeartbeat",
    "Soak",
    "SoakSample",
    "Verdict",
]
