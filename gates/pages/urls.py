"""Page routes, in the `gates` namespace (the KV planner's pages included)."""

from django.urls import path

from gates.pages import alerts, inventory, planner, views

app_name = "gates"

urlpatterns = [
    path("", views.engagement_list, name="engagement-list"),
    path("engagements/<int:pk>/", views.engagement_detail, name="engagement-detail"),
    path("gates/<int:pk>/", views.gate_detail, name="gate-detail"),
    path("gates/<int:pk>/runs/start/", views.run_start, name="run-start"),
    path("gates/<int:pk>/review/", views.gate_review, name="gate-review"),
    path("gates/<int:pk>/spec/sign/", views.spec_sign, name="spec-sign"),
    path("gates/<int:pk>/spec/reset/", views.gate_reset, name="gate-reset"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/inventory/amend/", inventory.inventory_amend, name="inventory-amend"),
    path("engagements/<int:pk>/inventory/sign/", inventory.inventory_sign, name="inventory-sign"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/soak/", views.soak_control, name="soak-control"),
    path("planner/", planner.planner_page, name="planner"),
    path("planner/engagements/<int:pk>/save/", planner.planner_save, name="planner-save"),
    path("alerts/ack/<str:token>/", alerts.alert_ack, name="alert-ack"),
    path("alerts/<int:pk>/ack/", alerts.alert_ack_here, name="alert-ack-here"),
    path("settings/alerts/", alerts.alert_preferences, name="alert-preferences"),
    path("engagements/<int:pk>/alerts/", alerts.engagement_alerts, name="engagement-alerts"),
]
