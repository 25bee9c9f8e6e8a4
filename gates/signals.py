"""Keeps the built-in profiles (gates/builtin_profiles/*.json) in the database after migrate,
and puts django-axes' login lockouts in the audit trail."""

from __future__ import annotations

import json
from pathlib import Path

from axes.signals import user_locked_out
from django.db.models.signals import post_migrate
from django.dispatch import receiver


def builtin_profile_documents() -> list[dict]:
    folder = Path(__file__).resolve().parent / "builtin_profiles"
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def sync_builtin_profiles() -> int:
    from gates.models import Profile

    documents = builtin_profile_documents()
    for document in documents:
        Profile.objects.update_or_create(
            name=document["name"],
            defaults={
                "description": document.get("description", ""),
                "builtin": True,
                "commands": document["commands"],
                "parameters": document.get("parameters", {}),
                "required_tools": document.get("required_tools", []),
            },
        )
    return len(documents)


@receiver(post_migrate)
def _sync_profiles_after_migrate(sender, **kwargs) -> None:
    if sender.name == "gates":
        sync_builtin_profiles()


@receiver(user_locked_out)
def _audit_login_lockout(sender, request, username: str, ip_address: str, **kwargs) -> None:
    from gates.services.audit import Actor, audit_record

    audit_record(
        actor=Actor(label="login", ip=ip_address),
        action="login.locked_out",
        detail={"username": username[:150], "ip": ip_address},
    )
