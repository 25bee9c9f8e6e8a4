"""Audit events as sentences (pure, no database): every action the code can write, collected
from the source, has a sentence of its own; real details read as a person would say them; an
unknown action or a detail of any shape reads generically, never crashes, never as JSON."""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.pages.audit.sentences import SENTENCES, audit_sentence
from gates.pages.audit.words import AuditFacts, actor_words, generic_sentence

ROOT = Path(__file__).resolve().parents[4]
SOURCES = ("config", "gates", "worker")


class UnreadableActionError(Exception):
    pass


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: dict) -> ast.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


class ActionReader:
    """The action strings one module can pass to audit_record: literals, both sides of a
    conditional, f-strings and parameters, followed to every call of their function."""

    def __init__(self, path: Path, source: str | None = None) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
        self.parents = _parents(self.tree)
        self.calls = [node for node in ast.walk(self.tree) if isinstance(node, ast.Call)]

    def actions(self) -> set[str]:
        found: set[str] = set()
        for call in self.calls:
            if _called_name(call) == "audit_record":
                action = next(k.value for k in call.keywords if k.arg == "action")
                found |= self.values(action, _enclosing_function(call, self.parents))
        return found

    def values(self, node: ast.expr, function: ast.FunctionDef | None) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            return self.values(node.body, function) | self.values(node.orelse, function)
        if isinstance(node, ast.JoinedStr):
            texts = {""}
            for part in node.values:
                inner = part.value if isinstance(part, ast.FormattedValue) else part
                texts = {t + v for t in texts for v in self.values(inner, function)}
            return texts
        if isinstance(node, ast.Name) and function is not None:
            return self.parameter_values(function, node.id)
        raise UnreadableActionError(
            f"{self.path.relative_to(ROOT)}:{node.lineno}: an audit action this test cannot "
            "read; write it as a string literal (or a parameter passed literals)"
        )

    def parameter_values(self, function: ast.FunctionDef, name: str) -> set[str]:
        arguments = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        keyword_only = [a.arg for a in function.args.kwonlyargs]
        if name not in arguments + keyword_only:
            raise UnreadableActionError(
                f"{self.path}: {name} is not a parameter of {function.name}"
            )
        found: set[str] = set()
        for call in (c for c in self.calls if _called_name(c) == function.name):
            given_as = {k.arg: k.value for k in call.keywords}
            if name in arguments and arguments.index(name) < len(call.args):
                given_as[name] = call.args[arguments.index(name)]
            found |= self.values(given_as[name], _enclosing_function(call, self.parents))
        return found


@cache
def written_actions() -> frozenset[str]:
    actions: set[str] = set()
    for package in SOURCES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and "audit_record(" in path.read_text():
                actions |= ActionReader(path).actions()
    return frozenset(actions)


def test_the_collector_finds_literal_conditional_formatted_and_passed_actions():
    """A positive control: each way the code writes an action is read."""
    actions = written_actions()
    assert len(actions) >= 35
    assert {"spec.sign", "run.cancel"} <= actions  # literals
    assert {
        "host.create",
        "host.change",
        "gate.decide",
        "gate.rehearse",
    } <= actions  # a if b else c
    assert {"library.propose", "library.approve", "library.withdraw"} <= actions  # f"library.{act}"
    assert {"soak.stop", "soak.extend", "gate.waive", "engagement.stop"} <= actions  # parameters


def test_an_action_the_collector_cannot_read_fails_loudly():
    source = "def f(x):\n    audit_record(actor=a, action=x.upper())\n\nf('a')\n"
    with pytest.raises(UnreadableActionError, match=r"probe\.py:2: an audit action"):
        ActionReader(ROOT / "gates" / "probe.py", source).actions()
    passed = "def f(x):\n    audit_record(actor=a, action=f'soak.{x}')\n\nf('stop')\nf(x='go')\n"
    assert ActionReader(ROOT / "gates" / "probe.py", passed).actions() == {"soak.stop", "soak.go"}


def test_every_written_action_has_a_sentence_of_its_own_and_none_is_stale():
    actions = written_actions()
    assert sorted(actions - set(SENTENCES)) == [], "write a sentence in gates/pages/audit/"
    assert sorted(set(SENTENCES) - actions) == [], "a sentence for an action nothing writes"


def test_only_the_audit_writer_creates_audit_events():
    writers = {
        str(path.relative_to(ROOT))
        for package in SOURCES
        for path in (ROOT / package).rglob("*.py")
        if "AuditEvent.objects.create" in path.read_text()
    }
    assert writers == {"gates/services/audit.py"}


def facts(action: str, detail: dict | None = None, **labels: str) -> AuditFacts:
    return AuditFacts(
        action=action,
        actor=labels.pop("actor", "alice"),
        target_type=labels.pop("target_type", ""),
        target_id=labels.pop("target_id", ""),
        detail=detail or {},
        **labels,
    )


# A real detail of every action (as its service writes it), and the sentence it reads as.
EXAMPLES = [
    (
        facts("engagement.create", {"title": "Offload trial"}),
        "alice created the engagement “Offload trial”",
    ),
    (
        facts("engagement.stop", {"gate": "G3", "justification": "two fails"}, target="G3"),
        "alice stopped the engagement at G3: “two fails”",
    ),
    (
        facts("gate.waive", {"gate": "G2", "justification": "accepted as is"}),
        "alice waived G2: “accepted as is”",
    ),
    (
        facts(
            "gate.decide",
            {"verdict": "inconclusive", "run": 12, "decision": 7},
            actor="the system",
            target="G3",
        ),
        "the system decided run #12: inconclusive",
    ),
    (
        facts("gate.rehearse", {"verdict": "pass", "run": 12}, actor="the system", run="G3 run #2"),
        "the system decided G3 run #2 as a rehearsal: pass (it does not count)",
    ),
    (
        facts(
            "gate.reset.sign",
            {"party": "customer", "reason": "new driver", "effective": False},
            target="G3",
        ),
        "alice signed the stop-loss reset of G3 for the customer: “new driver”"
        " (awaiting the other party)",
    ),
    (
        facts(
            "engagement.kv_plan_save", {"before": {}, "after": {"model": "llama-3-70b", "gpus": 8}}
        ),
        "alice saved the KV planner's inputs to the engagement (model “llama-3-70b”, 8 GPUs)",
    ),
    (
        facts(
            "spec.update", {"gate": "G3", "version": 3, "changes": ["a", "b"]}, target="G3 spec v3"
        ),
        "alice proposed G3 spec v3 (2 fields changed from the version in force)",
    ),
    (
        facts(
            "spec.sign",
            {"party": "customer", "version": 3, "key": None, "in_force": False},
            target="G3 spec v3",
        ),
        "alice signed G3 spec v3 for the customer",
    ),
    (
        facts(
            "spec.sign",
            {
                "party": "vendor",
                "version": 3,
                "key": "SHA256:k",
                "in_force": True,
                "acknowledged_power": True,
            },
        ),
        "alice signed spec v3 for the vendor with key SHA256:k, acknowledging it is"
        " underpowered (now in force)",
    ),
    (
        facts(
            "inventory.propose",
            {"run": 5, "reason": "driver update", "changes": {"driver": "560"}},
            run="G2 run #1",
        ),
        "alice proposed an amendment of the accepted inventory from G2 run #1:"
        " “driver update” (1 field changed)",
    ),
    (
        facts("inventory.sign", {"party": "vendor", "in_force": True}),
        "alice signed the inventory amendment for the vendor (now in force)",
    ),
    (
        facts("party_key.register", {"fingerprint": "SHA256:abc"}),
        "alice registered the signing key SHA256:abc",
    ),
    (
        facts(
            "run.create",
            {
                "gate": "G3",
                "attempt": 2,
                "host": "gpu-1",
                "spec_version": 3,
                "rehearsal": False,
                "source": "remote",
            },
            target="G3 run #2",
        ),
        "alice started G3 run #2 on host “gpu-1” (spec v3, attempt 2)",
    ),
    (
        facts(
            "run.create",
            {"attempt": 1, "host": None, "spec_version": 1, "rehearsal": True, "source": "upload"},
            target="G1 run #1",
        ),
        "alice opened G1 run #1 for uploaded results (spec v1, attempt 1), a rehearsal",
    ),
    (
        facts(
            "run.cancel",
            {"state_before": "running", "reason": "host rebooted", "attempt_spent": True},
            actor="bob",
            target="G3 run #41",
        ),
        "bob canceled G3 run #41: “host rebooted” (the attempt is spent)",
    ),
    (
        facts(
            "run.cancel",
            {"reason": "wrong host picked", "attempt_spent": False},
            target_type="Run",
            target_id="9",
        ),
        "alice canceled run #9: “wrong host picked” (the attempt is not spent)",
    ),
    (
        facts(
            "run.cancel", {"reason": "too late now", "ignored": "already ended"}, target="G2 run #3"
        ),
        "alice asked to cancel G2 run #3, which had ended or was being canceled: “too late now”",
    ),
    (
        facts(
            "run.fail",
            {"outcome": "infra_error", "reason": "ssh: timed out"},
            actor="the worker",
            target="G3 run #2",
        ),
        "the worker ended G3 run #2 with infra error: “ssh: timed out”",
    ),
    (
        facts(
            "run.upload",
            {"step": "bench-1", "files": {"result": "ab", "log": "cd"}},
            target="G3 run #4",
        ),
        "alice uploaded the step “bench-1” to G3 run #4 (2 files: log, result)",
    ),
    (
        facts("run.decide", {"verdict": "fail"}, target="G3 run #4"),
        "alice had G3 run #4 decided from its uploads: fail",
    ),
    (
        facts("soak.stop", {"reason": "no reason given"}, target="G4 run #1"),
        "alice stopped the soak of G4 run #1 early: “no reason given”",
    ),
    (
        facts("soak.extend", {"hours": 24, "extended_h": 48}, target="G4 run #1"),
        "alice extended the soak of G4 run #1 by 24 h (48 h in all)",
    ),
    (
        facts("host.create", {"name": "gpu-1", "address": "10.0.0.5", "fingerprint": "SHA256:h"}),
        "alice added host “gpu-1” at 10.0.0.5 (host key SHA256:h)",
    ),
    (
        facts("host.update", {"changed": ["address", "private_key"]}, target="host “gpu-1”"),
        "alice changed host “gpu-1”: address, private key",
    ),
    (
        facts(
            "host.change",
            {"fingerprint": "SHA256:h", "credential_replaced": True},
            target="host “gpu-1”",
        ),
        "alice changed host “gpu-1” in the admin, replacing its credential",
    ),
    (
        facts(
            "host.key_pin",
            {"previous": "SHA256:old", "fingerprint": "SHA256:new"},
            target="host “gpu-1”",
        ),
        "alice pinned a new host key for host “gpu-1”: SHA256:old → SHA256:new",
    ),
    (
        facts("host.check", {"ok": True, "failed": []}, target="host “gpu-1”"),
        "alice tested the connection to host “gpu-1”: every check passed",
    ),
    (
        facts("host.check", {"ok": False, "failed": ["ssh", "vllm"]}, target="host “gpu-1”"),
        "alice tested the connection to host “gpu-1”: it failed (ssh, vllm)",
    ),
    (
        facts("credentials.rotate", {"rotated": 3}, actor="the key rotation command"),
        "the key rotation command re-encrypted 3 stored credentials with the newest key",
    ),
    (
        facts("token.create", {"name": "ci", "scopes": ["read", "run"], "prefix": "tg_ab12"}),
        "alice created the API token “ci” (tg_ab12…) with the scopes read, run",
    ),
    (facts("token.revoke", {"prefix": "tg_ab12"}), "alice revoked the API token tg_ab12…"),
    (
        facts(
            "token.failures_limited",
            {"failures": 10, "ip": "192.0.2.7"},
            actor="someone not signed in",
        ),
        "API token failures from 192.0.2.7 reached the limit (10): later attempts"
        " from there are refused",
    ),
    (
        facts(
            "login.locked_out",
            {"username": "mallory", "ip": "192.0.2.8"},
            actor="the sign-in guard",
        ),
        "Sign-in as “mallory” was locked out after repeated failures from 192.0.2.8",
    ),
    (
        facts(
            "alert.ack",
            {"event": "gate_failed", "subject": "[Tollgate] G3 failed", "via": "ack-link"},
        ),
        "alice acknowledged the alert “[Tollgate] G3 failed” through the link in the message",
    ),
    (
        facts(
            "alerts.configure",
            {
                "disabled_events": ["run_started"],
                "extra_emails": [],
                "escalation_emails": ["a@x", "b@x"],
            },
        ),
        "alice changed the engagement's alert settings (1 event switched off, 0"
        " extra addresses, 2 escalation addresses)",
    ),
    (
        facts("webhook.create", {"url": "https://hooks.example/x", "format": "slack"}),
        "alice added a slack webhook to https://hooks.example/x",
    ),
    (
        facts(
            "trace.upload",
            {"sha256": "0123456789abcdef" * 4, "format": "mooncake", "requests": 1024},
        ),
        "alice uploaded a mooncake trace of 1,024 requests (SHA-256 0123456789ab…)",
    ),
    (
        facts(
            "evidence.cosign",
            {"decision": 7, "party": "customer", "fingerprint": "SHA256:c"},
            target="G3",
        ),
        "alice co-signed the evidence of decision #7 of G3 for the customer with key SHA256:c",
    ),
    (
        facts(
            "library.propose",
            {"publication": "g3-offload", "party": "vendor", "terms": {}},
            target="G3",
        ),
        "alice proposed publishing the report “g3-offload” of G3 in the evidence"
        " library for the vendor",
    ),
    (
        facts("library.approve", {"publication": "g3-offload", "party": "customer"}, target="G3"),
        "alice approved publishing the report “g3-offload” of G3 in the evidence"
        " library for the customer",
    ),
    (
        facts("library.withdraw", {"publication": "g3-offload", "party": "customer"}, target="G3"),
        "alice withdrew the report “g3-offload” of G3 from the evidence library for the customer",
    ),
    (
        facts("library.claim", {"claim": "fast-ttft", "publications": ["g3-offload"]}),
        "alice made the claim “fast-ttft”, citing g3-offload",
    ),
]


@pytest.mark.parametrize(("event", "sentence"), EXAMPLES, ids=lambda v: getattr(v, "action", ""))
def test_a_real_detail_reads_as_a_sentence(event, sentence):
    assert audit_sentence(event) == sentence


def test_the_examples_cover_every_written_action():
    assert {event.action for event, _ in EXAMPLES} == set(written_actions())


@pytest.mark.parametrize("action", sorted(SENTENCES))
def test_no_action_reads_as_the_generic_sentence_even_with_an_empty_detail(action):
    event = facts(action, {}, target_type="Gate", target_id="3")
    assert audit_sentence(event) != generic_sentence(event)


def test_a_long_reason_is_cut_and_a_value_is_quoted_as_given():
    sentence = audit_sentence(facts("gate.waive", {"justification": "x" * 500}, target="G2"))
    assert sentence.endswith("x" * 200 + "…”") and "x" * 201 not in sentence
    said = audit_sentence(facts("soak.stop", {"reason": '<script>alert("hi")</script>'}))
    assert said.endswith('“<script>alert("hi")</script>”')  # escaping is the template's work


def test_an_unknown_action_reads_generically_naming_its_target():
    event = facts(
        "soak.pause", {"minutes": 5}, target_type="Run", target_id="41", target="G4 run #1"
    )
    assert audit_sentence(event) == "alice recorded “soak pause” on G4 run #1"
    bare = facts("thing.happen", {"a": 1}, target_type="GateSpec", target_id="9")
    assert audit_sentence(bare) == "alice recorded “thing happen” on spec #9"


def test_a_detail_of_a_shape_no_service_wrote_falls_back_to_the_generic_sentence():
    odd = facts("alerts.configure", {"disabled_events": 3}, target_type="Engagement", target_id="1")
    assert audit_sentence(odd) == "alice recorded “alerts configure” on engagement #1"


@pytest.mark.parametrize(
    ("username", "label", "words"),
    [
        ("alice", "api-token:tg_1", "alice"),
        ("", "api-token:tg_1", "API token tg_1"),
        ("", "decision-engine", "the system"),
        ("", "worker", "the worker"),
        ("", "web", "someone not signed in"),
        ("", "", "someone"),
        ("", "a-new-job", "a-new-job"),
    ],
)
def test_the_actor_reads_as_a_person_or_what_acted(username, label, words):
    assert actor_words(username, label) == words


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "run",
        "verdict",
        "reason",
        "changes",
        "files",
        "after",
        "scopes",
        "changed",
        "failed",
        "party",
        "hours",
        "extended_h",
        "requests",
        "publications",
        "disabled_events",
        "title",
        "key",
    ]
)


@given(
    action=st.sampled_from([*sorted(SENTENCES), "new.action"]),
    detail=st.dictionaries(KEYS | st.text(max_size=8), JSON, max_size=6),
)
def test_any_stored_detail_reads_as_a_sentence_never_a_crash_or_the_json(action, detail):
    sentence = audit_sentence(facts(action, detail, target_type="Run", target_id="1"))
    assert isinstance(sentence, str) and sentence.strip()
    assert sentence != json.dumps(detail, sort_keys=True)
