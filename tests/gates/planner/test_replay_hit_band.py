"""A trace replay's achieved hit rate against the planner's band for its tier: the band from
the trace's curve and the engagement's saved KV plan replanned at the tier; outside it is the
fidelity's model-error note; no band says why, never a guess."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from django.urls import reverse

from gates import services
from gates.decisions import decide_gate
from gates.models import Decision, Measurement, WorkloadTrace
from gates.planner.trace_tiers import replay_external_band, replay_hit_bands
from gates.services.runs.evaluation import run_decision_context, run_replay_fidelity
from gates.tenancy import viewer_for_user
from runners.traces.fidelity import check_fidelity
from runners.traces.replay_cell import replay_name
from tests.contract import sign_as_both
from tests.gates.services.test_uploads import pass_gate
from tests.simhosts import g2_spec, g3_spec

# Llama 3.1 70B on 2 x 80 GiB holds 41,233 tokens of KV; each request in flight holds 8,000.
KV_PLAN = {
    "model": "llama-3.1-70b",
    "gpus": 2,
    "gpu_mem_gib": 80,
    "concurrency": 64,
    "context_tokens": 8000,
}
# F(C): 30 % at 9,000 tokens, 50 % at 33,000, 60 % at 41,000.
PROFILE = {
    "prefix_information": True,
    "infinite_cache_hit_ratio": 0.7,
    "hit_ratio_curve": [[1000, 0.1], [9000, 0.3], [33000, 0.5], [41000, 0.6], [80000, 0.7]],
}
TRACE = {"sha256": "a" * 64, "format": "mooncake", "block_tokens": 512}


def test_the_band_is_the_gpu_share_with_the_tiers_requests_in_flight():
    bands = replay_hit_bands({1: PROFILE, 4: PROFILE}, KV_PLAN, TRACE)
    # c=1: the cache holds 33,233 to 41,233 tokens; c=4: 9,233 to 41,233.
    assert bands == {1: (0.5, 0.6), 4: (0.3, 0.6)}


@pytest.mark.parametrize(
    ("profile", "kv_plan", "trace", "reason"),
    [
        (None, KV_PLAN, TRACE, "characterisation is not ready"),
        ({"prefix_information": False}, KV_PLAN, TRACE, "no prefix information"),
        (PROFILE, None, TRACE, "no saved KV plan"),
        (PROFILE, KV_PLAN, {**TRACE, "sample_fraction": 0.06}, "sends 6 % of the trace"),
        (PROFILE, {**KV_PLAN, "gpus": 3}, TRACE, "the saved KV plan does not plan c=1"),
    ],
)
def test_without_a_band_each_tier_says_why(profile, kv_plan, trace, reason):
    bands = replay_hit_bands({1: profile}, kv_plan, trace)
    assert isinstance(bands[1], str) and reason in bands[1], bands


def test_the_external_band_is_the_offload_share_over_what_the_gpu_missed_at_each_end():
    # 25 GiB of DRAM holds 81,920 tokens at 327,680 bytes each: F = 70 %. At c=1 the GPU holds
    # 33,233 (F 50 %: the tier adds 20 of the 50 % missed) to 41,233 tokens (F 60 %: 10 of 40).
    band = replay_external_band(PROFILE, KV_PLAN, TRACE, concurrency=1, offload_gib=25)
    assert band == pytest.approx((0.25, 0.4))
    # At c=4 the smallest GPU cache (9,233 tokens, F 30 %) leaves 40 of 70 % to the tier.
    band = replay_external_band(PROFILE, KV_PLAN, TRACE, concurrency=4, offload_gib=25)
    assert band == pytest.approx((0.25, 0.4 / 0.7))


@pytest.mark.parametrize(
    ("profile", "trace", "offload_gib", "reason"),
    [
        (PROFILE, TRACE, None, "does not state the offload tier's size"),
        (PROFILE, {**TRACE, "sample_fraction": 0.5}, 25, "sends 50 % of the trace"),
        ({**PROFILE, "sample_fraction": 0.25}, {**TRACE, "sample_fraction": 0.5}, 25, "50 %"),
        ({**PROFILE, "hit_ratio_curve": [[1000, 1.0]]}, TRACE, 25, "nothing is asked of"),
    ],
)
def test_without_an_external_band_it_says_why(profile, trace, offload_gib, reason):
    band = replay_external_band(profile, KV_PLAN, trace, concurrency=1, offload_gib=offload_gib)
    assert isinstance(band, str) and reason in band, band


def test_a_sample_gets_the_band_of_its_own_characterisation():
    sampled = {**TRACE, "sample_fraction": 0.5}
    own = {**PROFILE, "sample_fraction": 0.5}
    band = replay_external_band(own, KV_PLAN, sampled, concurrency=1, offload_gib=25)
    assert band == pytest.approx((0.25, 0.4))
    assert replay_hit_bands({1: own}, KV_PLAN, sampled) == {1: (0.5, 0.6)}


# A sample pressed less than PROFILE: 40 % at 9,000 tokens, 70 % at 41,000.
LIGHTER = {
    "prefix_information": True,
    "infinite_cache_hit_ratio": 0.8,
    "hit_ratio_curve": [[1000, 0.2], [9000, 0.4], [33000, 0.6], [41000, 0.7], [80000, 0.8]],
    "sample_fraction": 0.5,
}


def test_each_tier_of_a_sample_reads_its_own_curve():
    sampled = {**TRACE, "sample_fraction": 0.5}
    own = {**PROFILE, "sample_fraction": 0.5}
    bands = replay_hit_bands({1: own, 4: LIGHTER}, KV_PLAN, sampled)
    # c=4 on PROFILE's curve would be 30 % to 60 %; its own sample's curve is higher.
    assert bands == {1: (0.5, 0.6), 4: (0.4, 0.7)}
    # One tier handed the whole trace's curve says so; the other keeps its band.
    bands = replay_hit_bands({1: PROFILE, 4: LIGHTER}, KV_PLAN, sampled)
    assert bands[4] == (0.4, 0.7) and "sends 50 % of the trace" in str(bands[1])


def characterised_trace(actor, engagement) -> tuple[WorkloadTrace, dict]:
    """A one-line Mooncake trace uploaded and characterised as PROFILE, the engagement's KV
    plan saved as KV_PLAN; the trace and the spec's reference to it."""
    trace = services.trace_upload(
        actor=actor,
        viewer=viewer_for_user(actor.user),
        engagement=engagement,
        name="t.jsonl",
        content=b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [7]}\n',
        trace_format="mooncake",
    )
    WorkloadTrace.objects.filter(pk=trace.pk).update(state="ready", profile=PROFILE)
    type(engagement).objects.filter(pk=engagement.pk).update(kv_plan=KV_PLAN)
    return trace, {"sha256": trace.sha256, "format": "mooncake", "block_tokens": 512}


@pytest.fixture
def replayed_run(actor, vendor_viewer, engagement, host):
    """A G3 run of a replay of a characterised trace, with one offload cell measured."""
    _, reference = characterised_trace(actor, engagement)
    for kind in ("G1", "G2"):
        pass_gate(actor, vendor_viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    workload = {"dataset": "random", "input_len": 10, "output_len": 1, "num_prompts": 40}
    document = g3_spec(workload={**workload, "seed": 5, "trace": reference}, tiers=[1])
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    fidelity = check_fidelity([], [], achieved_hit_rate=0.9).to_dict()  # band: none at the time
    metrics = {"replay": {"digest": "d", "fidelity": fidelity}}
    Measurement.objects.create(run=run, arm="offload", tier=1, repetition=1, metrics=metrics)
    return run


@pytest.mark.django_db
def test_a_replay_whose_hit_rate_falls_outside_the_planners_band_gets_the_note(
    replayed_run, vendor_admin
):
    summary = run_replay_fidelity(replayed_run)
    (cell,) = summary["cells"]
    assert cell["hit_rate"] == {"achieved": 0.9, "band": [0.5, 0.6], "inside": False}
    assert cell["valid"] and summary["reasons"] == []  # a note, never invalid
    (note,) = summary["notes"]
    assert note.startswith("replay offload c=1 r1: achieved hit rate 90.0% is outside the ")
    assert "predicted 50.0% to 60.0%: a model error" in note
    client = Client()
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[replayed_run.pk])).content.decode()
    assert "90 % (band 50 % to 60 %)" in page and "model error</span> achieved hit rate" in page


def record_sample_profiles(run, workload: dict, samples: dict[int, dict]) -> None:
    """The replay step as it records a down-sample's curves: per tier's replay, its
    `sample_profile` in the step's `progress.replays.<name>`."""
    built = {
        replay_name(workload, tier): {"digest": "d", "sample_profile": sample}
        for tier, sample in samples.items()
    }
    name = "build and upload the trace replay"
    detail = {"step": {"name": name, "kind": "replay"}, "progress": {"replays": built}}
    run.steps.create(position=1, name=name, detail=detail)


@pytest.mark.django_db
def test_a_sampled_replay_reads_each_tiers_sample_and_names_a_tier_without_one(
    replayed_run, vendor_admin
):
    spec = replayed_run.spec
    workload = spec.document["workload"]
    workload["trace"]["sample_fraction"] = 0.5
    spec.document["tiers"] = [1, 2, 4]
    type(spec).objects.filter(pk=spec.pk).update(document=spec.document)
    replayed_run.refresh_from_db()
    for tier, achieved in ((2, 0.5), (4, 0.5)):
        fidelity = check_fidelity([], [], achieved_hit_rate=achieved).to_dict()
        metrics = {"replay": {"digest": "d", "fidelity": fidelity}}
        Measurement.objects.create(
            run=replayed_run, arm="offload", tier=tier, repetition=1, metrics=metrics
        )
    # Each tier's seed drew its own sample; the step recorded c=1's and c=4's, not c=2's.
    record_sample_profiles(
        replayed_run, workload, {1: {**PROFILE, "sample_fraction": 0.5}, 4: LIGHTER}
    )
    summary = run_replay_fidelity(replayed_run)
    bands = {tier: band for tier, band in summary["hit_bands"]}
    assert bands[1] == [0.5, 0.6] and bands[4] == [0.4, 0.7]  # c=4: its sample, not c=1's
    missing = "the replay's sample was not characterised at c=2 (its replay step did not record it)"
    assert bands[2] == missing and summary["hit_band_missing"] == [missing]
    cells = {cell["cell"]: cell["hit_rate"] for cell in summary["cells"]}
    assert cells["offload c=4 r1"] == {"achieved": 0.5, "band": [0.4, 0.7], "inside": True}
    assert cells["offload c=2 r1"]["band"] is None
    assert cells["offload c=1 r1"]["inside"] is False  # 90 % against its sample's 50-60 %
    client = Client()
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:run-detail", args=[replayed_run.pk])).content.decode()
    assert f"No predicted hit-rate band: {html.escape(missing)}." in page
    assert "90 % (band 50 % to 60 %)" in page and "50 % (band 40 % to 70 %)" in page


@pytest.fixture
def replayed_g2(actor, vendor_viewer, engagement, host):
    """A claimed G2 run whose hit cell replays a characterised trace at c=1 on 25 GiB of DRAM,
    its hit cell measured at an external hit rate of 20 % (the band is 25 % to 40 %)."""
    _, reference = characterised_trace(actor, engagement)
    pass_gate(actor, vendor_viewer, engagement, "G1", host)
    gate = engagement.gates.get(kind="G2")
    document = g2_spec()
    document["offload_hit"].update(
        tier=1, workload={**document["offload_hit"]["workload"], "trace": reference}
    )
    document["server"] = {"offload_gib": 25}
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    server = {"external_hit_rate": 0.2}
    Measurement.objects.create(
        run=run, arm="offload_hit", tier=1, repetition=1, metrics={}, server=server
    )
    return run


@pytest.mark.django_db
def test_a_g2_replay_below_its_band_is_a_warning_on_its_decision_and_page(
    replayed_g2, vendor_admin
):
    context = run_decision_context(replayed_g2)
    band = context["replay_external_band"]
    assert band["tier"] == 1 and band["band"] == pytest.approx([0.25, 0.4])
    services.run_evaluate(replayed_g2)
    decision = Decision.objects.get(runs=replayed_g2)
    (found,) = [row for row in decision.clauses if row["check"] == "replay_band"]
    assert (found["position"], found["external_hit_rate"]) == ("below", 0.2)
    (note,) = decision.result["notes"]
    assert (
        note.startswith("replay_band: external hit rate 20.0%")
        and note in decision.result["reasons"]
    )
    assert decision.result["inputs"]["context"] == {"replay_external_band": band}
    # The offline verifier decides again from the bundle's context (the recorded inputs'
    # context, decision/context.json): the band as recorded gives the same decision.
    inputs = decision.result["inputs"]
    assert decide_gate(replayed_g2.spec.document, inputs["observed"], inputs["context"]) == (
        decision.result
    )
    client = Client()
    client.force_login(vendor_admin)
    gate_page = client.get(reverse("gates:gate-detail", args=[decision.gate_id])).content.decode()
    assert "below the band</span>" in gate_page and "25.0% to 40.0%" in gate_page
    assert "20.0% (below)" in gate_page and "not a G2 failure" in gate_page
    run_page = client.get(reverse("gates:run-detail", args=[replayed_g2.pk])).content.decode()
    assert 'class="warn replay-band-note">replay_band: external hit rate 20.0%' in run_page


@pytest.mark.django_db
def test_a_sampled_g2_replay_reads_the_band_of_the_sample_its_replay_step_characterised(
    replayed_g2,
):
    spec = replayed_g2.spec
    workload = spec.document["offload_hit"]["workload"]
    workload["trace"]["sample_fraction"] = 0.5
    type(spec).objects.filter(pk=spec.pk).update(document=spec.document)
    replayed_g2.refresh_from_db()
    missing = run_decision_context(replayed_g2)["replay_external_band"]
    assert "the replay's sample was not characterised" in missing["missing"]
    # The replay step characterised its kept sample: a GPU share of 50 % to 60 % at c=1.
    record_sample_profiles(replayed_g2, workload, {1: {**PROFILE, "sample_fraction": 0.5}})
    band = run_decision_context(replayed_g2)["replay_external_band"]
    assert band["band"] == pytest.approx([0.25, 0.4])
