"""An audit event as one plain English sentence: "alice signed G3 spec v3 for the customer".
Pure: the event's stored fields and the labels the page looked up, a sentence out; no Django.
Every action the code writes has its own sentence (tests/gates/pages/audit/test_words.py
collects them from the source); an unknown one, or a detail of an older shape, reads generically.
"""

from __future__ import annotations

from collections.abc import Mapping

from gates import figures
from gates.pages.audit.words import (
    AuditFacts,
    Detail,
    Writer,
    generic_sentence,
    listed,
    plural,
    quoted,
    target_of,
    verdict,
)


def audit_sentence(facts: AuditFacts) -> str:
    write = SENTENCES.get(facts.action)
    if write is None or not isinstance(facts.detail, Mapping):
        return generic_sentence(facts)
    try:
        return write(facts, Detail(facts.detail))
    except (TypeError, ValueError, AttributeError):  # a detail of a shape this code never wrote
        return generic_sentence(facts)


def _party(d: Detail) -> str:
    return f" for the {d['party']}" if d["party"] else ""


def _key(d: Detail, name: str = "key") -> str:
    return f" with key {d[name]}" if d[name] else ""


def _spec(f: AuditFacts, d: Detail) -> str:
    if f.target:
        return f.target
    gate = f"{d['gate']} " if d["gate"] else ""
    return f"{gate}spec v{d['version']}" if d["version"] else target_of(f)


def _run(f: AuditFacts, d: Detail) -> str:
    """The run a gate event's detail names: its label, else its id."""
    return f.run or (f"run #{d['run']}" if d["run"] is not None else "a run")


def _gate(f: AuditFacts, d: Detail) -> str:
    return f.target or d.text("gate") or target_of(f)


# Engagements, gates, stop-loss.
def _engagement_create(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} created the engagement {quoted(d.text('title', '(untitled)'))}"


def _engagement_stop(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} stopped the engagement at {_gate(f, d)}: {quoted(d.text('justification'))}"


def _gate_waive(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} waived {_gate(f, d)}: {quoted(d.text('justification'))}"


def _gate_decide(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} decided {_run(f, d)}: {verdict(d['verdict'])}"


def _gate_rehearse(f: AuditFacts, d: Detail) -> str:
    return (
        f"{f.actor} decided {_run(f, d)} as a rehearsal: {verdict(d['verdict'])} "
        "(it does not count)"
    )


def _kv_plan_save(f: AuditFacts, d: Detail) -> str:
    after = d["after"] if isinstance(d["after"], Mapping) else {}
    model, terms = after.get("model"), []
    if isinstance(model, str):
        terms.append(f"model {quoted(model)}")
    elif model:
        terms.append("a model given by its fields")
    elif after.get("config"):
        terms.append("a pasted config.json")
    if after.get("gpus") is not None:
        terms.append(plural(after["gpus"], "GPU"))
    said = f" ({', '.join(terms)})" if terms else ""
    return f"{f.actor} saved the KV planner's inputs to the engagement{said}"


def _gate_reset_sign(f: AuditFacts, d: Detail) -> str:
    state = "now in effect" if d["effective"] else "awaiting the other party"
    return (
        f"{f.actor} signed the stop-loss reset of {_gate(f, d)}{_party(d)}: "
        f"{quoted(d.text('reason'))} ({state})"
    )


# Specs and the accepted inventory.
def _spec_update(f: AuditFacts, d: Detail) -> str:
    changes = d["changes"] if isinstance(d["changes"], list) else []
    said = f" ({plural(len(changes), 'field')} changed from the version in force)"
    return f"{f.actor} proposed {_spec(f, d)}{said if changes else ''}"


def _spec_sign(f: AuditFacts, d: Detail) -> str:
    sentence = f"{f.actor} signed {_spec(f, d)}{_party(d)}{_key(d)}"
    if d["acknowledged_power"]:
        sentence += ", acknowledging it is underpowered"
    return sentence + (" (now in force)" if d["in_force"] else "")


def _inventory_propose(f: AuditFacts, d: Detail) -> str:
    changes = d["changes"] if isinstance(d["changes"], Mapping | list) else {}
    fields = f" ({plural(len(changes), 'field')} changed)" if changes else ""
    source = f" from {_run(f, d)}" if d["run"] is not None else ""
    reason = f": {quoted(d.text('reason'))}" if d["reason"] else ""
    return f"{f.actor} proposed an amendment of the accepted inventory{source}{reason}{fields}"


def _inventory_sign(f: AuditFacts, d: Detail) -> str:
    state = " (now in force)" if d["in_force"] else ""
    return f"{f.actor} signed the inventory amendment{_party(d)}{_key(d)}{state}"


def _party_key_register(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} registered the signing key {d.text('fingerprint', '(no fingerprint)')}"


# Runs and soaks.
def _run_create(f: AuditFacts, d: Detail) -> str:
    run = target_of(f)
    if d["source"] == "upload":
        sentence = f"{f.actor} opened {run} for uploaded results"
    else:
        sentence = f"{f.actor} started {run}" + (
            f" on host {quoted(d['host'])}" if d["host"] else ""
        )
    terms = [f"spec v{d['spec_version']}"] if d["spec_version"] is not None else []
    terms += [f"attempt {d['attempt']}"] if d["attempt"] is not None else []
    sentence += f" ({', '.join(terms)})" if terms else ""
    return sentence + (", a rehearsal" if d["rehearsal"] else "")


def _run_cancel(f: AuditFacts, d: Detail) -> str:
    run, reason = target_of(f), quoted(d.text("reason"))
    if d["ignored"]:
        return f"{f.actor} asked to cancel {run}, which had ended or was being canceled: {reason}"
    spent = {True: " (the attempt is spent)", False: " (the attempt is not spent)"}
    return f"{f.actor} canceled {run}: {reason}{spent.get(d['attempt_spent'], '')}"


def _run_fail(f: AuditFacts, d: Detail) -> str:
    outcome = d.text("outcome", "an error").replace("_", " ")
    return f"{f.actor} ended {target_of(f)} with {outcome}: {quoted(d.text('reason'))}"


def _run_upload(f: AuditFacts, d: Detail) -> str:
    files = d["files"] if isinstance(d["files"], Mapping) else {}
    listing = f" ({plural(len(files), 'file')}: {listed(sorted(files))})" if files else ""
    return f"{f.actor} uploaded the step {quoted(d.text('step'))} to {target_of(f)}{listing}"


def _run_decide(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} had {target_of(f)} decided from its uploads: {verdict(d['verdict'])}"


def _soak_stop(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} stopped the soak of {target_of(f)} early: {quoted(d.text('reason'))}"


def _soak_extend(f: AuditFacts, d: Detail) -> str:
    total = f" ({figures.number(d['extended_h'], 'h')} in all)" if d["extended_h"] else ""
    return (
        f"{f.actor} extended the soak of {target_of(f)} by {figures.number(d['hours'], 'h')}{total}"
    )


# Hosts and credentials.
def _host(f: AuditFacts, d: Detail) -> str:
    return f.target or (f"host {quoted(d['name'])}" if d["name"] else target_of(f))


def _host_create(f: AuditFacts, d: Detail) -> str:
    at = f" at {d['address']}" if d["address"] else ""
    key = f" (host key {d['fingerprint']})" if d["fingerprint"] else ""
    return f"{f.actor} added {_host(f, d)}{at}{key}"


def _host_update(f: AuditFacts, d: Detail) -> str:
    changed = [str(name).replace("_", " ") for name in d["changed"] or []]
    return f"{f.actor} changed {_host(f, d)}" + (f": {listed(changed)}" if changed else "")


def _host_change(f: AuditFacts, d: Detail) -> str:
    replaced = ", replacing its credential" if d["credential_replaced"] else ""
    return f"{f.actor} changed {_host(f, d)} in the admin{replaced}"


def _host_key_pin(f: AuditFacts, d: Detail) -> str:
    before = d.text("previous", "none")
    return f"{f.actor} pinned a new host key for {_host(f, d)}: {before} → {d.text('fingerprint')}"


def _host_check(f: AuditFacts, d: Detail) -> str:
    if d["ok"]:
        return f"{f.actor} tested the connection to {_host(f, d)}: every check passed"
    failed = f" ({listed(d['failed'])})" if d["failed"] else ""
    return f"{f.actor} tested the connection to {_host(f, d)}: it failed{failed}"


def _credentials_rotate(f: AuditFacts, d: Detail) -> str:
    count = plural(d["rotated"] or 0, "stored credential")
    return f"{f.actor} re-encrypted {count} with the newest key"


# Tokens, sign-in, alerts.
def _token_create(f: AuditFacts, d: Detail) -> str:
    scopes = f" with the scopes {listed(d['scopes'])}" if d["scopes"] else ""
    return f"{f.actor} created the API token {quoted(d.text('name'))} ({d.text('prefix')}…){scopes}"


def _token_revoke(f: AuditFacts, d: Detail) -> str:
    return f"{f.actor} revoked the API token {d.text('prefix', target_of(f))}…"


def _token_failures_limited(f: AuditFacts, d: Detail) -> str:
    return (
        f"API token failures from {d.text('ip', 'an unknown address')} reached the limit "
        f"({d.text('failures', '?')}): later attempts from there are refused"
    )


def _login_locked_out(f: AuditFacts, d: Detail) -> str:
    return (
        f"Sign-in as {quoted(d.text('username'))} was locked out after repeated failures "
        f"from {d.text('ip', 'an unknown address')}"
    )


def _alert_ack(f: AuditFacts, d: Detail) -> str:
    via = " through the link in the message" if d["via"] == "ack-link" else ""
    return f"{f.actor} acknowledged the alert {quoted(d.text('subject', d.text('event')))}{via}"


def _alerts_configure(f: AuditFacts, d: Detail) -> str:
    counts = [
        plural(len(d["disabled_events"] or []), "event") + " switched off",
        plural(len(d["extra_emails"] or []), "extra address", "extra addresses"),
        plural(len(d["escalation_emails"] or []), "escalation address", "escalation addresses"),
    ]
    return f"{f.actor} changed the engagement's alert settings ({', '.join(counts)})"


def _webhook_create(f: AuditFacts, d: Detail) -> str:
    kind = f"{d['format']} " if d["format"] else ""
    return f"{f.actor} added a {kind}webhook to {d.text('url', '(no address)')}"


# Traces, evidence and the library.
def _trace_upload(f: AuditFacts, d: Detail) -> str:
    size = f" of {plural(d['requests'], 'request')}" if d["requests"] is not None else ""
    digest = d.text("sha256")
    return (
        f"{f.actor} uploaded a {d.text('format', 'workload')} trace{size} (SHA-256 {digest[:12]}…)"
    )


def _evidence_cosign(f: AuditFacts, d: Detail) -> str:
    return (
        f"{f.actor} co-signed the evidence of decision #{d.text('decision', '?')} of "
        f"{_gate(f, d)}{_party(d)}{_key(d, 'fingerprint')}"
    )


def _library(verb: str) -> Writer:
    def write(f: AuditFacts, d: Detail) -> str:
        report = f"the report {quoted(d.text('publication'))} of {_gate(f, d)}"
        return f"{f.actor} {verb.format(report=report)}{_party(d)}"

    return write


def _library_claim(f: AuditFacts, d: Detail) -> str:
    cited = d["publications"] if isinstance(d["publications"], list) else []
    return (
        f"{f.actor} made the claim {quoted(d.text('claim'))}, citing {listed(cited) or 'no report'}"
    )


SENTENCES: dict[str, Writer] = {
    "engagement.create": _engagement_create,
    "engagement.stop": _engagement_stop,
    "engagement.kv_plan_save": _kv_plan_save,
    "gate.waive": _gate_waive,
    "gate.decide": _gate_decide,
    "gate.rehearse": _gate_rehearse,
    "gate.reset.sign": _gate_reset_sign,
    "spec.update": _spec_update,
    "spec.sign": _spec_sign,
    "inventory.propose": _inventory_propose,
    "inventory.sign": _inventory_sign,
    "party_key.register": _party_key_register,
    "run.create": _run_create,
    "run.cancel": _run_cancel,
    "run.fail": _run_fail,
    "run.upload": _run_upload,
    "run.decide": _run_decide,
    "soak.stop": _soak_stop,
    "soak.extend": _soak_extend,
    "host.create": _host_create,
    "host.update": _host_update,
    "host.change": _host_change,
    "host.key_pin": _host_key_pin,
    "host.check": _host_check,
    "credentials.rotate": _credentials_rotate,
    "token.create": _token_create,
    "token.revoke": _token_revoke,
    "token.failures_limited": _token_failures_limited,
    "login.locked_out": _login_locked_out,
    "alert.ack": _alert_ack,
    "alerts.configure": _alerts_configure,
    "webhook.create": _webhook_create,
    "trace.upload": _trace_upload,
    "evidence.cosign": _evidence_cosign,
    "library.propose": _library("proposed publishing {report} in the evidence library"),
    "library.approve": _library("approved publishing {report} in the evidence library"),
    "library.withdraw": _library("withdrew {report} from the evidence library"),
    "library.claim": _library_claim,
}
