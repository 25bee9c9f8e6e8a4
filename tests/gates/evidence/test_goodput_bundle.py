"""A G3 decision with a goodput floor, uploaded with vLLM's per-request arrays: its bundle
recomputes the floor from the raw result files, and one request's TTFT changed in a raw file
and signed again is named by the share it changes."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from gates import services
from gates.evidence import bundle_for_decision
from gates.evidence.verify import verify_bundle
from gates.specs.validation import default_spec
from tests.contract import sign_as_both
from tests.gates.evidence.helpers import resealed
from tests.gates.evidence.test_bundles import server_key
from tests.gates.services.test_uploads import BENCH, pass_gate, scrapes, send, upload_run

pytestmark = pytest.mark.django_db
REQUESTS = 8
FLOOR = {
    "metric": "goodput",
    "slo": {"ttft_ms": 500, "tpot_ms": 50},
    "arm": "offload",
    "at_least_pct": 50,
    "tiers": "all",
}
RAW = "runs/attempt-1/files/offload-c8-r1/result.json"


def floor_gate(actor, viewer, engagement, host):
    for kind in ("G1", "G2"):
        pass_gate(actor, viewer, engagement, kind, host)
    gate = engagement.gates.get(kind="G3")
    document = default_spec("G3")
    document.update(tiers=[8], repetitions={"min": 4, "max": 4}, clauses=[FLOOR])
    document["arms"] = {"baseline": "resident", "offload": "offload"}
    document["validity"].update(require_kv_exceeds_vram=False, min_external_hit_rate=0)
    document["statistics"]["require_power"] = False
    for rule in ("sd_floor_fraction", "spread_level"):
        document["statistics"].pop(rule, None)
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    sign_as_both(gate)
    return gate


def bench_with_requests(within: int) -> SimpleUploadedFile:
    """vLLM's result file with its per-request arrays (seconds): `within` requests meet FLOOR's
    SLO (TTFT 0.1 s, TPOT 10 ms), the others miss its TTFT bound."""
    ttfts = [0.1] * within + [0.9] * (REQUESTS - within)
    payload = {
        **BENCH,
        "max_concurrency": 8,
        "ttfts": ttfts,
        "latencies": [ttft + 0.16 for ttft in ttfts],
        "output_lens": [17] * REQUESTS,
        "input_lens": [32] * REQUESTS,
        "errors": [""] * REQUESTS,
    }
    return SimpleUploadedFile("result.json", json.dumps(payload).encode())


@pytest.fixture
def floor_bundle(api, actor, vendor_viewer, engagement, host) -> bytes:
    gate = floor_gate(actor, vendor_viewer, engagement, host)
    run = upload_run(api, gate)
    for repetition in (1, 2, 3, 4):
        for arm in ("baseline", "offload"):
            cell = bench_with_requests(8 if arm == "offload" else 4)
            where = {"arm": arm, "tier": 8, "repetition": repetition}
            sent = send(api, run["id"], kind="bench", file=cell, **where, **scrapes(arm))
            assert sent.status_code == 201, sent.json()
    assert api.post(reverse("api:run-decide", args=[run["id"]])).status_code == 200
    decision = gate.decisions.get()
    (cell,) = decision.result["clauses"]
    assert cell["change"] == "floor" and cell["goodput"]["shares"][0]["met"] == REQUESTS
    data, _ = bundle_for_decision(decision)
    return data


def test_a_goodput_floor_recomputes_from_the_raw_files(floor_bundle):
    report = verify_bundle(floor_bundle, public_key=server_key())
    assert report.ok, report.problems
    assert any("recomputed from its raw files" in note for note in report.notes)


def test_one_requests_ttft_changed_in_a_raw_file_is_named_by_the_share_it_changes(floor_bundle):
    def slower_first_request(members):
        document = json.loads(members[RAW])
        document["ttfts"][0] = 0.9  # now beyond the SLO's 500 ms
        members[RAW] = json.dumps(document).encode()

    problems = verify_bundle(resealed(floor_bundle, slower_first_request), public_key=server_key())
    found = problems.problems
    assert any("goodput.shares[0].met: recorded 8, recomputed 7" in p for p in found), found
