"""The driver loop on a fake session and fake steps: budget, cancel, more repetitions."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from gates.specs import validation as specs
from runners.errors import InfrastructureError
from runners.program import driver
from runners.program.perform import StepContext, StepProgress


@dataclass
class Evaluation:
    decided: bool
    more: int = 0
    first: int = 0


@dataclass
class FakeSession:
    spec: dict
    steps: list = field(default_factory=list)
    done: set = field(default_factory=set)
    recorded: list = field(default_factory=list)
    cancel: bool = False
    canceled: bool = False
    evaluations: list = field(default_factory=list)
    answers: list = field(default_factory=lambda: [Evaluation(True)])
    beats: int = 0
    answered: bool = False
    first_repetition: int = 1

    def heartbeat(self):
        self.beats += 1

    def has_plan(self):
        return bool(self.steps)

    def append_steps(self, steps):
        self.steps += steps

    def next_step(self):
        pending = [s for s in self.steps if s["name"] not in self.done]
        return (pending[0], {}) if pending else None

    def record(self, step, progress):
        self.recorded.append(step["name"])
        if progress.done:
            self.done.add(step["name"])

    def cancel_requested(self):
        return self.cancel

    def launched_dirs(self):
        return ["/tmp/tollgate-test/run-1/serve-x"]

    def mark_canceled(self):
        self.canceled = True

    def host_answered(self):
        self.answered = True

    def evaluate(self):
        self.evaluations.append(len(self.done))
        return self.answers.pop(0)


class FakeTransport:
    def __init__(self, unreachable=False):
        self.killed = []
        self.unreachable = unreachable

    def kill(self, run_dir, grace=10.0):
        if self.unreachable:
            raise InfrastructureError("connection refused", host="gpu-01")
        self.killed.append(run_dir)


@pytest.fixture
def ctx(tmp_path):
    return StepContext(
        transport=FakeTransport(),
        commands={},
        values={},
        run_dir="/tmp/x/run",
        token="t",
        scratch=Path(tmp_path),
    )


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_it_performs_every_step_then_asks_for_a_verdict(monkeypatch, ctx):
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(True))
    session = FakeSession(spec=specs.default_spec("G1"))
    more = driver.drive(session, ctx, budget_s=30, probe_names=["kernel", "meminfo"])
    assert more is False
    assert session.recorded == ["prepare host", "probe kernel", "probe meminfo"]
    assert session.evaluations == [3]  # once, after every step was done
    assert ctx.transport.killed == ["/tmp/tollgate-test/run-1/serve-x"]


def test_it_hands_over_when_its_budget_is_spent(monkeypatch, ctx):
    clock = Clock()
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(False))
    session = FakeSession(spec=specs.default_spec("G1"))
    more = driver.drive(session, ctx, budget_s=10, probe_names=[], clock=clock, sleep=clock.sleep)
    assert more is True and clock.now >= 10
    assert session.beats >= 1 and not session.evaluations


def test_a_cancel_stops_what_was_launched_and_ends_the_run(monkeypatch, ctx):
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(False))
    session = FakeSession(spec=specs.default_spec("G1"), cancel=True)
    assert driver.drive(session, ctx, budget_s=10, probe_names=[]) is False
    assert session.canceled and ctx.transport.killed


def test_a_cancel_on_an_unreachable_host_raises_and_leaves_the_run_going(monkeypatch, ctx):
    """The task's outage rule retries the cancel; the run never ends (and frees its host)
    while what it launched may still run."""
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(False))
    session = FakeSession(spec=specs.default_spec("G1"), cancel=True)
    ctx = replace(ctx, transport=FakeTransport(unreachable=True))
    with pytest.raises(InfrastructureError):
        driver.drive(session, ctx, budget_s=10, probe_names=[])
    assert not session.canceled


def test_the_host_answering_is_reported_once_per_drive(monkeypatch, ctx):
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(True))
    session = FakeSession(spec=specs.default_spec("G1"))
    driver.drive(session, ctx, budget_s=30, probe_names=["kernel"])
    assert session.answered


def test_the_engine_asking_for_more_appends_whole_repetitions(monkeypatch, ctx):
    monkeypatch.setattr(driver, "perform", lambda step, detail, c: StepProgress(True))
    document = specs.default_spec("G3")
    first_look = document["repetitions"]["min"]  # the plan runs up to the first look
    session = FakeSession(
        spec=document,
        answers=[Evaluation(False, more=2, first=first_look + 1), Evaluation(True)],
    )
    assert driver.drive(session, ctx, budget_s=60, probe_names=[]) is False
    repetitions = {s.get("repetition") for s in session.steps if s["kind"] == "bench"}
    assert repetitions == set(range(1, first_look + 3))
    assert len(session.evaluations) == 2
