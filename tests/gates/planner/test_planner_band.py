"""The planner page's TTFT band: asked for with the form, computed by a task tier by tier with
done/total progress (never inside the request), shown per tier with what it assumes, found
again by its inputs' digest; what the model cannot take is said, never guessed."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from gates import services
from gates.models import TtftBandPrediction
from gates.services import planning
from tests.gates.pages.test_planner import FORM, planner_url

pytestmark = pytest.mark.django_db

# Llama 3.1 70B on 2 x 80 GiB (about 41k tokens of KV) and 16 sessions of 6k tokens: a
# fraction of a second of the model per tier.
BAND = {
    "gpus": "2",
    "band-gpu_kind": "H100-SXM5-80GB",
    "band-prefix_tokens": "6144",
    "band-suffix_tokens": "64",
    "band-output_tokens": "32",
    "band-sessions": "16",
    "band-resumes": "1",
    "band-tiers": "16, 4",
}


@pytest.fixture
def pokes(monkeypatch) -> list:
    sent: list = []
    monkeypatch.setattr(services.pokes, "send", lambda name, *args: sent.append((name, *args)))
    return sent


def band_section(client, prediction: TtftBandPrediction) -> str:
    url = reverse("gates:planner-ttft")
    response = client.get(url, {"digest": prediction.digest, "part": "section"})
    assert response.status_code == 200
    return response.content.decode()


def embedded_figure(html: str, key: str) -> dict:
    found = re.search(rf'<script id="{key}" type="application/json">(.*?)</script>', html)
    assert found, f"no figure {key}"
    return json.loads(found.group(1))


def test_the_band_is_computed_by_a_task_with_progress_and_shown_per_tier(
    client, customer_viewer, pokes, django_capture_on_commit_callbacks
):
    client.force_login(customer_viewer)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(planner_url(), {**FORM, **BAND}).content.decode()
    prediction = TtftBandPrediction.objects.get()
    assert pokes == [("runners.predict_planner_ttft", prediction.pk)]
    assert prediction.state == "computing" and prediction.progress_total == 2
    assert "Computing: 0/2 tiers done" in page and 'data-state="computing"' in page
    assert "ttft-band-figure" not in page  # no tier yet: nothing to draw
    assert "Assuming llama-3.1-70b on 2 x H100-SXM5-80GB" in page

    assert services.ttft_band_claim(prediction.pk)
    assert not services.ttft_band_claim(prediction.pk)  # a redelivered poke does nothing
    services.ttft_band_compute(prediction.pk)
    prediction.refresh_from_db()
    assert prediction.state == "ready" and prediction.progress_done == 2
    section = band_section(client, prediction)
    assert "data-poll" not in section and "Computing" not in section
    tiers = sorted(prediction.tiers, key=lambda tier: tier["concurrency"])
    assert [tier["concurrency"] for tier in tiers] == [4, 16]
    for tier in tiers:  # through gates.figures: "-94.6 % to -88.6 %"
        assert f"c={tier['concurrency']}</strong>: TTFT p50 -" in section
        assert all(end < 0 for end in (tier["low"], tier["high"]))
    assert "50 % to 100 % of the host links&#x27; DMA speed" in section
    figure = embedded_figure(section, "ttft-band-figure")  # the chart the page's JS draws
    assert figure["data"][0]["x"] == ["c=4", "c=16"]
    assert 'data-band-figure="ttft-band-figure"' in section
    assert "16 sessions of a 6,144-token prefix + 64 fresh tokens" in section

    with django_capture_on_commit_callbacks(execute=True):  # the same inputs: the same band
        again = client.post(planner_url(), {**FORM, **BAND}).content.decode()
    assert TtftBandPrediction.objects.count() == 1 and len(pokes) == 1
    assert "Computing" not in again and 'data-tier="16"' in again


def test_a_worker_killed_midway_leaves_its_tiers_and_the_sweep_takes_it_over(client, pokes):
    from tests.gates.planner.test_run_band import planned_inputs

    prediction = planning.ttft_band_request(planned_inputs(tiers=(4, 16)))
    assert planning.ttft_bands_to_compute() == [prediction.pk]  # the poke may be lost
    done = {"concurrency": 4, "low": -0.9, "high": -0.8}
    TtftBandPrediction.objects.filter(pk=prediction.pk).update(tiers=[done], progress_done=1)
    assert services.ttft_band_claim(prediction.pk)
    assert planning.ttft_bands_to_compute() == []  # claimed and fresh
    services.ttft_band_compute(prediction.pk)
    prediction.refresh_from_db()
    assert prediction.tiers[0] == done and prediction.tiers[1]["concurrency"] == 16
    assert prediction.state == "ready"


def test_what_the_model_cannot_take_is_said_and_nothing_is_queued(client, customer_viewer, pokes):
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, **BAND, "kv_dtype": "fp8"}).content.decode()
    assert "No TTFT band: the model moves bf16 KV and reads bf16 weights" in page
    assert not TtftBandPrediction.objects.exists() and not pokes


def test_without_a_gpu_kind_no_band_is_asked_for(client, customer_viewer, pokes):
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, **BAND, "band-gpu_kind": ""}).content.decode()
    assert "Offload is worth a joint test" in page and 'id="ttft-band"' not in page
    assert not TtftBandPrediction.objects.exists()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"band-tiers": "4, x"}, "Whole numbers separated by commas"),
        ({"band-tiers": "1, 2, 3, 4, 5, 6, 7"}, "At most 6 tiers"),
        (
            {"band-sessions": "1024", "band-prefix_tokens": "32000"},
            "32,833,536 tokens to prefill; the band takes at most 8,388,608",
        ),
        ({"band-sessions": ""}, "Needed for the TTFT band."),
    ],
)
def test_bad_band_inputs_are_shown_on_their_field(client, customer_viewer, fields, error):
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, **BAND, **fields}).content.decode()
    field = "band-tiers" if "band-tiers" in fields else "band-sessions"
    assert f'data-error-for="{field}">{error}' in page
    assert not TtftBandPrediction.objects.exists()


def test_too_many_bands_computing_at_once_refuses_a_new_one(client, customer_viewer, pokes):
    from tests.gates.planner.test_run_band import planned_inputs

    for tiers in range(1, planning.MAX_BANDS_COMPUTING + 1):
        planning.ttft_band_request(planned_inputs(tiers=(tiers,)))
    client.force_login(customer_viewer)
    page = client.post(planner_url(), {**FORM, **BAND}).content.decode()
    assert "No TTFT band: 20 TTFT bands are being computed" in page


def test_a_band_is_found_only_by_its_digest(client, customer_viewer):
    client.force_login(customer_viewer)
    assert client.get(reverse("gates:planner-ttft")).status_code == 404
    assert client.get(reverse("gates:planner-ttft"), {"digest": "0" * 64}).status_code == 404
