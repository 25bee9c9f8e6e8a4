"""Top-level URL map: pages, the REST API (v1), its schema and docs, the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from gates.healthz import healthz

urlpatterns = [
    path("", include("gates.pages.urls")),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Account: Django's own views (templates in templates/registration/); the reset link in
    # the email is single-use and expires after PASSWORD_RESET_TIMEOUT.
    path("account/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "account/password/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("account/reset/", auth_views.PasswordResetView.as_view(), name="password_reset"),
    path(
        "account/reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "account/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "account/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("gates.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]

# A URL no route matches is still a JSON error under /api/.
handler404 = "gates.api.rest.errors.not_found"
# A body past the form limit is a 413 that says so (JSON under /api/), not a bare 400.
handler400 = "gates.api.rest.errors.bad_request"
