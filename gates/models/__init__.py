"""Tollgate's domain models, split by sub-domain; import them from `gates.models`."""

from gates.models.alerting import Alert, AlertPreference, AlertSettings, WebhookEndpoint
from gates.models.audit import AuditEvent
from gates.models.choices import Verdict
from gates.models.contract import (
    InventoryAmendment,
    InventorySignature,
    Party,
    PartyKey,
    SpecSignature,
    StopLossReset,
)
from gates.models.decisions import Decision
from gates.models.engagements import Engagement, Gate, GateSpec, WorkloadTrace
from gates.models.evidence import EvidenceKey, EvidenceSeal, EvidenceSignature
from gates.models.heartbeats import ServiceHeartbeat
from gates.models.hosts import Host, HostCleanup, Profile
from gates.models.idempotency import IdempotencyKey
from gates.models.runs import Artifact, Measurement, Run, RunStep
from gates.models.soak import Soak, SoakSample
from gates.models.tenancy import ApiToken, Membership, Organization

__all__ = [
    "Alert",
    "AlertPreference",
    "AlertSettings",
    "ApiToken",
    "Artifact",
    "AuditEvent",
    "Decision",
    "Engagement",
    "EvidenceKey",
    "EvidenceSeal",
    "EvidenceSignature",
    "Gate",
    "GateSpec",
    "Host",
    "HostCleanup",
    "IdempotencyKey",
    "InventoryAmendment",
    "InventorySignature",
    "Measurement",
    "Membership",
    "Organization",
    "Party",
    "PartyKey",
    "Profile",
    "Run",
    "RunStep",
    "ServiceHeartbeat",
    "Soak",
    "SoakSample",
    "SpecSignature",
    "StopLossReset",
    "Verdict",
    "WebhookEndpoint",
    "WorkloadTrace",
]
