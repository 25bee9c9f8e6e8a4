"""The demo world signs its specs as both parties through the services, so its verdicts count."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.demo.trace import KV_PLAN, demo_trace_sha256, fitting_trace
from gates.demo.walk import band_steps, check_outcome
from gates.demo.world import build_demo_world, demo_host
from gates.models import AuditEvent, SpecSignature, Verdict
from gates.planner.run_band import measured_against_predicted
from runners.traces.readers.formats import read_trace_bytes

pytestmark = pytest.mark.django_db

PASSWORDS = {"vendor": "v" * 16, "customer": "c" * 16, "viewer": "w" * 16}


def test_every_demo_spec_is_in_force_signed_by_the_demo_vendor_and_customer():
    engagements = build_demo_world(passwords=PASSWORDS)
    for engagement in engagements:
        for gate in engagement.gates.all():
            spec = gate.current_spec
            assert spec.in_force, (engagement.title, gate.kind)
            assert spec.vendor_signed_by.username == "vendor"
            assert spec.customer_signed_by.username == "customer"
    assert AuditEvent.objects.filter(action="spec.sign").count() == 2 * 4 * len(engagements)


def test_building_the_world_again_signs_nothing_twice():
    build_demo_world(passwords=PASSWORDS)
    signed = SpecSignature.objects.count()
    build_demo_world(passwords=PASSWORDS)
    assert SpecSignature.objects.count() == signed


def test_each_demo_engagement_has_an_emulated_host_of_its_own():
    """simhost keeps its GPUs' live state beside the host config: a shared config made the
    two hosts one machine, and a second run while the first ran found the GPUs busy."""
    engagements = build_demo_world(passwords=PASSWORDS)
    hosts = [demo_host(engagement) for engagement in engagements]
    assert len({host.pk for host in hosts}) == len(engagements) == 3
    for key in ("sim_host_config", "run_root", "port"):
        values = [str(host.parameters[key]) for host in hosts]
        assert len(set(values)) == len(values), key
    folders = {Path(host.parameters["sim_host_config"]).parent for host in hosts}
    assert len(folders) == len(hosts)


def test_an_engagement_that_misses_the_outcome_it_was_built_to_show_is_a_failed_step():
    helps, short_chat, _ = build_demo_world(passwords=PASSWORDS)
    # nothing decided yet: neither shows its outcome, so `demo --once` would exit non-zero
    assert not check_outcome(helps).ok and not check_outcome(short_chat).ok
    helps.gates.filter(kind="G3").update(verdict=Verdict.INCONCLUSIVE)
    short_chat.gates.filter(kind="G3").update(verdict=Verdict.FAIL)
    assert check_outcome(helps).detail == "G3 inconclusive, built to show pass"
    assert not check_outcome(helps).ok
    assert check_outcome(short_chat).ok
    helps.gates.filter(kind="G3").update(verdict=Verdict.PASS)
    assert check_outcome(helps).ok


BAND = {"predicted": [{"concurrency": 8, "low": -0.71, "high": -0.63}]}


def ttft_cell(ratio: float) -> dict:
    return {
        "metric": "ttft_p50",
        "compare": "offload/baseline",
        "tier": 8,
        "ratio": {"estimate": ratio},
    }


def shown(ratio: float) -> dict:
    return {"state": "predicted", "tiers": measured_against_predicted(BAND, [ttft_cell(ratio)])}


def test_a_measurement_outside_its_band_fails_only_where_the_band_is_decisive():
    """`demo --once` prints each G3 tier's band beside its measurement, as the run page does."""
    [inside] = band_steps("helps", True, shown(1 - 0.687))
    assert (inside.name, inside.ok) == ("helps G3 band c=8", True)
    assert inside.detail == "predicted -71 % to -63 %, measured -68.7 % (inside)"
    [outside] = band_steps("helps", True, shown(1 - 0.5))
    assert not outside.ok and outside.detail.endswith("measured -50 % (outside)")
    [noted] = band_steps("chat", False, shown(1 - 0.5))
    assert noted.ok and "(outside: a note, not a failure: " in noted.detail
    [unknown] = band_steps("helps", True, {"state": "unknown", "reason": "no inventory"})
    assert (unknown.ok, unknown.detail) == (False, "no band: no inventory")


def test_the_short_chat_engagement_names_the_model_its_host_serves_and_keeps_its_rows():
    """It once claimed an 8B model its 480B host did not run: a database from then is renamed."""
    _, short_chat, _ = build_demo_world(passwords=PASSWORDS)
    short_chat.title, short_chat.model_name = (
        "8B short chat (offload does not help)",
        "llama-3-8b-sim",
    )
    short_chat.save()
    again = build_demo_world(passwords=PASSWORDS)[1]
    assert again.pk == short_chat.pk
    assert (again.title, again.model_name) == (
        "480B short chat (offload does not help)",
        "qwen3-coder-480b-sim",
    )


def test_the_trace_engagement_replays_the_customers_upload_named_by_digest_in_signed_specs():
    """The customer uploads the trace through the trace service, the vendor saves the emulated
    host's KV plan (the planner's advice on the trace's page), and both sign G2 and G3 specs
    that replay it by digest; building again uploads nothing twice."""
    *_, traced = build_demo_world(passwords=PASSWORDS)
    (trace,) = traced.traces.all()
    assert trace.sha256 == demo_trace_sha256() and bytes(trace.content) == fitting_trace()
    assert (trace.format, trace.block_tokens) == ("mooncake", 512)
    upload = AuditEvent.objects.get(action="trace.upload")
    assert upload.actor.username == "customer" and upload.detail["sha256"] == trace.sha256
    assert traced.kv_plan == KV_PLAN
    g2 = traced.gates.get(kind="G2").current_spec
    g3 = traced.gates.get(kind="G3").current_spec
    assert g2.in_force and g3.in_force
    for workload in (
        g2.document["offload_hit"]["workload"],
        g2.document["noise_floor"]["workload"],
        g3.document["workload"],
    ):
        assert workload["trace"]["sha256"] == trace.sha256
    build_demo_world(passwords=PASSWORDS)
    assert traced.traces.count() == 1


def test_the_demo_trace_keeps_whole_prefix_trees_that_fit_simhosts_context():
    records = list(read_trace_bytes(fitting_trace(), "mooncake", 512))
    assert 1000 < len(records) < 3993  # the fixture's 3,993 less the trees too long
    assert max(record.input_tokens for record in records) <= 16_000
