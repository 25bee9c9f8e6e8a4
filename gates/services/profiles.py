"""The built-in serving profiles (gates/builtin_profiles/*.json): read, and kept in the database
(a migrate runs builtin_profiles_sync through gates/signals.py)."""

from __future__ import annotations

import json
from pathlib import Path

from gates.models import Profile

BUILTIN_PROFILES_DIR = Path(__file__).resolve().parents[1] / "builtin_profiles"


def builtin_profile_documents() -> list[dict]:
    """Every built-in profile document, in file name order."""
    return [json.loads(path.read_text()) for path in sorted(BUILTIN_PROFILES_DIR.glob("*.json"))]


def builtin_profiles_sync() -> int:
    """Create or update a Profile row per built-in document; returns how many."""
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
