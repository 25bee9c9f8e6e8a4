"""A soak's live state as the run's API entry carries it. HTTP shapes only."""

from __future__ import annotations

from rest_framework import serializers

from gates.models import Soak


class SoakSerializer(serializers.ModelSerializer):
    """A soak's live state: its gaps, and the verdict so far, marked provisional."""

    provisional = serializers.SerializerMethodField()
    retention = serializers.JSONField(source="retention_summary", read_only=True)

    class Meta:
        model = Soak
        fields = [
            "state",
            "compressed",
            "generation",
            "last_seq",
            "started",
            "deadline",
            "extended_h",
            "stop_reason",
            "heartbeat_age_s",
            "last_contact_at",
            "unreachable_since",
            "gaps",
            "notes",
            "health",
            "agent_exit",
            "provisional",
            "retention",
        ]

    def get_provisional(self, soak: Soak) -> dict | None:
        if not soak.provisional:
            return None
        keep = ("verdict", "reasons", "clauses")
        return {"provisional": True, **{key: soak.provisional.get(key) for key in keep}}
