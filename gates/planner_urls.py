"""Page routes of the KV planner, included from gates/urls.py into the `gates` namespace."""

from django.urls import path

from gates import planner_views

urlpatterns = [
    path("", planner_views.planner_page, name="planner"),
    path("engagements/<int:pk>/save/", planner_views.planner_save, name="planner-save"),
]
