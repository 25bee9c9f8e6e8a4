"""Keeps the built-in profiles in the database after migrate (gates.services.profiles writes
them), and puts django-axes' login lockouts in the audit trail."""

from __future__ import annotations

from axes.signals import user_locked_out
from django.db.models.signals import post_migrate
from django.dispatch import receiver

from gates.services.profiles import builtin_profiles_sync


@receiver(post_migrate)
def _sync_profiles_after_migrate(sender, **kwargs) -> None:
    if sender.name == "gates":
        builtin_profiles_sync()


@receiver(user_locked_out)
def _audit_login_lockout(sender, request, username: str, ip_address: str, **kwargs) -> None:
    from gates.services.audit import Actor, audit_record

    audit_record(
        actor=Actor(label="login", ip=ip_address),
        action="login.locked_out",
        detail={"username": username[:150], "ip": ip_address},
    )
