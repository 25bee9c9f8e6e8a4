"""The demo world: a vendor, a customer, and two engagements whose hosts are simhost (the
emulated GPU host) on this machine, with gate specs sized to simhost's scenarios.

Idempotent: running it again reuses the rows and refreshes the hosts' parameters.
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from documents.spec import G4Spec, Spec, Workload
from gates import services
from gates.demo.trace import (
    REPLAY_HOST_TIME_SCALE,
    demo_trace_upload,
    replay_the_trace,
    trace_workload,
)
from gates.models import Engagement, Gate, Host, Membership, Organization, Profile
from gates.specs import validation as specs
from gates.tenancy import viewer_for_user
from simhost.host.config import HOST_PRESETS

VENDOR = {"name": "Acme KV Tier (demo vendor)", "slug": "acme-kv", "kind": "vendor"}
CUSTOMER = {"name": "Northwind AI (demo customer)", "slug": "northwind", "kind": "customer"}
USERS = {
    "vendor": (VENDOR["slug"], Membership.Role.VENDOR_ADMIN),
    "customer": (CUSTOMER["slug"], Membership.Role.CUSTOMER_OWNER),
    "viewer": (CUSTOMER["slug"], Membership.Role.CUSTOMER_VIEWER),
}
# simhost's offload-helps scenario: 12k-token session prefixes, 32 sessions (docs/simhost.md).
COLD_RECOVERY: Workload = {
    "dataset": "cold_recovery",
    "prefix_len": 12288,
    "suffix_len": 64,
    "output_len": 80,
    "num_prompts": 64,
    "num_prefixes": 32,
    "seed": 7,
}
SHORT_CHAT: Workload = {
    "dataset": "random",
    "input_len": 256,
    "output_len": 32,
    "num_prompts": 12,
    "seed": 7,
}


@dataclass(frozen=True)
class DemoEngagement:
    title: str
    model_name: str
    platform: str
    host: str
    scenario: str
    workload: Workload
    tiers: tuple[int, ...]
    min_external_hit_rate: float
    # the G3 verdict this engagement is built to show: `demo --once` fails when it misses it
    expected_g3: str
    # Whether a G3 TTFT change measured outside its predicted band fails `demo --once` (the
    # engagement is built to show the planner and simhost agree) or is a note: see BAND_NOTE.
    band_decisive: bool
    # Titles this engagement had in an earlier demo database, renamed on the next build.
    former_titles: tuple[str, ...] = ()
    # The gates the walk takes it through, in order.
    gates: tuple[str, ...] = ("G1", "G2", "G3", "G4")
    # Its workload is the customer's own trace (gates/demo/trace.py), uploaded through the
    # trace service with the engagement's KV plan saved, and replayed by its G2 and G3.
    trace: bool = False
    # simhost's --time-scale on its host (wall seconds per model second).
    time_scale: float = 0.02


# Why the short-chat band is a note, not a check: its band is 4 points wide (the model's +1 %
# give or take RESOLUTION), and simhost's run-to-run noise (noise_cv 4 % per server, so about
# 6 % per offload/resident pair) moves the mean of 4-8 repetitions by 2-3 points of a ratio
# near 1: about half the band. Where offload helps the ratio is near 0.3, the same relative
# noise is under a point, and the band is 8-15 points wide.
BAND_NOTE = (
    "a note, not a failure: the band is the model's advice beside the verdict; live runs carry "
    "noise and a bias of a few points (tests/gates/planner/test_run_band.py holds the agreement)"
)


ENGAGEMENTS = (
    DemoEngagement(
        title="480B long-context agents (offload helps)",
        model_name="qwen3-coder-480b-sim",
        platform="simhost: 8x H100 80GB emulated, long reused prefixes, concurrency 8-16",
        host="simhost-long-context",
        scenario="offload-helps",
        workload=COLD_RECOVERY,
        tiers=(8, 16),
        min_external_hit_rate=0.2,
        expected_g3="pass",
        band_decisive=False,
    ),
    DemoEngagement(
        # The same emulated host and model as above (simhost's 480B preset, which the planner
        # predicts with): what differs is the customer's workload. llm-d measured the same on
        # Qwen3-Coder-480B: at low load offload moves TTFT by a few percent (docs/simhost.md).
        title="480B short chat (offload does not help)",
        model_name="qwen3-coder-480b-sim",
        platform="simhost: 8x H100 80GB emulated, short prompts, no reuse, concurrency 1-2",
        host="simhost-short-chat",
        scenario="offload-helps",
        # Short chat never reuses a prefix, so no hit-rate floor applies to this workload.
        workload=SHORT_CHAT,
        tiers=(1, 2),
        min_external_hit_rate=0.0,
        expected_g3="fail",
        band_decisive=False,
        # It claimed an 8B model its host did not run, so no band could be predicted for it.
        former_titles=("8B short chat (offload does not help)",),
    ),
    DemoEngagement(
        # The customer brings its own traffic: the public Mooncake trace, characterised before
        # any GPU is booked (the planner's advice on its page), then replayed byte for byte on
        # every arm. G4 is left out: the two engagements above show the soak.
        title="480B customer's own trace (Mooncake replay)",
        model_name="qwen3-coder-480b-sim",
        platform="simhost: 8x H100 80GB emulated, 65k-token KV cache, the customer's trace",
        host="simhost-trace",
        scenario="offload-helps-compact",
        workload=trace_workload("0" * 64),  # the uploaded trace's digest goes in demo_specs
        tiers=(256,),
        min_external_hit_rate=0.1,
        expected_g3="pass",
        band_decisive=False,
        gates=("G1", "G2", "G3"),
        trace=True,
        time_scale=REPLAY_HOST_TIME_SCALE,
    ),
)


def build_demo_world(*, passwords: dict[str, str]) -> list[Engagement]:
    """Organizations, users with these passwords, and the demo engagements with hosts."""
    with transaction.atomic():
        vendor = _organization(VENDOR)
        customer = _organization(CUSTOMER)
        for username, (slug, role) in USERS.items():
            organization = vendor if slug == vendor.slug else customer
            _user(username, passwords[username], organization, role)
        actor = services.Actor.system("demo")
        engagements = [_engagement(actor, customer, plan) for plan in ENGAGEMENTS]
        for engagement in engagements:
            demo_sign_specs(engagement)
        return engagements


def demo_sign_specs(engagement: Engagement) -> None:
    """Both parties sign every gate's latest spec through the same service a person uses, so
    the demo's verdicts count and its pages show who signed what and when."""
    for username in ("vendor", "customer"):
        user = get_user_model().objects.get(username=username)
        actor, viewer = services.Actor(user=user, label="demo"), viewer_for_user(user)
        for gate in engagement.gates.all():
            services.gate_spec_sign(actor=actor, viewer=viewer, spec=gate.current_spec)


def demo_plan(engagement: Engagement) -> DemoEngagement:
    return next(p for p in ENGAGEMENTS if p.title == engagement.title)


def demo_short_name(plan: DemoEngagement) -> str:
    """What `demo --engagement` takes besides the title: its host's name less "simhost-"."""
    return plan.host.removeprefix("simhost-")


def demo_plans_named(names: list[str]) -> list[DemoEngagement]:
    """The engagements these names (short names or titles) pick, in the demo's order; all of
    them when no name is given. Raises UnknownEngagementError naming the known ones."""
    known = {demo_short_name(plan): plan for plan in ENGAGEMENTS}
    known |= {plan.title: plan for plan in ENGAGEMENTS}
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = "; ".join(f"{demo_short_name(p)} ({p.title})" for p in ENGAGEMENTS)
        raise UnknownEngagementError(f"no demo engagement {', '.join(unknown)}: known {listed}")
    picked = {known[name].title for name in names}
    return [plan for plan in ENGAGEMENTS if not names or plan.title in picked]


class UnknownEngagementError(ValueError):
    pass


def demo_host_parameters(plan: DemoEngagement) -> dict:
    """Where this engagement's simhost lives and how it is configured: a folder of its own
    under var/demo, so each engagement has its own emulated host. simhost keeps its GPUs' live
    state beside the host config (simhost.host.statefile): one shared config made both hosts
    one machine, and a run on the second while the first ran found its GPUs busy (infra_error).
    """
    folder = Path(settings.VAR_DIR) / "demo" / plan.host
    folder.mkdir(parents=True, exist_ok=True)
    host_config = folder / "simhost-h100x8.json"
    host_config.write_text(json.dumps(HOST_PRESETS["h100x8-cpu512"]))
    no_faults = folder / "simhost-no-faults.json"
    no_faults.write_text("{}")
    return {
        "python": sys.executable,
        "port": _free_port(),
        "run_root": str(folder / "host-runs"),
        "sim_scenario": plan.scenario,
        # the virtual clock reports the same timings at any scale (docs/simhost.md): a short
        # one keeps the demo's many arm runs quick on a busy machine (a replay's open loop
        # takes a longer one: gates/demo/trace.py)
        "time_scale": plan.time_scale,
        "sim_host_config": str(host_config),
        "sim_fault_file": str(no_faults),
    }


def _free_port() -> int:
    # Chosen afresh each time the demo starts, so two demos (or a demo and the tests) never
    # fight over a port.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def demo_specs(plan: DemoEngagement) -> dict[str, Spec]:
    """The demo's G1-G4 specs: the templates, sized to what simhost emulates."""
    g1 = specs.default_spec("G1")
    g1["expect"]["gpu_model_pattern"] = "H100"
    g1["expect"]["free_disk_min_gib"] = 1
    g2 = specs.default_spec("G2")
    g2["equivalence"]["prompts"] = g2["equivalence"]["prompts"][:3]
    # G2 needs tier hits and an A/A spread, not the full G3 workload: half its sessions
    light = Workload(**{**COLD_RECOVERY, "num_prompts": 32, "num_prefixes": 16})
    g2["offload_hit"]["workload"] = light
    g2["offload_hit"]["tier"] = 16
    # simhost times in milliseconds on a shared machine: scheduling noise alone can move an
    # A/A pair by tens of percent, so the demo sets a wide floor (a real G2 sets ~10 %).
    # Four A/A pairs, not three: with 2 degrees of freedom t is 4.3, and one slow pair on a
    # loaded box took the interval past the floor; with four pairs (3 degrees) it is 3.2.
    noise_floor = g2["noise_floor"]
    noise_floor["workload"] = light
    noise_floor["tier"] = 16
    noise_floor["repetitions"] = 4
    noise_floor["max_noise_pct"] = 100
    g3 = specs.default_spec("G3")
    g3["workload"] = Workload(**plan.workload)
    g3["tiers"] = list(plan.tiers)
    g3["repetitions"] = {"min": 4, "max": 8}
    # The template's c=8 and c=16 throughput clauses move to this demo's lower and upper tier.
    for clause in g3["clauses"]:
        if clause["tiers"] != "all":
            clause["tiers"] = [plan.tiers[0] if clause["tiers"] == [8] else plan.tiers[-1]]
        # simhost's recompute arm is 3.8x (c=8) and 5.4x (c=16) behind offload here: its
        # physics (docs/simhost.md "Calibration") has no preemption thrash while the running
        # requests fit in VRAM, which the field's 12.6x needs and which makes medians bimodal.
        # The demo asks 2.5x, which the emulated host clears at both tiers.
        if clause["change"] == "ratio":
            clause["at_least"] = 2.5
    # The demo's walk must fit a few minutes of a small machine, so its G3 runs 4-8
    # repetitions, not the template's 8-28 that reach 80 % power at CV 4 %: it leaves out the
    # power check, and the spread and screen rules calibrated for those repetitions.
    g3["statistics"]["require_power"] = False
    g3["statistics"].pop("sd_floor_fraction", None)
    g3["statistics"].pop("spread_level", None)
    g3["statistics"]["outliers"].pop("screen_level", None)
    g3["statistics"]["outliers"].pop("step_level", None)
    g3["validity"]["min_external_hit_rate"] = plan.min_external_hit_rate
    g3["validity"]["require_kv_exceeds_vram"] = False
    if plan.trace:
        replay_the_trace(g2, g3, tier=plan.tiers[0], floor=plan.min_external_hit_rate)
    return {"G1": g1, "G2": g2, "G3": g3, "G4": demo_soak_spec()}


DEMO_SOAK_S = 30


def demo_soak_spec() -> G4Spec:
    """A COMPRESSED soak (30 s of 2 s windows, labelled so on its pages) under a cold-recovery
    load that keeps the offload tier busy. Limits a minute can judge: memory growth per hour
    extrapolated from seconds of RSS noise is meaningless at the template's 256 MiB/h, and
    scheduling noise on a shared box moves 2 s windows by tens of percent."""
    g4 = specs.default_spec("G4")
    g4["duration_h"] = DEMO_SOAK_S / 3600
    g4["window_min"] = 2 / 60
    load = Workload(**COLD_RECOVERY)
    load["num_prompts"], load["num_prefixes"], load["max_concurrency"] = 8, 4, 4
    g4["load"] = load
    limits = g4["limits"]
    limits["max_throughput_drift_pct"] = 100.0
    limits["max_ttft_p99_change_pct"] = 500.0
    limits["max_memory_growth_mib_per_h"] = 1e6
    limits["max_unobserved_pct"] = 10.0
    g4["soak"] = {"free_space_floor_gib": 0.5}
    return g4


def _organization(values: dict) -> Organization:
    organization, _ = Organization.objects.get_or_create(slug=values["slug"], defaults=values)
    return organization


def _user(username: str, password: str, organization: Organization, role: str) -> None:
    user, _ = get_user_model().objects.get_or_create(
        username=username, defaults={"email": f"{username}@demo.invalid"}
    )
    user.set_password(password)
    user.is_staff = user.is_superuser = role == Membership.Role.VENDOR_ADMIN
    user.save()
    Membership.objects.update_or_create(
        user=user, organization=organization, defaults={"role": role}
    )


def _engagement(actor, customer: Organization, plan: DemoEngagement) -> Engagement:
    Host.objects.update_or_create(
        organization=customer,
        name=plan.host,
        defaults={
            "transport": Host.Transport.LOCAL,
            "parameters": demo_host_parameters(plan),
            "profile": Profile.objects.get(name="simhost"),
            "labels": {"emulated": "simhost"},
        },
    )
    engagement = Engagement.objects.filter(organization=customer, title=plan.title).first()
    if engagement is not None:
        return engagement
    former = Engagement.objects.filter(organization=customer, title__in=plan.former_titles)
    if former.update(title=plan.title, model_name=plan.model_name):
        return Engagement.objects.get(organization=customer, title=plan.title)
    engagement = services.engagement_create(
        actor=actor,
        organization=customer,
        title=plan.title,
        model_name=plan.model_name,
        platform=plan.platform,
    )
    if plan.trace:
        demo_trace_upload(engagement)
    for kind, document in demo_specs(plan).items():
        gate = engagement.gates.get(kind=kind)
        services.gate_spec_update(actor=actor, gate=gate, document=document)
    assert engagement.gates.get(kind="G1").state == Gate.State.READY
    return engagement


def demo_host(engagement: Engagement) -> Host:
    plan = next(p for p in ENGAGEMENTS if p.title == engagement.title)
    return Host.objects.get(organization=engagement.organization, name=plan.host)
