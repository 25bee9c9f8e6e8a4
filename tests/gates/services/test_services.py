from __future__ import annotations

import pytest
from django.db import IntegrityError
from django.utils import timezone

from gates import services
from gates.errors import (
    FrozenSpecError,
    HostBusyError,
    IllegalTransitionError,
    LeaseLostError,
    NotAllowedError,
    ServiceError,
    SpecInvalidError,
)
from gates.models import (
    Alert,
    AuditEvent,
    Decision,
    Engagement,
    Gate,
    GateSpec,
    Host,
    Run,
    Verdict,
)
from gates.specs import validation as specs
from gates.tenancy import viewer_for_user
from tests.conftest import make_host
from tests.contract import sign_as_both

pytestmark = pytest.mark.django_db


def start_run(actor, vendor_viewer, gate, host):
    sign_as_both(gate)
    return services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)


def decide(run, verdict):
    return services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": []})


def soak_run(gate):
    """A running G4 run as its program will make one: no service starts G4 runs yet."""
    Gate.objects.filter(pk=gate.pk).update(state=Gate.State.RUNNING)
    return Run.objects.create(
        gate=gate,
        spec=gate.current_spec,
        attempt=1,
        source=Run.Source.UPLOAD,
        state=Run.State.RUNNING,
        started_at=timezone.now(),
    )


class TestEngagementCreate:
    def test_it_creates_four_gates_with_g1_ready_and_version_one_specs(self, engagement):
        gates = list(engagement.gates.order_by("position"))
        assert [g.kind for g in gates] == ["G1", "G2", "G3", "G4"]
        assert [g.state for g in gates] == ["ready", "locked", "locked", "locked"]
        for gate in gates:
            spec = gate.current_spec
            assert spec.version == 1
            assert spec.digest == specs.spec_digest(spec.document)
            assert specs.validate_spec(gate.kind, spec.document) == []

    def test_it_writes_nothing_when_a_gate_cannot_be_created(
        self, actor, customer_org, monkeypatch
    ):
        original = specs.default_spec

        def missing_g3_template(kind):
            if kind == "G3":
                raise RuntimeError("template missing")
            return original(kind)

        monkeypatch.setattr(specs, "default_spec", missing_g3_template)
        with pytest.raises(RuntimeError):
            services.engagement_create(
                actor=actor, organization=customer_org, title="t", model_name="m"
            )
        assert not Engagement.objects.exists()
        assert not Gate.objects.exists()

    def test_it_refuses_a_vendor_organization(self, actor, vendor_org):
        with pytest.raises(ServiceError) as error:
            services.engagement_create(
                actor=actor, organization=vendor_org, title="t", model_name="m"
            )
        assert error.value.field == "organization"

    def test_it_is_audited(self, engagement):
        assert (
            AuditEvent.objects.filter(
                action="engagement.create", target_id=str(engagement.pk)
            ).count()
            == 1
        )


class TestGateSpecs:
    def test_an_update_makes_a_new_version_and_keeps_the_old(self, actor, engagement):
        gate = engagement.gates.get(kind="G4")
        document = specs.default_spec("G4")
        document["duration_h"] = 24
        spec = services.gate_spec_update(actor=actor, gate=gate, document=document)
        assert spec.version == 2 and spec.document["version"] == 2
        assert gate.specs.get(version=1).document["duration_h"] == 72

    def test_an_invalid_spec_is_refused_naming_the_field_and_nothing_is_written(
        self, actor, engagement
    ):
        gate = engagement.gates.get(kind="G1")
        document = specs.default_spec("G1")
        document["expect"]["gpu_count"] = -3
        with pytest.raises(SpecInvalidError) as error:
            services.gate_spec_update(actor=actor, gate=gate, document=document)
        assert error.value.field == "expect.gpu_count"
        assert gate.specs.count() == 1

    def test_signing_records_the_party_and_freezes_the_version(
        self, actor, vendor_viewer, customer_owner, engagement
    ):
        spec = engagement.gates.get(kind="G1").current_spec
        services.gate_spec_sign(actor=actor, viewer=vendor_viewer, spec=spec)
        owner = viewer_for_user(customer_owner)
        spec = services.gate_spec_sign(
            actor=services.Actor(user=customer_owner), viewer=owner, spec=spec
        )
        assert spec.is_frozen and spec.fully_signed
        assert spec.customer_signed_by == customer_owner

    def test_a_customer_viewer_cannot_sign(self, actor, customer_viewer, engagement):
        spec = engagement.gates.get(kind="G1").current_spec
        with pytest.raises(NotAllowedError):
            services.gate_spec_sign(actor=actor, viewer=viewer_for_user(customer_viewer), spec=spec)

    def test_editing_a_frozen_version_in_place_is_refused(self, actor, vendor_viewer, engagement):
        spec = engagement.gates.get(kind="G1").current_spec
        services.gate_spec_sign(actor=actor, viewer=vendor_viewer, spec=spec)
        spec.refresh_from_db()
        spec.document["expect"]["gpu_count"] = 4
        with pytest.raises(FrozenSpecError):
            spec.save()
        assert GateSpec.objects.get(pk=spec.pk).document["expect"]["gpu_count"] == 8


class TestRuns:
    def test_creating_a_run_leases_the_host_and_freezes_the_spec(
        self, actor, vendor_viewer, engagement, host
    ):
        gate = engagement.gates.get(kind="G1")
        run = start_run(actor, vendor_viewer, gate, host)
        host.refresh_from_db()
        assert host.lease_run_id == run.pk and run.lease_token == host.fencing_token == 1
        assert run.spec.frozen_at is not None
        gate.refresh_from_db()
        assert gate.state == Gate.State.RUNNING

    def test_a_second_lease_on_a_busy_host_is_refused_and_nothing_is_written(
        self, actor, vendor_viewer, engagement, other_engagement, host
    ):
        start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        shared = Host.objects.create(
            organization=host.organization,
            name="gpu-2",
            transport="local",
            profile=host.profile,
        )
        # Another engagement of the same customer tries the busy host.
        second = services.engagement_create(
            actor=actor, organization=host.organization, title="second", model_name="m"
        )
        runs_before = Run.objects.count()
        with pytest.raises(HostBusyError) as error:
            start_run(actor, vendor_viewer, second.gates.get(kind="G1"), host)
        assert "one run per host" in error.value.detail
        assert Run.objects.count() == runs_before
        assert second.gates.get(kind="G1").state == Gate.State.READY
        assert start_run(actor, vendor_viewer, second.gates.get(kind="G1"), shared)

    def test_a_host_of_another_organization_is_refused(
        self, actor, vendor_viewer, engagement, other_customer_org
    ):
        foreign = make_host(other_customer_org, name="foreign")
        with pytest.raises(ServiceError) as error:
            start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), foreign)
        assert error.value.field == "host"

    def test_a_locked_gate_cannot_start(self, actor, vendor_viewer, engagement, host):
        with pytest.raises(IllegalTransitionError):
            start_run(actor, vendor_viewer, engagement.gates.get(kind="G3"), host)

    def test_a_customer_viewer_cannot_start_runs(self, actor, customer_viewer, engagement, host):
        with pytest.raises(NotAllowedError):
            services.run_create(
                actor=actor,
                viewer=viewer_for_user(customer_viewer),
                gate=engagement.gates.get(kind="G1"),
                host=host,
            )

    def test_claiming_twice_returns_nothing_the_second_time(
        self, actor, vendor_viewer, engagement, host
    ):
        run = start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        assert services.run_claim(run_id=run.pk).state == Run.State.RUNNING
        assert services.run_claim(run_id=run.pk) is None

    def test_an_infra_error_ends_the_run_releases_the_lease_and_reopens_the_gate(
        self, actor, vendor_viewer, engagement, host
    ):
        gate = engagement.gates.get(kind="G1")
        run = start_run(actor, vendor_viewer, gate, host)
        services.run_claim(run_id=run.pk)
        services.run_fail(run_id=run.pk, outcome=Run.Outcome.INFRA_ERROR, reason="ssh timeout")
        run.refresh_from_db()
        host.refresh_from_db()
        gate.refresh_from_db()
        assert (run.state, run.outcome) == (Run.State.FINISHED, Run.Outcome.INFRA_ERROR)
        assert host.lease_run_id is None
        assert (gate.state, gate.verdict) == (Gate.State.READY, Verdict.PENDING)
        assert Alert.objects.filter(event="run_error", run=run).count() == 1

    def test_run_fail_on_a_finished_run_does_nothing(self, actor, vendor_viewer, engagement, host):
        run = start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        services.run_claim(run_id=run.pk)
        decide(run, Verdict.PASS)
        assert services.run_fail(run_id=run.pk, outcome="infra_error", reason="late") is None
        run.refresh_from_db()
        assert run.outcome == Run.Outcome.COMPLETED

    def test_a_run_that_lost_its_lease_cannot_record(self, actor, vendor_viewer, engagement, host):
        run = start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        services.run_claim(run_id=run.pk)
        # Someone (the reaper, an operator) handed the lease on: the fencing token moved.
        Host.objects.filter(pk=host.pk).update(fencing_token=run.lease_token + 1)
        with pytest.raises(LeaseLostError):
            decide(run, Verdict.PASS)
        with pytest.raises(LeaseLostError):  # nor its progress
            services.RunSession.claim(run.pk).append_steps([{"name": "probe", "kind": "probe"}])
        assert not Decision.objects.filter(gate=run.gate).exists()

    def test_a_pass_opens_the_next_gate(self, actor, vendor_viewer, engagement, host):
        run = start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        services.run_claim(run_id=run.pk)
        decide(run, Verdict.PASS)
        states = dict(engagement.gates.values_list("kind", "state"))
        assert states == {"G1": "decided", "G2": "ready", "G3": "locked", "G4": "locked"}
        with pytest.raises(IllegalTransitionError):
            start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)

    def test_passing_g4_passes_the_engagement(self, actor, vendor_viewer, engagement, host):
        for kind in ("G1", "G2", "G3"):
            run = start_run(actor, vendor_viewer, engagement.gates.get(kind=kind), host)
            services.run_claim(run_id=run.pk)
            decide(run, Verdict.PASS)
        decide(soak_run(engagement.gates.get(kind="G4")), Verdict.PASS)
        engagement.refresh_from_db()
        assert engagement.state == Engagement.State.PASSED

    def test_an_uploaded_soak_is_refused_and_nothing_is_written(
        self, actor, vendor_viewer, engagement, host
    ):
        gate = engagement.gates.get(kind="G4")
        Gate.objects.filter(pk=gate.pk).update(state=Gate.State.READY)
        with pytest.raises(services.GateNotRunnableError) as error:
            services.run_create(
                actor=actor, viewer=vendor_viewer, gate=gate, host=None, source=Run.Source.UPLOAD
            )
        assert (error.value.code, error.value.status, error.value.field) == (
            "not_runnable",
            409,
            "upload",
        )
        assert "G4" in error.value.detail
        host.refresh_from_db()
        assert not Run.objects.exists()
        assert (host.lease_run_id, host.fencing_token) == (None, 0)
        assert Gate.objects.get(pk=gate.pk).state == Gate.State.READY
        assert gate.current_spec.frozen_at is None
        assert not AuditEvent.objects.filter(action="run.create").exists()

    def test_failures_up_to_the_budget_open_stop_loss_review(
        self, actor, vendor_viewer, engagement, host
    ):
        gate = engagement.gates.get(kind="G1")  # default budget: 2 attempts
        for attempt in (1, 2):
            run = start_run(actor, vendor_viewer, gate, host)
            services.run_claim(run_id=run.pk)
            decide(run, Verdict.FAIL)
            gate.refresh_from_db()
            assert gate.stop_loss_review is (attempt == 2)
        assert Alert.objects.filter(event="stop_loss_review", gate=gate).count() == 1
        with pytest.raises(IllegalTransitionError):
            start_run(actor, vendor_viewer, gate, host)

    def test_invalid_and_infra_verdicts_do_not_count_toward_stop_loss(
        self, actor, vendor_viewer, engagement, host
    ):
        gate = engagement.gates.get(kind="G1")
        for verdict in (Verdict.INVALID, Verdict.INCONCLUSIVE, Verdict.FAIL):
            run = start_run(actor, vendor_viewer, gate, host)
            services.run_claim(run_id=run.pk)
            decide(run, verdict)
        gate.refresh_from_db()
        assert not gate.stop_loss_review


class TestStopLossReview:
    @pytest.fixture
    def failed_gate(self, actor, vendor_viewer, engagement, host):
        gate = engagement.gates.get(kind="G1")
        for _ in range(2):
            run = start_run(actor, vendor_viewer, gate, host)
            services.run_claim(run_id=run.pk)
            decide(run, Verdict.FAIL)
        return Gate.objects.get(pk=gate.pk)

    def test_a_waiver_needs_a_written_justification(self, actor, vendor_viewer, failed_gate):
        with pytest.raises(ServiceError) as error:
            services.gate_waive(
                actor=actor, viewer=vendor_viewer, gate=failed_gate, justification="ok"
            )
        assert error.value.field == "justification"

    def test_a_waiver_opens_the_next_gate_and_is_recorded(self, actor, vendor_viewer, failed_gate):
        services.gate_waive(
            actor=actor,
            viewer=vendor_viewer,
            gate=failed_gate,
            justification="Customer accepts G1 drift: one spare GPU is fine.",
        )
        states = dict(failed_gate.engagement.gates.values_list("kind", "state"))
        assert states["G1"] == "waived" and states["G2"] == "ready"
        assert Decision.objects.filter(gate=failed_gate, kind="waiver").count() == 1
        assert AuditEvent.objects.filter(action="gate.waive").count() == 1

    def test_stopping_ends_the_engagement(self, actor, vendor_viewer, failed_gate):
        services.engagement_stop(
            actor=actor,
            viewer=vendor_viewer,
            gate=failed_gate,
            justification="Offload does not pay at the customer's load.",
        )
        failed_gate.engagement.refresh_from_db()
        assert failed_gate.engagement.state == Engagement.State.STOPPED
        assert Alert.objects.filter(event="engagement_stop").count() == 1

    def test_only_a_vendor_admin_may_review(self, actor, vendor_engineer, failed_gate):
        with pytest.raises(NotAllowedError):
            services.gate_waive(
                actor=actor,
                viewer=viewer_for_user(vendor_engineer),
                gate=failed_gate,
                justification="x" * 40,
            )


class TestAppendOnly:
    def test_decisions_cannot_be_changed_through_the_orm(
        self, actor, vendor_viewer, engagement, host
    ):
        run = start_run(actor, vendor_viewer, engagement.gates.get(kind="G1"), host)
        services.run_claim(run_id=run.pk)
        decision = decide(run, Verdict.PASS)
        decision.verdict = Verdict.FAIL
        with pytest.raises(Exception, match="append-only"):
            decision.save()
        with pytest.raises(Exception, match="append-only"):
            Decision.objects.filter(pk=decision.pk).delete()

    def test_the_database_refuses_raw_updates_of_the_audit_trail(self, engagement):
        from django.db import connection, transaction

        with (
            pytest.raises(IntegrityError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("UPDATE gates_auditevent SET action = 'forged'")
        assert not AuditEvent.objects.filter(action="forged").exists()

    @pytest.mark.parametrize(
        "table",
        [
            "gates_auditevent",
            "gates_decision",
            "gates_evidenceseal",
            "gates_evidencesignature",
            "gates_inventoryamendment",
            "gates_inventorysignature",
            "gates_publicationconsent",
        ],
    )
    def test_the_migrations_made_each_signed_record_append_only_in_the_database(self, table):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [table],
            )
            assert (f"{table}_append_only",) in cursor.fetchall()


def test_a_canceled_run_leaves_no_step_started(actor, vendor_viewer, engagement, host):
    from gates.models import RunStep

    run = services.run_create(
        actor=actor, viewer=vendor_viewer, gate=engagement.gates.get(kind="G1"), host=host
    )
    services.run_claim(run_id=run.pk)
    RunStep.objects.create(run=run, position=0, name="probe gpu", state="done")
    RunStep.objects.create(run=run, position=1, name="probe disk", state="started")
    RunStep.objects.create(run=run, position=2, name="probe vllm")
    services.run_mark_canceled(run_id=run.pk)
    states = dict(run.steps.values_list("name", "state"))
    assert states == {"probe gpu": "done", "probe disk": "canceled", "probe vllm": "pending"}
    assert run.steps.get(name="probe disk").finished_at is not None
