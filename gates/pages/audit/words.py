"""The pieces of an audit sentence: the event as the page hands it over (AuditFacts), who
acted, quoted values, lists, the generic sentence of an action with none of its own. Pure: no
Django; gates/pages/audit/sentences.py writes each action's sentence from these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gates import figures

QUOTE_CHARS = 200  # a quoted reason or justification is cut here; the JSON keeps all of it
LIST_ITEMS = 5
# Who acted when no user did: the labels services give Actor.system() and friends.
SYSTEM_ACTORS = {
    "system": "the system",
    "decision-engine": "the system",
    "worker": "the worker",
    "rotate_keys": "the key rotation command",
    "login": "the sign-in guard",
    "ack-link": "someone with the acknowledge link",
    "demo": "the demo",
}


@dataclass(frozen=True)
class AuditFacts:
    """One event as stored, with the page's labels: `target` names the target as pages do
    ("G3 spec v3", "G3 run #2"), `run` the run a detail's `run` id names; either may be empty."""

    action: str
    actor: str
    target_type: str = ""
    target_id: str = ""
    target: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    run: str = ""


def actor_words(username: str, label: str) -> str:
    """The actor as a sentence names it: a user by name, else what acted for nobody."""
    if username:
        return username
    if label.startswith("api-token:"):
        return f"API token {label.removeprefix('api-token:')}"
    if label == "web":
        return "someone not signed in"
    return SYSTEM_ACTORS.get(label, label or "someone")


def generic_sentence(facts: AuditFacts) -> str:
    """An action with no sentence of its own yet: still words, never the JSON."""
    what = facts.action.replace("_", " ").replace(".", " ").strip() or "an unnamed action"
    on = f" on {target_of(facts)}" if facts.target_type else ""
    return f"{facts.actor} recorded “{what}”{on}"


def target_of(facts: AuditFacts) -> str:
    if facts.target:
        return facts.target
    kind = facts.target_type.lower().replace("gatespec", "spec") or "object"
    return f"{kind} #{facts.target_id}" if facts.target_id else kind


def quoted(value: Any, limit: int = QUOTE_CHARS) -> str:
    text = " ".join(str(value).split())
    return f"“{text[:limit]}…”" if len(text) > limit else f"“{text}”"


def listed(values: Any, limit: int = LIST_ITEMS) -> str:
    items = [str(v) for v in values] if isinstance(values, list | tuple) else [str(values)]
    shown = ", ".join(items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown


def plural(count: Any, noun: str, many: str | None = None) -> str:
    return figures.count(count, noun, many)


def verdict(value: Any) -> str:
    return str(value or "no verdict").replace("_", " ")


class Detail:
    """The detail's values, read leniently: a key an older event lacks reads as empty."""

    def __init__(self, detail: Mapping[str, Any]) -> None:
        self.detail = detail

    def __getitem__(self, key: str) -> Any:
        return self.detail.get(key)

    def text(self, key: str, missing: str = "") -> str:
        value = self.detail.get(key)
        return missing if value is None or value == "" else str(value)


Writer = Callable[[AuditFacts, Detail], str]
