"""The admin for vendor admins: organizations, members, hosts, profiles, and read-only history.

Append-only rows (decisions, audit events) cannot be changed or deleted here; key material is
write-only.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin

from gates import services
from gates.errors import ServiceError
from gates.models import (
    Alert,
    ApiToken,
    AuditEvent,
    Decision,
    Engagement,
    Gate,
    GateSpec,
    Host,
    HostCleanup,
    Membership,
    Organization,
    Profile,
    Run,
)
from gates.pages.hosts.forms import PORT_ERRORS


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "slug", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


class GateInline(admin.TabularInline):
    model = Gate
    fields = ["kind", "state", "verdict", "stop_loss_review", "planned_start", "planned_end"]
    readonly_fields = ["kind", "state", "verdict", "stop_loss_review"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Engagement)
class EngagementAdmin(admin.ModelAdmin):
    list_display = ["title", "organization", "model_name", "state", "created_at"]
    list_filter = ["state", "organization"]
    search_fields = ["title", "model_name"]
    readonly_fields = ["state", "state_reason", "created_by", "created_at"]
    inlines = [GateInline]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # New engagements go through the service so their four gates and specs exist.
        created = services.engagement_create(
            actor=services.Actor.from_request(request),
            organization=obj.organization,
            title=obj.title,
            model_name=obj.model_name,
            platform=obj.platform,
            planned_start=obj.planned_start,
        )
        obj.pk = created.pk
        obj._state.adding = False


class HostForm(forms.ModelForm):
    private_key = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off"}),
        required=False,
        strip=False,
        help_text="Write-only: stored encrypted, never shown again.",
    )

    # The model's field takes any positive number; a TCP port cannot.
    port = forms.IntegerField(min_value=1, max_value=65535, initial=22, error_messages=PORT_ERRORS)

    class Meta:
        model = Host
        fields = [
            "organization",
            "name",
            "transport",
            "address",
            "port",
            "username",
            "host_key",
            "key_file_path",
            "profile",
            "labels",
        ]

    def clean_host_key(self) -> str:
        key = self.cleaned_data["host_key"].strip()
        if key:
            try:
                services.host_key_fingerprint(key)
            except ServiceError as error:
                raise forms.ValidationError(error.detail) from error
        return key


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    form = HostForm
    list_display = [
        "name",
        "organization",
        "display_address",
        "profile",
        "host_key_fingerprint",
        "has_stored_credential",
        "lease_run",
    ]
    list_filter = ["organization", "profile", "transport"]
    # The lease and its fencing token belong to the runs: not shown on the form at all.
    readonly_fields = ["host_key_fingerprint"]

    def save_model(self, request, obj, form, change):
        if obj.host_key:
            obj.host_key_fingerprint = services.host_key_fingerprint(obj.host_key)
        super().save_model(request, obj, form, change)
        if form.cleaned_data.get("private_key"):
            services.host_set_credential(host=obj, private_key=form.cleaned_data["private_key"])
        services.audit_record(
            actor=services.Actor.from_request(request),
            action="host.change" if change else "host.create",
            target=obj,
            organization_id=obj.organization_id,
            detail={
                "fingerprint": obj.host_key_fingerprint,
                "credential_replaced": bool(form.cleaned_data.get("private_key")),
            },
        )


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "builtin", "updated_at"]
    readonly_fields = ["builtin"]


@admin.register(HostCleanup)
class HostCleanupAdmin(ReadOnlyAdmin):
    """Pending cleanups keep their host from being leased; the janitor retries them."""

    list_display = ["host", "run", "created_at", "attempts", "done_at", "last_problem"]
    list_filter = ["done_at"]


@admin.register(GateSpec)
class GateSpecAdmin(ReadOnlyAdmin):
    list_display = ["gate", "version", "frozen_at", "in_force"]
    list_filter = ["gate__kind"]


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = [
        "__str__",
        "host",
        "state",
        "outcome",
        "progress_done",
        "progress_total",
        "created_at",
    ]
    list_filter = ["state", "outcome", "gate__kind"]


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["gate", "kind", "verdict", "decided_by", "decided_by_system", "created_at"]
    list_filter = ["kind", "verdict"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor", "actor_label", "action", "target_type", "target_id", "ip"]
    list_filter = ["action"]
    search_fields = ["action", "target_id", "actor_label"]


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ["event", "subject", "attempts", "delivered_at", "acked_at", "created_at"]
    list_filter = ["event"]


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "organization",
        "prefix",
        "scopes",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    exclude = ["digest"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            services.api_token_revoke(actor=services.Actor.from_request(request), token=token)
