"""The demo world signs its specs as both parties through the services, so its verdicts count."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.demo.world import build_demo_world, demo_host
from gates.models import AuditEvent, SpecSignature

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
    assert len({host.pk for host in hosts}) == len(engagements) == 2
    for key in ("sim_host_config", "run_root", "port"):
        values = [str(host.parameters[key]) for host in hosts]
        assert len(set(values)) == len(values), key
    folders = {Path(host.parameters["sim_host_config"]).parent for host in hosts}
    assert len(folders) == len(hosts)
