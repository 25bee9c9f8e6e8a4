"""Page routes, in the `gates` namespace (the KV planner's pages included)."""

from django.urls import path

from gates.pages import actions, alerts, detail, runs, tokens
from gates.pages.audit import page as audit
from gates.pages.editing import engagement as engagement_editing
from gates.pages.editing import spec as spec_editing
from gates.pages.history import page as history
from gates.pages.hosts import inventory
from gates.pages.hosts import page as hosts
from gates.pages.library import public as library
from gates.pages.library import publishing
from gates.pages.planner import page as planner
from gates.pages.report import page as report
from gates.pages.soak import view as soakview
from gates.pages.traces import page as traces

app_name = "gates"

urlpatterns = [
    path("", detail.engagement_list, name="engagement-list"),
    path("engagements/new/", engagement_editing.engagement_new, name="engagement-new"),
    path("engagements/<int:pk>/", detail.engagement_detail, name="engagement-detail"),
    path("gates/<int:pk>/", detail.gate_detail, name="gate-detail"),
    path("gates/<int:pk>/history/", history.gate_history, name="gate-history"),
    path("history/", history.clause_history, name="clause-history"),
    path("runs/<int:pk>/compare/<int:other>/", history.run_compare, name="run-compare"),
    path("gates/<int:pk>/report/", report.gate_report, name="gate-report"),
    path("gates/<int:pk>/report.pdf", report.gate_report_pdf, name="gate-report-pdf"),
    path("gates/<int:pk>/runs/start/", actions.run_start, name="run-start"),
    path("gates/<int:pk>/review/", actions.gate_review, name="gate-review"),
    path("gates/<int:pk>/spec/edit/", spec_editing.spec_edit, name="spec-edit"),
    path("gates/<int:pk>/spec/sign/", actions.spec_sign, name="spec-sign"),
    path("gates/<int:pk>/spec/reset/", actions.gate_reset, name="gate-reset"),
    path("runs/<int:pk>/", detail.run_detail, name="run-detail"),
    path("runs/<int:pk>/inventory/amend/", inventory.inventory_amend, name="inventory-amend"),
    path("engagements/<int:pk>/inventory/sign/", inventory.inventory_sign, name="inventory-sign"),
    path("runs/<int:pk>/cancel/", actions.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/log/", runs.run_log_download, name="run-log"),
    path("runs/<int:pk>/files/", runs.run_file_download, name="run-file"),
    path("runs/<int:pk>/soak/", actions.soak_control, name="soak-control"),
    path("runs/<int:pk>/soak/series/", soakview.soak_series, name="soak-series"),
    path("engagements/<int:pk>/traces/", traces.trace_upload, name="trace-upload"),
    path("traces/<int:pk>/", traces.trace_detail, name="trace-detail"),
    path("planner/", planner.planner_page, name="planner"),
    path("planner/engagements/<int:pk>/save/", planner.planner_save, name="planner-save"),
    path("planner/ttft/", planner.planner_ttft_band, name="planner-ttft"),
    path("alerts/ack/<str:token>/", alerts.alert_ack, name="alert-ack"),
    path("alerts/<int:pk>/ack/", alerts.alert_ack_here, name="alert-ack-here"),
    path("settings/alerts/", alerts.alert_preferences, name="alert-preferences"),
    path("engagements/<int:pk>/alerts/", alerts.engagement_alerts, name="engagement-alerts"),
    path("hosts/", hosts.host_list, name="host-list"),
    path("hosts/add/", hosts.host_add, name="host-add"),
    path("hosts/<int:pk>/", hosts.host_detail, name="host-detail"),
    path("hosts/<int:pk>/check/", hosts.host_check, name="host-check"),
    path("hosts/<int:pk>/key/", hosts.host_key, name="host-key"),
    path("tokens/", tokens.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("audit/", audit.audit_log, name="audit-log"),
    path("gates/<int:pk>/publication/", publishing.gate_publication, name="gate-publication"),
    path("library/claims/new/", publishing.claim_new, name="claim-new"),
    # The public evidence library: no login (gates/pages/library.py).
    path("library/", library.library_index, name="library"),
    path("library/reports/<str:slug>/", library.library_report, name="library-report"),
    path("library/reports/<str:slug>/report.pdf", library.library_report_pdf, name="library-pdf"),
    path("library/reports/<str:slug>/bundle.zip", library.library_bundle, name="library-bundle"),
    path("library/claims/<str:slug>/", library.library_claim, name="library-claim"),
    path("library/claims/<str:slug>/badge.svg", library.claim_badge, name="library-badge"),
    path("library/claims/<str:slug>/feed.json", library.claim_feed, name="library-feed"),
]
