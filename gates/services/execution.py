"""What a worker needs to drive a run, as a typed runners.execution.RunPlan: how to reach the
host, the profile's commands, and the values its templates are filled with."""

from __future__ import annotations

from django.conf import settings

from gates.models import Host, Run
from gates.services.hosts import host_credential
from runners.execution import RunPlan
from runners.transport import SshTarget
from runners.workloads import spec_context_tokens

DEFAULT_RUN_ROOT = "/tmp/tollgate"  # noqa: S108 (a per-run directory on the GPU host)
DEFAULT_PYTHON = "/usr/bin/python3"


def run_execution(run: Run) -> RunPlan:
    """Everything runners.driver needs for this run, without model instances."""
    host = run.host
    profile = host.profile
    spec = run.spec.document
    values = {
        "python": DEFAULT_PYTHON,
        "model": run.gate.engagement.model_name,
        **profile.parameters,
        **spec.get("server", {}),
        **host.parameters,
    }
    run_root = str(values.get("run_root", DEFAULT_RUN_ROOT)).rstrip("/")
    equivalence = spec.get("equivalence", {})
    local = host.transport == Host.Transport.LOCAL
    return RunPlan(
        host_name=host.name,
        target=None if local else host_target(host),
        commands=profile.commands,
        values=values,
        run_dir=f"{run_root}/run-{run.pk}-{run.key.hex[:12]}",
        token=f"run-{run.key.hex}",
        probe_names=list(profile.commands.get("probes", {})),
        prompts=equivalence.get("prompts", []),
        max_tokens=equivalence.get("max_tokens", 64),
        context_tokens=spec_context_tokens(spec),
        serve_timeout_s=spec.get("health", {}).get("timeout_s", settings.TOLLGATE_SERVE_TIMEOUT_S),
    )


def host_target(host: Host, **timeouts: float) -> SshTarget:
    """How to reach an SSH host, for runners.transport: the key decrypted in memory only
    (SshTarget keeps it out of repr)."""
    private_key = host_credential(host)
    return SshTarget(
        name=host.name,
        address=host.address,
        port=host.port,
        username=host.username,
        host_key=host.host_key,
        private_key=private_key,
        key_path=None if private_key else host.key_file_path or None,
        **timeouts,
    )
