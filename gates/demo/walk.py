"""Walks the demo engagements through G1-G4 for real (a running worker drives simhost; G4 is a
compressed soak, labelled so), and checks the pages and the API. Each step reports what
happened; nothing is faked."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.test import Client
from django.utils.html import escape

from gates import selectors, services
from gates.demo.interleave import interleave
from gates.demo.world import BAND_NOTE, demo_host, demo_plan
from gates.evidence import bundle_for_decision
from gates.evidence.statement import load_public_key
from gates.evidence.verify import verify_bundle
from gates.models import Alert, Engagement, EvidenceSeal, Gate, Run, Verdict, WorkloadTrace
from gates.tenancy import viewer_for_user

# A run's wait is as long as the slowest demo run on a busy 2-core box with the engagements
# walked side by side: three engagements' runs and their simhosts share the CPUs, so one run
# takes longer than it did alone (600 s was hit when the walk was one run after another
# under load; side by side the same run waits on its neighbours' CPU too).
RUN_TIMEOUT_S = 1200
POLL_S = 0.5
ALERT_TIMEOUT_S = 60
# The demo's worker predicts a G3 run's band beside the run (seconds at the demo's workloads).
PREDICTION_TIMEOUT_S = 180
# The worker characterises the demo's trace in seconds.
TRACE_TIMEOUT_S = 120


@dataclass
class DemoStep:
    name: str
    ok: bool
    detail: str


# A walk's part that waits on the worker: it yields at each poll (gates/demo/interleave.py).
Waiting = Generator[None, None, list[DemoStep]]


def walk_demo(
    engagements: list[Engagement],
    *,
    password: str,
    say: Callable[[str], None] = print,
    width: int | None = None,
) -> list[DemoStep]:
    """The pages, every engagement's walk and the alerts. The engagements are walked side by
    side (`width` of them at a time when given; 1 walks them one after another); the summary
    keeps their order whatever order their steps ended in."""
    steps = check_pages(engagements, password)
    walks = [walk_one(engagement, password, say) for engagement in engagements]
    for own in interleave(walks, sleep=time.sleep, poll_s=POLL_S, width=width):
        steps += own
    return steps + check_alerts(engagements, password)


def walk_one(engagement: Engagement, password: str, say: Callable[[str], None]) -> Waiting:
    """One engagement: its trace, its gates in order, its outcome, replays and band."""
    steps = []
    trace = demo_plan(engagement).trace
    if trace:  # what the customer sees before any GPU is booked
        steps.append((yield from check_trace(engagement, password)))
    steps += yield from walk_engagement(engagement, say)
    steps.append(check_outcome(engagement))
    steps += check_replays(engagement) if trace else []
    steps += yield from check_band(engagement)
    return steps


def check_outcome(engagement: Engagement) -> DemoStep:
    """Did the engagement show what it was built to show (its G3 verdict)? An inconclusive G3
    on a busy machine is a miss, not a success: `demo --once` then exits non-zero."""
    expected = demo_plan(engagement).expected_g3
    verdict = engagement.gates.get(kind="G3").verdict
    return DemoStep(
        f"{engagement.title} outcome",
        verdict == expected,
        f"G3 {verdict}, built to show {expected}",
    )


def check_trace(engagement: Engagement, password: str) -> Generator[None, None, DemoStep]:
    """The customer's uploaded trace, characterised by the worker: its page shows the hit-ratio
    curve and the planner's advice from the engagement's KV plan, and the API the same."""
    name = f"{engagement.title} trace"
    trace = engagement.traces.defer("content").first()
    if trace is None:
        return DemoStep(name, False, "no trace uploaded")
    deadline = time.monotonic() + TRACE_TIMEOUT_S
    while trace.state == WorkloadTrace.State.CHARACTERIZING and time.monotonic() < deadline:
        yield  # polling for the worker's characterisation, with a deadline
        trace.refresh_from_db()
    if trace.state != WorkloadTrace.State.READY:
        return DemoStep(name, False, f"{trace.state} after {TRACE_TIMEOUT_S} s: {trace.error}")
    client = Client(HTTP_HOST="127.0.0.1")
    # The vendor's login (the walk's password): it sees the customer's engagement and trace.
    client.login(request=HttpRequest(), username="vendor", password=password)
    engagement_page = client.get(f"/engagements/{engagement.pk}/", secure=True)
    page = client.get(f"/traces/{trace.pk}/", secure=True).content.decode()
    api = client.get(f"/api/v1/traces/{trace.pk}/", secure=True)
    prediction = (api.json() if api.status_code == 200 else {}).get("prediction") or {}
    shown = trace.sha256 in engagement_page.content.decode() and all(
        marker in page for marker in ('id="hit-curve"', 'data-field="recommendation"')
    )
    share = prediction.get("offload_share") or [0.0, 0.0]
    detail = (
        f"sha256 {trace.sha256[:16]}, {trace.requests} requests, infinite-cache hit ratio "
        f"{trace.profile['infinite_cache_hit_ratio']:.1%}; planner: "
        f"{prediction.get('recommendation', 'no advice')} (offload tiers serve "
        f"{share[0]:.1%} to {share[1]:.1%} of input tokens)"
    )
    ok = shown and prediction.get("recommendation") == "offload_worth_testing"
    return DemoStep(name, ok, detail if shown else f"not shown on its pages: {detail}")


def check_replays(engagement: Engagement) -> list[DemoStep]:
    """Each decided replay gate's fidelity: every cell sent the trace as planned, the same bytes
    on every arm; G2's advisory row puts its hit rate against the planner's band."""
    steps = []
    for kind in ("G2", "G3"):
        decision = engagement.gates.get(kind=kind).decisions.first()
        fidelity = (decision.result.get("replay_fidelity") if decision else None) or {}
        cells = fidelity.get("cells") or []
        ok = bool(cells) and not fidelity.get("reasons") and len(fidelity.get("digests", [])) == 1
        detail = f"{len(cells)} cells faithful, one replay digest"
        if not ok:
            detail = "; ".join(fidelity.get("reasons") or []) or f"{len(cells)} replayed cells"
        rows = decision.clauses if decision else []
        band = [row for row in rows if row.get("check") == "replay_band"]
        if band:
            detail += f"; replay_band {band[0]['verdict']}: {band[0]['cause'][:200]}"
        elif kind == "G2":
            ok, detail = False, f"{detail}; no replay_band row"
        steps.append(DemoStep(f"{engagement.title} {kind} replay fidelity", ok, detail))
    return steps


def check_band(engagement: Engagement) -> Waiting:
    """Per tier of the latest decided G3 run: the TTFT change the planner predicted (simhost's
    own performance model) beside what the run measured, as the run page shows them. A
    measurement outside its band fails the engagement built to show agreement; elsewhere it is
    a note (BAND_NOTE). Nothing when no G3 run was decided (the outcome step says why)."""
    plan = demo_plan(engagement)
    run = (
        Run.objects.filter(gate__engagement=engagement, gate__kind="G3", decisions__isnull=False)
        .order_by("-pk")
        .first()
    )
    if run is None:
        return []
    deadline = time.monotonic() + PREDICTION_TIMEOUT_S
    while run.predicted_ttft is None and time.monotonic() < deadline:
        yield  # polling for the worker's prediction, with a deadline
        run.refresh_from_db()
    pending = f"not predicted after {PREDICTION_TIMEOUT_S} s: is a worker running?"
    shown = selectors.run_predicted_ttft(run) or {}
    if run.predicted_ttft is None:
        shown = {"state": "pending", "reason": pending}
    return band_steps(engagement.title, plan.band_decisive, shown)


def band_steps(title: str, decisive: bool, shown: dict) -> list[DemoStep]:
    """Steps from what the run page shows (selectors.run_predicted_ttft): one per tier, a
    measurement outside its band failing only where the band is `decisive`."""
    name = f"{title} G3 band"
    if shown.get("state") != "predicted":
        return [DemoStep(name, not decisive, f"no band: {shown.get('reason') or 'none'}")]
    steps = []
    for row in shown["tiers"]:
        detail = f"predicted {row['band_text']}, measured {row['measured_text'] or '?'}"
        if row["inside"]:
            steps.append(DemoStep(f"{name} c={row['concurrency']}", True, f"{detail} (inside)"))
            continue
        outside = "not measured" if row["inside"] is None else "outside"
        if not decisive:
            outside += f": {BAND_NOTE}"
        steps.append(
            DemoStep(f"{name} c={row['concurrency']}", not decisive, f"{detail} ({outside})")
        )
    return steps


def check_alerts(engagements: list[Engagement], password: str) -> list[DemoStep]:
    """The failing engagement's alerts: delivered by the worker (to the console backend on the
    embedded defaults) and listed on its engagement page."""
    client = Client(HTTP_HOST="127.0.0.1")
    client.login(request=HttpRequest(), username="vendor", password=password)
    steps = []
    for engagement in engagements:
        alerts = Alert.objects.filter(engagement=engagement, parent__isnull=True)
        if not alerts.exists():
            continue
        deadline = time.monotonic() + ALERT_TIMEOUT_S
        while alerts.filter(delivered_at__isnull=True).exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)  # polling for the worker's delivery, with a deadline
        page = client.get(f"/engagements/{engagement.pk}/", secure=True).content.decode()
        waiting = alerts.filter(delivered_at__isnull=True).count()
        listed = all(escape(a.subject) in page for a in alerts.filter(acked_at__isnull=True))
        steps.append(
            DemoStep(
                f"{engagement.title} alerts",
                waiting == 0 and listed,
                f"{alerts.count()} sent ({', '.join(sorted(set(a.event for a in alerts)))})"
                if waiting == 0
                else f"{waiting} not delivered after {ALERT_TIMEOUT_S} s: is a worker running?",
            )
        )
    return steps


def check_pages(engagements: list[Engagement], password: str) -> list[DemoStep]:
    client = Client(HTTP_HOST="127.0.0.1")
    # django-axes counts failed logins per request: authenticate() needs one.
    logged_in = client.login(request=HttpRequest(), username="vendor", password=password)
    page = client.get("/", secure=True)
    shown = all(escape(e.title) in page.content.decode() for e in engagements)
    api = client.get("/api/v1/engagements/", secure=True)
    gate = engagements[0].gates.get(kind="G1")
    gate_page = client.get(f"/gates/{gate.pk}/", secure=True).content.decode()
    signed = "in force: signed by both" in gate_page and "Customer: signed by customer" in gate_page
    return [
        DemoStep("vendor login", logged_in, "session created" if logged_in else "refused"),
        DemoStep(
            "engagement list page",
            page.status_code == 200 and shown,
            f"HTTP {page.status_code}, demo engagements {'' if shown else 'not '}shown",
        ),
        DemoStep("REST API", api.status_code == 200, f"HTTP {api.status_code}"),
        DemoStep(
            "signed specs",
            signed,
            "G1 spec in force, both signatures shown" if signed else "signatures not shown",
        ),
    ]


def walk_engagement(engagement: Engagement, say: Callable[[str], None]) -> Waiting:
    """Its gates in order (G1-G4 or fewer), each for real; stop at the first that does not pass."""
    steps = []
    for kind in demo_plan(engagement).gates:
        gate = engagement.gates.get(kind=kind)
        if gate.verdict == Verdict.PASS:
            steps.append(DemoStep(f"{engagement.title} {kind}", True, "passed earlier"))
            continue
        if not gate.can_move_to(Gate.State.RUNNING) or gate.state == Gate.State.RUNNING:
            steps.append(DemoStep(f"{engagement.title} {kind}", True, f"{gate.state}, skipped"))
            break
        run = _start(gate, engagement)
        say(f"  {engagement.title}: {kind} run #{run.attempt} started")
        run = yield from _wait(run, say, label=f"{engagement.title} {kind}")
        steps.append(_report(engagement, kind, run))
        if run.decisions.exists():
            steps.append(check_evidence(engagement, kind, run))
        if Gate.objects.get(pk=gate.pk).verdict != Verdict.PASS:
            break
    return steps


def _start(gate: Gate, engagement: Engagement) -> Run:
    vendor = get_user_model().objects.get(username="vendor")
    return services.run_create(
        actor=services.Actor(user=vendor, label="demo"),
        viewer=viewer_for_user(vendor),
        gate=gate,
        host=demo_host(engagement),
    )


def _wait(run: Run, say: Callable[[str], None], *, label: str) -> Generator[None, None, Run]:
    deadline, shown = time.monotonic() + RUN_TIMEOUT_S, -1
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_ended:
            return run
        if run.progress_done != shown:
            shown = run.progress_done
            # side by side, the engagements' progress lines mix: each names its own
            say(f"    {label}: {run.progress_done}/{run.progress_total} steps")
        yield  # polling the database for a worker's progress, with a deadline
    return run


def _report(engagement: Engagement, kind: str, run: Run) -> DemoStep:
    name = f"{engagement.title} {kind}"
    if not run.is_ended:
        return DemoStep(
            name, False, f"still {run.state} after {RUN_TIMEOUT_S} s: is a worker running?"
        )
    if run.outcome != Run.Outcome.COMPLETED:
        return DemoStep(name, False, f"{run.outcome}: {run.reason[:300]}")
    decision = run.decisions.first()
    label = " (compressed soak)" if decision.result.get("soak", {}).get("compressed") else ""
    return DemoStep(name, True, f"{decision.verdict}{label}: {summarize(decision.result)}")


def check_evidence(engagement: Engagement, kind: str, run: Run) -> DemoStep:
    """The decision's signed bundle, built (sealed) now and checked by the offline verifier."""
    decision = run.decisions.first()
    data, digest = bundle_for_decision(decision)
    key = EvidenceSeal.objects.select_related("key").get(decision=decision).key
    report = verify_bundle(data, public_key=load_public_key(key.public_pem))
    detail = f"{len(data)} bytes, sha256 {digest[:16]}, signed by {key.fingerprint}, verified"
    if not report.ok:
        detail = f"does NOT verify: {'; '.join(report.problems[:3])}"
    return DemoStep(f"{engagement.title} {kind} evidence", report.ok, detail)


def summarize(result: dict) -> str:
    """One line a person can read: the verdict's reasons or its headline numbers."""
    cells = [c for c in result.get("clauses", []) if "estimate" in c]
    if cells:
        return "; ".join(
            f"{c['metric']} {c['compare']} c={c['tier']}: {_number(c['estimate'])} "
            f"[{_number(c['low'])}, {_number(c['high'])}] vs {c['threshold']:g} {c['verdict']}"
            for c in cells
        )
    rows = [f"{row['check']} {row['verdict']}" for row in result.get("clauses", [])]
    return "; ".join(result.get("reasons", []) or rows)[:400]


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"
