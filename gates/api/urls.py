"""REST API v1 routes: the contract CI relies on (README "REST API" lists them; the OpenAPI
schema at /api/schema/ is generated from these views)."""

from django.urls import path

from gates.api import (
    contract,
    engagements,
    evidence,
    history,
    hosts,
    inventory,
    planner,
    runs,
    soak,
    statistics,
    traces,
    uploads,
)
from gates.api.rest import schema  # noqa: F401 (registers the bearer-token auth scheme)
from gates.api.tokens import TokenDetailApi, TokenListApi

app_name = "api"

urlpatterns = [
    path("engagements/", engagements.EngagementListApi.as_view(), name="engagement-list"),
    path(
        "engagements/<int:pk>/", engagements.EngagementDetailApi.as_view(), name="engagement-detail"
    ),
    path(
        "engagements/<int:pk>/inventory/",
        inventory.EngagementInventoryApi.as_view(),
        name="engagement-inventory",
    ),
    path(
        "engagements/<int:pk>/inventory/amend/",
        inventory.InventoryAmendApi.as_view(),
        name="engagement-inventory-amend",
    ),
    path(
        "engagements/<int:pk>/inventory/sign/",
        inventory.InventorySignApi.as_view(),
        name="engagement-inventory-sign",
    ),
    path(
        "engagements/<int:pk>/traces/",
        traces.EngagementTracesApi.as_view(),
        name="engagement-traces",
    ),
    path("traces/<int:pk>/", traces.TraceDetailApi.as_view(), name="trace-detail"),
    path("gates/<int:pk>/", engagements.GateDetailApi.as_view(), name="gate-detail"),
    path("gates/<int:pk>/spec/", contract.GateSpecApi.as_view(), name="gate-spec"),
    path("gates/<int:pk>/spec/sign/", contract.GateSpecSignApi.as_view(), name="gate-spec-sign"),
    path("gates/<int:pk>/spec/reset/", contract.GateResetApi.as_view(), name="gate-reset"),
    path("keys/signing/", contract.PartyKeyApi.as_view(), name="party-keys"),
    path("keys/", evidence.EvidenceKeysApi.as_view(), name="evidence-keys"),
    path("gates/<int:pk>/evidence/", evidence.GateEvidenceApi.as_view(), name="gate-evidence"),
    path(
        "gates/<int:pk>/evidence/signatures/",
        evidence.EvidenceSignaturesApi.as_view(),
        name="gate-evidence-signatures",
    ),
    path("gates/<int:pk>/runs/", runs.GateRunsApi.as_view(), name="gate-runs"),
    path(
        "gates/<int:pk>/statistics/", statistics.GateStatisticsApi.as_view(), name="gate-statistics"
    ),
    path("gates/<int:pk>/history/", history.GateHistoryApi.as_view(), name="gate-history"),
    path("history/", history.ClauseHistoryApi.as_view(), name="clause-history"),
    path("runs/<int:pk>/", runs.RunDetailApi.as_view(), name="run-detail"),
    path("runs/<int:pk>/compare/<int:other>/", history.RunCompareApi.as_view(), name="run-compare"),
    path("runs/<int:pk>/cancel/", runs.RunCancelApi.as_view(), name="run-cancel"),
    path("runs/<int:pk>/evidence/", evidence.RunEvidenceApi.as_view(), name="run-evidence"),
    path("runs/<int:pk>/measurements/", runs.RunMeasurementsApi.as_view(), name="run-measurements"),
    path("runs/<int:pk>/samples/", soak.RunSamplesApi.as_view(), name="run-samples"),
    path("runs/<int:pk>/soak/stop/", runs.SoakStopApi.as_view(), name="soak-stop"),
    path("runs/<int:pk>/soak/extend/", runs.SoakExtendApi.as_view(), name="soak-extend"),
    path("runs/<int:pk>/results/", uploads.RunResultsApi.as_view(), name="run-results"),
    path("runs/<int:pk>/decide/", uploads.RunDecideApi.as_view(), name="run-decide"),
    path("hosts/", hosts.HostListApi.as_view(), name="host-list"),
    path("hosts/scan/", hosts.HostScanApi.as_view(), name="host-scan"),
    path("hosts/<int:pk>/", hosts.HostDetailApi.as_view(), name="host-detail"),
    path("hosts/<int:pk>/check/", hosts.HostCheckApi.as_view(), name="host-check"),
    path("planner/", planner.PlannerApi.as_view(), name="planner"),
    path("tokens/", TokenListApi.as_view(), name="token-list"),
    path("tokens/<int:pk>/", TokenDetailApi.as_view(), name="token-detail"),
]
