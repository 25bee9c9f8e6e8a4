"""What a worker needs to drive a run, as a typed runners.program.workorder.RunPlan: how to reach
the host, the profile's commands, and the values its templates are filled with. The profile is
read from the run's own snapshot (taken at run_create), never from the Profile row as it is now."""

from __future__ import annotations

from django.conf import settings

from gates.models import Engagement, Host, Run, WorkloadTrace
from gates.services.contract.inventory import accepted_inventory
from gates.services.hosts.access import (
    host_retry_window,
    host_target,
    run_profile_snapshot,
    run_values,
)
from runners.program.workorder import RunPlan
from runners.workloads import spec_context_tokens

DEFAULT_RUN_ROOT = "/tmp/tollgate"  # noqa: S108 (a per-run directory on the GPU host)


def run_execution(run: Run, *, inventory: bool = True) -> RunPlan:
    """Everything runners.program.driver needs for this run, without model instances. Every value is
    checked on the way (RunPlan refuses a bad one, naming it), before anything reaches the host.
    Without `inventory` the plan holds no accepted inventory: a soak tick reads the host and
    never runs the inventory check, and looking it up was four queries of every tick."""
    host = run.host
    profile = run.profile_snapshot or run_profile_snapshot(host)
    spec = run.spec.document
    model = run.gate.engagement.model_name
    values = run_values(host, spec, model_name=model, profile_parameters=profile["parameters"])
    equivalence = spec.get("equivalence", {})
    local = host.transport == Host.Transport.LOCAL
    return RunPlan(
        host_name=host.name,
        target=None if local else host_target(host),
        commands=profile["commands"],
        values=values,
        run_dir=f"{values.get('run_root', DEFAULT_RUN_ROOT)}/run-{run.pk}-{run.key.hex[:12]}",
        token=f"run-{run.key.hex}",
        probe_names=list(profile["commands"].get("probes", {})),
        prompts=equivalence.get("prompts", []),
        max_tokens=equivalence.get("max_tokens", 64),
        context_tokens=spec_context_tokens(spec),
        serve_timeout_s=spec.get("health", {}).get("timeout_s", settings.TOLLGATE_SERVE_TIMEOUT_S),
        retry_window_s=host_retry_window(host),
        keep_run_dir=host.parameters.get("keep_run_dir", False),
        accepted_inventory=None
        if run.gate.kind == "G1" or not inventory
        else accepted_inventory(run.gate.engagement),
        window_start=(run.started_at or run.created_at).timestamp(),
        trace_source=_trace_source(run.gate.engagement),
    )


def _trace_source(engagement: Engagement):
    """The engagement's stored trace bytes by SHA-256, read when the replay step asks (not
    each time a task builds the work order): a spec can only name an upload of its own
    engagement (refused at save otherwise), so the digest is looked up there alone."""

    def content(sha256: str) -> bytes:
        found = WorkloadTrace.objects.filter(engagement=engagement, sha256=sha256)
        data = found.values_list("content", flat=True).first()
        if data is None:
            raise LookupError(f"the engagement has no trace {sha256}")
        return bytes(data)

    return content
