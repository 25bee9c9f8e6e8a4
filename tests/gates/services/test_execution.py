"""The run plan a worker drives from: typed, frozen, and silent about the host's key."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from gates import services
from runners.program.workorder import RunPlan
from tests.conftest import PRIVATE_KEY, make_host
from tests.simhosts import local_simhost

pytestmark = pytest.mark.django_db


def plan_for(actor, vendor_viewer, engagement, host) -> RunPlan:
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    return services.run_execution(run)


def test_an_ssh_host_s_plan_holds_the_key_but_never_shows_it(
    actor, vendor_viewer, engagement, customer_org, caplog
):
    host = make_host(customer_org, key_file_path="")
    services.host_set_credential(host=host, private_key=PRIVATE_KEY)
    plan = plan_for(actor, vendor_viewer, engagement, host)
    assert plan.target.private_key == PRIVATE_KEY and plan.target.address == "10.0.0.5"
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("tollgate.test").warning("plan: %s %r", plan, plan)
    secret = PRIVATE_KEY.splitlines()[1]
    assert secret not in repr(plan) and secret not in caplog.text
    assert "10.0.0.5" in repr(plan)


def test_the_plan_cannot_be_changed_on_its_way_through_the_driver(
    actor, vendor_viewer, engagement, host
):
    plan = plan_for(actor, vendor_viewer, engagement, host)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.run_dir = "/"  # type: ignore[misc]


def test_a_local_host_is_planned_without_an_ssh_target(
    actor, vendor_viewer, engagement, customer_org, tmp_path
):
    host = local_simhost(customer_org, tmp_path)
    plan = plan_for(actor, vendor_viewer, engagement, host)
    assert plan.target is None and plan.host_name == host.name
    assert plan.probe_names == list(host.profile.commands["probes"])
    assert plan.run_dir.startswith(plan.values.get("run_root", "/tmp/tollgate").rstrip("/"))
