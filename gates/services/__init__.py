"""Services: where Tollgate's domain state is written; views, API and tasks call them. Split
by sub-domain; import them from `gates.services`.

What a person asks for takes an Actor and leaves an audit event: engagements, specs and their
signatures, waivers and stops, runs started or canceled, uploads, hosts, API tokens, KV plans.
The worker's bookkeeping (claims, steps, heartbeats, leases, alert delivery) is not audited; a
failed run and an engine decision are, under a system actor. host_set_credential and
host_rotate_credentials leave the audit event to their callers.
"""

from gates.errors import ServiceError
from gates.services.alerts import alert_claim_due, alert_deliver, alert_enqueue, alert_recipients
from gates.services.audit import Actor, audit_record
from gates.services.engagements import (
    engagement_create,
    engagement_stop,
    gate_spec_sign,
    gate_spec_update,
    gate_waive,
)
from gates.services.evaluation import run_decision_context, run_evaluate
from gates.services.execution import host_target, run_execution
from gates.services.hosts import (
    host_create,
    host_credential,
    host_key_fingerprint,
    host_rotate_credentials,
    host_set_credential,
)
from gates.services.planning import engagement_kv_plan_save
from gates.services.recording import (
    ClaimLostError,
    Evaluation,
    PoisonStepError,
    RunSession,
    run_remote_dirs,
)
from gates.services.runs import (
    GateNotRunnableError,
    decision_record,
    host_lease_acquire,
    host_lease_release,
    run_assert_lease,
    run_cancel,
    run_claim,
    run_create,
    run_fail,
    run_mark_canceled,
    runs_stale,
    runs_to_redispatch,
)
from gates.services.soak import (
    SoakTick,
    soak_tick_claim,
    soak_tick_record,
    soak_tick_release,
    soak_tick_unreachable,
    soaks_due,
)
from gates.services.soakcontrol import soak_extend, soak_stop
from gates.services.tokens import api_token_create, api_token_revoke
from gates.services.uploads import run_upload_decide, run_upload_record

__all__ = [
    "Actor",
    "ClaimLostError",
    "Evaluation",
    "GateNotRunnableError",
    "PoisonStepError",
    "RunSession",
    "ServiceError",
    "SoakTick",
    "alert_claim_due",
    "alert_deliver",
    "alert_enqueue",
    "alert_recipients",
    "api_token_create",
    "api_token_revoke",
    "audit_record",
    "decision_record",
    "engagement_create",
    "engagement_kv_plan_save",
    "engagement_stop",
    "gate_spec_sign",
    "gate_spec_update",
    "gate_waive",
    "host_create",
    "host_credential",
    "host_key_fingerprint",
    "host_lease_acquire",
    "host_lease_release",
    "host_rotate_credentials",
    "host_set_credential",
    "host_target",
    "run_assert_lease",
    "run_cancel",
    "run_claim",
    "run_create",
    "run_decision_context",
    "run_evaluate",
    "run_execution",
    "run_fail",
    "run_mark_canceled",
    "run_remote_dirs",
    "run_upload_decide",
    "run_upload_record",
    "runs_stale",
    "runs_to_redispatch",
    "soak_extend",
    "soak_stop",
    "soak_tick_claim",
    "soak_tick_record",
    "soak_tick_release",
    "soak_tick_unreachable",
    "soaks_due",
]
