"""Services: where Tollgate's domain state is written; views, API and tasks call them. Split
by sub-domain; import them from `gates.services`.

What a person asks for takes an Actor and leaves an audit event: engagements, specs and their
signatures, waivers and stops, runs started or canceled, uploads, hosts, API tokens, KV plans.
The worker's bookkeeping (claims, steps, heartbeats, leases, alert delivery) is not audited; a
failed run and an engine decision are, under a system actor. host_set_credential and
host_rotate_credentials leave the audit event to their callers.
"""

from gates.errors import ServiceError
from gates.services.alerts.delivery import alert_claim_due, alert_deliver
from gates.services.alerts.escalation import (
    alert_acknowledge,
    alert_acknowledge_link,
    alerts_escalate,
)
from gates.services.alerts.outbox import alert_enqueue, alert_recipients
from gates.services.alerts.settings import (
    alert_preference_save,
    engagement_alert_settings_save,
    webhook_create,
)
from gates.services.audit import Actor, audit_record
from gates.services.contract.inventory import (
    accepted_inventory,
    inventory_amendment_pending,
    inventory_amendment_propose,
    inventory_amendment_sign,
)
from gates.services.contract.signing_keys import party_key_register, ssh_signature_check
from gates.services.contract.specs import (
    SpecChange,
    gate_spec_propose,
    gate_spec_sign,
    gate_spec_update,
    run_invalid,
    stop_loss_reset_sign,
)
from gates.services.engagements import engagement_create, engagement_stop, gate_waive
from gates.services.heartbeats import (
    heartbeat_checks,
    heartbeat_record,
    heartbeat_report,
    heartbeat_state,
    service_restart_record,
    service_restarts,
    silence_alert_send,
)
from gates.services.hosts.access import (
    UploadProfile,
    host_create,
    host_credential,
    host_key_fingerprint,
    host_pin_key,
    host_rotate_credentials,
    host_set_credential,
    host_target,
    host_update,
    upload_run_values,
)
from gates.services.hosts.cleanup import (
    CleanupJob,
    HostCleanupPendingError,
    host_cleanup_claim,
    host_cleanup_finish,
    host_cleanup_pending,
    host_cleanup_record,
    host_cleanups_due,
)
from gates.services.hosts.onboarding import host_connection_check, host_scan
from gates.services.planning import (
    engagement_kv_plan_save,
    ttft_band_claim,
    ttft_band_compute,
    ttft_band_request,
    ttft_bands_prune,
    ttft_bands_to_compute,
)
from gates.services.reports import (
    report_engine_decision,
    report_inventory_decision,
    report_pdf_claim,
    report_pdf_current,
    report_pdf_fail,
    report_pdf_request,
    report_pdf_store,
    report_pdfs_to_render,
)
from gates.services.runs.attempts import run_spent_attempt
from gates.services.runs.evaluation import run_decision_context, run_evaluate
from gates.services.runs.lifecycle import (
    MIN_CANCEL_REASON_CHARS,
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
    runs_due_for_retry,
    runs_stale,
    runs_to_redispatch,
)
from gates.services.runs.predictions import run_ttft_prediction_record, runs_to_predict
from gates.services.runs.recording import (
    ClaimLostError,
    Evaluation,
    PoisonStepError,
    RunSession,
    run_remote_dirs,
)
from gates.services.runs.uploads import run_upload_decide, run_upload_record
from gates.services.runs.workorder import run_execution
from gates.services.soak.control import soak_extend, soak_stop
from gates.services.soak.retention import PruneResult, soak_prune, soaks_to_prune
from gates.services.soak.ticks import (
    SoakTick,
    soak_tick_claim,
    soak_tick_record,
    soak_tick_release,
    soak_tick_unreachable,
    soaks_due,
)
from gates.services.tokens import api_token_create, api_token_revoke
from gates.services.traces import (
    trace_characterize,
    trace_claim,
    trace_upload,
    traces_to_characterize,
)

__all__ = [
    "MIN_CANCEL_REASON_CHARS",
    "Actor",
    "ClaimLostError",
    "CleanupJob",
    "Evaluation",
    "GateNotRunnableError",
    "HostCleanupPendingError",
    "PoisonStepError",
    "PruneResult",
    "RunSession",
    "ServiceError",
    "SoakTick",
    "SpecChange",
    "UploadProfile",
    "accepted_inventory",
    "alert_acknowledge",
    "alert_acknowledge_link",
    "alert_claim_due",
    "alert_deliver",
    "alert_enqueue",
    "alert_preference_save",
    "alert_recipients",
    "alerts_escalate",
    "api_token_create",
    "api_token_revoke",
    "audit_record",
    "decision_record",
    "engagement_alert_settings_save",
    "engagement_create",
    "engagement_kv_plan_save",
    "engagement_stop",
    "gate_spec_propose",
    "gate_spec_sign",
    "gate_spec_update",
    "gate_waive",
    "heartbeat_checks",
    "heartbeat_record",
    "heartbeat_report",
    "heartbeat_state",
    "host_cleanup_claim",
    "host_cleanup_finish",
    "host_cleanup_pending",
    "host_cleanup_record",
    "host_cleanups_due",
    "host_connection_check",
    "host_create",
    "host_credential",
    "host_key_fingerprint",
    "host_lease_acquire",
    "host_lease_release",
    "host_pin_key",
    "host_rotate_credentials",
    "host_scan",
    "host_set_credential",
    "host_target",
    "host_update",
    "inventory_amendment_pending",
    "inventory_amendment_propose",
    "inventory_amendment_sign",
    "party_key_register",
    "report_engine_decision",
    "report_inventory_decision",
    "report_pdf_claim",
    "report_pdf_current",
    "report_pdf_fail",
    "report_pdf_request",
    "report_pdf_store",
    "report_pdfs_to_render",
    "run_assert_lease",
    "run_cancel",
    "run_claim",
    "run_create",
    "run_decision_context",
    "run_evaluate",
    "run_execution",
    "run_fail",
    "run_invalid",
    "run_mark_canceled",
    "run_remote_dirs",
    "run_spent_attempt",
    "run_ttft_prediction_record",
    "run_upload_decide",
    "run_upload_record",
    "runs_due_for_retry",
    "runs_stale",
    "runs_to_predict",
    "runs_to_redispatch",
    "service_restart_record",
    "service_restarts",
    "silence_alert_send",
    "soak_extend",
    "soak_prune",
    "soak_stop",
    "soak_tick_claim",
    "soak_tick_record",
    "soak_tick_release",
    "soak_tick_unreachable",
    "soaks_due",
    "soaks_to_prune",
    "ssh_signature_check",
    "stop_loss_reset_sign",
    "trace_characterize",
    "trace_claim",
    "trace_upload",
    "traces_to_characterize",
    "ttft_band_claim",
    "ttft_band_compute",
    "ttft_band_request",
    "ttft_bands_prune",
    "ttft_bands_to_compute",
    "upload_run_values",
    "webhook_create",
]
