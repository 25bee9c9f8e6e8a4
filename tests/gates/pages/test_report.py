"""The gate report page: G1, G2 and G3 decisions recorded through the services and decided by
the engine, read as a customer reads them (verdict, clauses with units and comparison, charts,
inventory, signatures, digest); another organization gets 404, a gate with no decision too."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.urls import reverse

from gates import figures, services
from gates.decisions import decide_g1, decide_g2, decide_g4
from gates.evidence import bundle_for_decision, envelope_digest, layout
from gates.pages.report.page import report_digest
from gates.pages.report.tables import clause_table, inventory_table
from tests.gates.charts.test_charts import template
from tests.gates.decisions.g4.test_g4 import g4_spec, soak
from tests.gates.pages.test_dashboards import (
    G1_FACTS,
    decide_uploaded,
    g2_observed,
    open_g3,
    record_g3_decision,
)

pytestmark = pytest.mark.django_db


def page_text(response) -> str:
    """The page as a reader sees it: tags dropped, whitespace collapsed."""
    assert response.status_code == 200, response.status_code
    html = re.sub(r"<script.*?</script>", " ", response.content.decode(), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def report(client, user, gate_id: int):
    client.force_login(user)
    return client.get(reverse("gates:gate-report", args=[gate_id]))


def test_a_g3_report_has_the_verdict_every_cell_in_its_units_the_charts_and_the_digest(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    response = report(client, customer_viewer, decision.gate_id)
    text = page_text(response)
    assert f"Verdict: {decision.verdict.upper()}" in text
    cell = decision.result["clauses"][0]
    assert f"TTFT p50 reduction, offload vs baseline, c={cell['tier']}" in text
    assert "reduction in %, at least the bar" in text
    _, low, high = figures.estimate_interval(cell["estimate"], cell["low"], cell["high"], "%")
    level = cell["confidence_at_look"] * 100  # the look's own level (the plan spends by look)
    assert f"[{low}, {high}] at {level:.4g} %" in text
    assert text.count("at least the bar") == len(decision.result["clauses"])
    html = response.content.decode()
    assert 'data-figure="figure-forest"' in html and 'data-figure="figure-measurements"' in html
    assert "/static/vendor/plotly.min.js" in html and "cdn" not in html.lower()
    assert f"Evidence envelope digest {envelope_digest(decision)}" in text
    # The inventory every later gate was measured on: the engagement's G1 facts.
    assert "GPU 7 NVIDIA H100 80GB HBM3, 79.65 GiB" in text and "vLLM 0.20.1" in text
    assert f"v{decision.spec.version}, SHA-256 {decision.spec.digest}" in text
    assert "Vendor" in text and "Customer" in text  # both parties signed the spec


def test_a_g2_report_shows_each_check_with_its_bar_and_the_aa_interval(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    open_g3(actor, vendor_viewer, engagement)
    g2 = engagement.gates.get(kind="G2")
    text = page_text(report(client, customer_viewer, g2.pk))
    assert "Verdict: PASS" in text
    assert "offload_hit offload tier hit rate, at least 0.2 0.63" in text
    assert "noise_floor A/A TTFT p50 ratio, interval within the floor ±10 %" in text
    assert re.search(r"\[0\.968\d*x, 1\.03[56]\d*x\] at 90 %", text), text
    assert "became healthy within the timeout 900 s 40 s" in text


def test_a_g1_report_lists_expected_against_observed_and_the_inventory_without_charts(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    g1 = engagement.gates.get(kind="G1")
    facts = {**G1_FACTS, "vllm_version": "0.19.0"}
    decision = decide_uploaded(actor, vendor_viewer, g1, lambda s: decide_g1(s, facts))
    response = report(client, customer_viewer, g1.pk)
    text = page_text(response)
    assert decision.verdict == "fail" and "Verdict: FAIL" in text
    assert "vllm_min version at least 0.20.1 0.19.0" in text
    assert "gpu_count equals 8 GPUs 8 GPUs" in text
    assert "gpu_model every GPU matches the pattern" in text and "8 x NVIDIA H100" in text
    assert "Host memory 2 TiB" in text and "Offload tier present, 1 TiB" in text
    assert "data-figure" not in response.content.decode()


def test_another_organization_and_a_gate_without_a_decision_get_404(
    client, actor, vendor_viewer, engagement, customer_viewer, other_owner
):
    decision = record_g3_decision(actor, vendor_viewer, engagement, repetitions=3)
    for name in ("gates:gate-report", "gates:gate-report-pdf"):
        client.force_login(other_owner)
        assert client.get(reverse(name, args=[decision.gate_id])).status_code == 404
    undecided = engagement.gates.get(kind="G4")
    assert report(client, customer_viewer, undecided.pk).status_code == 404


def test_the_gate_page_links_its_report_once_decided(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    g1 = engagement.gates.get(kind="G1")
    client.force_login(customer_viewer)
    detail = reverse("gates:gate-detail", args=[g1.pk])
    assert reverse("gates:gate-report-pdf", args=[g1.pk]) not in client.get(detail).content.decode()
    decide_uploaded(actor, vendor_viewer, g1, lambda s: decide_g1(s, G1_FACTS))
    html = client.get(detail).content.decode()
    assert reverse("gates:gate-report-pdf", args=[g1.pk]) in html
    assert reverse("gates:gate-report", args=[g1.pk]) in html


def test_the_digest_is_the_sha256_of_the_envelope_in_the_decisions_evidence_bundle(
    actor, vendor_viewer, engagement
):
    g2 = engagement.gates.get(kind="G2")
    open_g3(actor, vendor_viewer, engagement)
    decision = g2.decisions.get()
    digest = report_digest(decision)
    assert digest.label == "evidence envelope digest"
    data, _ = bundle_for_decision(decision)
    envelope = layout.read_zip(data)[layout.ENVELOPE]
    assert digest.value == hashlib.sha256(envelope).hexdigest()


def test_tables_read_broken_stored_values_as_na_rather_than_failing():
    rows = clause_table(
        [
            {"metric": "ttft_p50", "compare": "offload/baseline", "change": "reduction"},
            {"check": "noise_floor", "low_ratio": float("nan"), "max_noise_pct": "10"},
            {"check": "made_up", "expected": None, "observed": [1, 1, 2]},
            "not a clause",
        ]
    )
    assert [row.estimate for row in rows] == ["n/a", "n/a", "2 x 1; 1 x 2"]
    assert rows[1].bar == "±n/a" and rows[0].interval == "n/a"
    assert inventory_table({"gpu_inventory": {"gpus": "nope"}}) == ([], [])


def test_the_g2_hit_rate_floor_is_compared_as_a_plain_share():
    observed = g2_observed([(1000.0, 1010.0)], hit_rate=0.1)
    rows = clause_table(decide_g2(template("G2"), observed)["clauses"])
    hit = next(row for row in rows if row.name == "offload_hit")
    assert (hit.bar, hit.estimate, hit.verdict) == ("0.2", "0.1", "fail")


def test_the_g2_replay_band_reads_as_the_band_against_the_rate_and_its_side():
    observed = g2_observed([(1000.0, 1010.0)], hit_rate=0.1)
    context = {"replay_external_band": {"tier": 8, "band": [0.25, 0.4]}}
    rows = clause_table(decide_g2(template("G2"), observed, context)["clauses"])
    band = next(row for row in rows if row.name == "replay_band")
    assert (band.bar, band.estimate, band.verdict) == (
        "25.0% to 40.0%",
        "10.0% (below)",
        "inconclusive",
    )
    assert "advisory" in band.comparison and "not a G2 failure" in band.cause


def test_g4_soak_checks_read_as_observed_against_their_limit():
    rows = clause_table(decide_g4(g4_spec(), soak(count=100, crashed={40}))["clauses"])
    crashes = next(row for row in rows if row.name == "crashes")
    assert (crashes.comparison, crashes.bar, crashes.estimate) == (
        "at most",
        "0 crashes",
        "1 crashes",
    )
    assert crashes.verdict == "fail"
    error = next(row for row in rows if row.name == "error_rate")
    assert (error.bar, error.estimate) == ("0.5 %", "0 %")


def test_a_waived_gate_reports_the_waiver_with_its_justification(
    client, actor, vendor_viewer, engagement, customer_viewer
):
    g1 = engagement.gates.get(kind="G1")
    facts = {**G1_FACTS, "vllm_version": "0.19.0"}
    decide_uploaded(actor, vendor_viewer, g1, lambda s: decide_g1(s, facts))
    reason = "vLLM 0.19 is what the customer runs in production"
    waiver = services.gate_waive(actor=actor, viewer=vendor_viewer, gate=g1, justification=reason)
    text = page_text(report(client, customer_viewer, g1.pk))
    # The headline says waived, never the engine's verdict it overrode.
    assert "Verdict: WAIVED" in text and f"Verdict: {waiver.verdict.upper()}" not in text
    assert f"“{reason}”" in text and "waived by a vendor admin" in text
    assert f"Evidence envelope digest {envelope_digest(waiver)}" in text
    # The numbers the waiver overrode stay on the report, and the inventory they came from.
    assert (
        "This waiver overrides the engine's decision" in text
        and "vllm_min version at least" in text
    )
    assert "GPU 0 NVIDIA H100 80GB HBM3" in text
