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
from gates.models.decisions import Decision, ReportPdf
from gates.models.engagements import (
    Engagement,
    Gate,
    GateSpec,
    TtftBandPrediction,
    WorkloadTrace,
)
from gates.models.evidence import (
    Claim,
    EvidenceKey,
    EvidenceSeal,
    EvidenceSignature,
    Publication,
    PublicationConsent,
)
from gates.models.heartbeats import ServiceHeartbeat
from gates.models.hosts import Host, HostCleanup, Profile
from gates.models.idempotency import IdempotencyKey
from gates.models.runs import Artifact, Measurement, Run, RunStep
from gates.models.soak import Soak, SoakPoint, SoakSample
from gates.models.tenancy import ApiToken, Membership, Organization

__all__ = [
    "Alert",
    "AlertPreference",
    "AlertSettings",
    "ApiToken",
    "Artifact",
    "AuditEvent",
    "Claim",
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
    "Publication",
    "PublicationConsent",
    "ReportPdf",
    "Run",
    "RunStep",
    "ServiceHeartbeat",
    "Soak",
    "SoakPoint",
    "SoakSample",
    "SpecSignature",
    "StopLossReset",
    "TtftBandPrediction",
    "Verdict",
    "WebhookEndpoint",
    "WorkloadTrace",
]
