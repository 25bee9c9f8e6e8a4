"""The demo's library step on a decided G3: published once with the customer's consent under an
industry label, one supported and one unsupported claim, the anonymous bundle verified."""

from __future__ import annotations

import pytest

from gates.demo.library import INDUSTRY, demo_claims, publish_demo_report
from gates.models import Claim, Publication

pytestmark = pytest.mark.django_db


def test_the_demo_publishes_its_g3_report_and_shows_both_kinds_of_claim(
    g3_decision, vendor_admin, customer_owner
):
    steps = publish_demo_report(g3_decision, vendor=vendor_admin, customer=customer_owner)
    assert [(s.name, s.ok) for s in steps] == [
        ("evidence library", True),
        ("supported claim", True),
        ("not supported claim", True),
    ], steps
    assert "verified" in steps[0].detail and INDUSTRY in steps[0].detail
    again = publish_demo_report(g3_decision, vendor=vendor_admin, customer=customer_owner)
    assert [s.ok for s in again] == [True, True, True]
    assert Publication.objects.count() == 1 and Claim.objects.count() == 2


def test_demo_claims_are_written_inside_and_above_the_interval():
    clause = {"metric": "ttft_p50", "change": "reduction", "tier": 8, "low": 39.0, "high": 41.0}
    inside, above = demo_claims([clause])
    assert inside == "TTFT p50 reduction 35 % at c=8 in a signed G3 test"
    assert above == "TTFT p50 reduction 67 % at c=8 in a signed G3 test"
