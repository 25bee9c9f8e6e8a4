"""Hostile path values (run_root and every other path parameter) are refused before anything
touches the host: when the run is built (pure), when it is started (the service), and when a
worker picks up a run whose host parameters turned bad after it was started (real sshd: no
login at all)."""

from __future__ import annotations

import pytest

from gates import services
from gates.models import Host, Run
from runners.errors import SpecError
from runners.program.workorder import RunPlan
from tests.simhosts import local_simhost, ssh_simhost
from worker import tasks

TRAVERSAL = "/tmp/tollgate-paths/a/../../elsewhere"  # never created: the point
HOSTILE_RUN_ROOTS = [
    pytest.param(TRAVERSAL, id="dot-dot traversal"),
    pytest.param("/tmp/./runs", id="dot component"),
    pytest.param("tmp/relative", id="relative"),
    pytest.param("~/runs", id="tilde"),
    pytest.param("/", id="root"),
    pytest.param("", id="empty"),
    pytest.param("/tmp//runs", id="double slash"),
    pytest.param("/tmp/runs/", id="trailing slash"),
    pytest.param("/tmp/x;touch /tmp/pwned", id="semicolon and space"),
    pytest.param("/tmp/$(id)", id="command substitution"),
    pytest.param("/tmp/`id`", id="backticks"),
    pytest.param("/tmp/a b", id="space"),
    pytest.param("/tmp/x\nrm -rf /", id="newline"),
    pytest.param("/tmp/x\x00y", id="NUL"),
    pytest.param("/tmp/r\u00e9sultats", id="non-ASCII"),
    pytest.param("/tmp/" + "a" * 5000, id="too long"),
    pytest.param(42, id="not text"),
]
# PostgreSQL's jsonb cannot hold a NUL at all: a host row never carries one.
STORABLE_RUN_ROOTS = [value for value in HOSTILE_RUN_ROOTS if value.id != "NUL"]
HOSTILE_OTHER_PATHS = [
    pytest.param("python", "/usr/bin/python3;id", id="python with a semicolon"),
    pytest.param("python", "python3", id="python relative"),
    pytest.param("sim_host_config", "/etc/../etc/passwd", id="config traversal"),
    pytest.param("sim_fault_file", "/tmp/$HOME/faults.json", id="fault file with $"),
    pytest.param("model_path", "../../weights", id="model path traversal"),
    pytest.param("model_path", "/models/../../etc", id="absolute model path traversal"),
    pytest.param("result_dir", "/tmp/res|ults", id="result dir with a pipe"),
]


def plan(**changes) -> RunPlan:
    fields = {
        "host_name": "gpu-01",
        "target": None,
        "commands": {},
        "values": {"python": "/usr/bin/python3", "run_root": "/var/tmp/tollgate"},
        "run_dir": "/var/tmp/tollgate/run-1-abcdef",
        "token": "run-abcdef",
        "serve_timeout_s": 60,
    }
    fields.update(changes)
    return RunPlan(**fields)


def test_a_plain_plan_is_accepted():
    accepted = plan(retry_window_s="60")
    assert accepted.run_dir == "/var/tmp/tollgate/run-1-abcdef"
    assert accepted.retry_window_s == 60.0


@pytest.mark.parametrize("run_root", HOSTILE_RUN_ROOTS)
def test_a_run_plan_refuses_a_hostile_run_root(run_root):
    with pytest.raises(SpecError) as refused:
        plan(values={"run_root": run_root}, run_dir=f"{run_root}/run-1-abcdef")
    assert refused.value.field == "run_root"


@pytest.mark.parametrize(("name", "value"), HOSTILE_OTHER_PATHS)
def test_a_run_plan_refuses_any_hostile_path_parameter(name, value):
    with pytest.raises(SpecError) as refused:
        plan(values={"python": "/usr/bin/python3", name: value})
    assert refused.value.field == name


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"keep_run_dir": "yes"}, "keep_run_dir"),
        ({"retry_window_s": -1}, "transport_retry_window_s"),
        ({"retry_window_s": "soon"}, "transport_retry_window_s"),
        ({"retry_window_s": True}, "transport_retry_window_s"),
        ({"run_dir": "/run-1"}, "run_root"),
    ],
)
def test_a_run_plan_refuses_bad_run_settings(changes, field):
    with pytest.raises(SpecError) as refused:
        plan(**changes)
    assert refused.value.field == field


@pytest.mark.django_db
@pytest.mark.parametrize("run_root", STORABLE_RUN_ROOTS)
def test_starting_a_run_with_a_hostile_run_root_is_refused_and_writes_nothing(
    actor, vendor_viewer, engagement, customer_org, tmp_path, run_root
):
    host = _host(customer_org, tmp_path, run_root=run_root)
    with pytest.raises(services.ServiceError) as refused:
        services.run_create(
            actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
        )
    assert refused.value.field == "parameters.run_root"
    assert not Run.objects.exists()
    assert Host.objects.get(pk=host.pk).lease_run is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "value"),
    [("keep_run_dir", "yes"), ("transport_retry_window_s", -5), ("transport_retry_window_s", [])],
)
def test_starting_a_run_with_bad_run_settings_is_refused_naming_them(
    actor, vendor_viewer, engagement, customer_org, tmp_path, name, value
):
    host = _host(customer_org, tmp_path, **{name: value})
    with pytest.raises(services.ServiceError) as refused:
        services.run_create(
            actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
        )
    assert refused.value.field == f"parameters.{name}"
    assert not Run.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("run_root", TRAVERSAL, id="run_root traversal"),
        pytest.param("run_root", "/tmp/$(touch /tmp/tollgate-pwned)", id="run_root $()"),
        pytest.param("sim_host_config", "/tmp/../etc/passwd", id="config traversal"),
    ],
)
def test_a_run_whose_host_turned_hostile_ends_spec_error_without_logging_in(
    actor, vendor_viewer, engagement, customer_org, sshd, tmp_path, monkeypatch, name, value
):
    monkeypatch.setattr(tasks.advance_run, "delay", lambda run_id: None)
    host = ssh_simhost(customer_org, sshd, tmp_path / "host")
    gate = engagement.gates.get(kind="G1")
    run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
    Host.objects.filter(pk=host.pk).update(parameters={**host.parameters, name: value})
    logins_before = sshd.log_text().count("Accepted publickey")
    tasks.advance_run(run.pk)
    run.refresh_from_db()
    assert (run.state, run.outcome) == ("finished", "spec_error"), run.reason
    assert name in run.reason
    assert sshd.log_text().count("Accepted publickey") == logins_before
    assert not (tmp_path / "host" / "runs").exists()
    assert not services.host_cleanup_pending(host.pk)  # nothing was launched to clean


def _host(organization, tmp_path, **parameters) -> Host:
    host = local_simhost(organization, tmp_path / "host")
    host.parameters = {**host.parameters, **parameters}
    host.save(update_fields=["parameters"])
    return host
