"""Host onboarding over SSH, for the hosts page and the API alike: scan the key a host offers
(nothing pinned, nothing authenticated) and test a registered host's connection (audited).

The SSH I/O itself is runners.transport's; this module only adds the rules and the audit.
"""

from __future__ import annotations

from gates.errors import NotAllowedError, ServiceError
from gates.models import Host
from gates.services.audit import Actor, audit_record
from gates.services.hosts.access import ADDRESS_PATTERN, host_target
from gates.tenancy import Viewer
from runners.errors import RunnerError, SpecError
from runners.transport import CheckResult, ConnectionReport, check_connection, scan_host_key

# Onboarding runs inside a request: short timeouts keep a dead host from holding it.
SCAN_TIMEOUT_S = 5.0
CHECK_TIMEOUT_S = 5.0


def host_scan(*, viewer: Viewer, address: str, port: int) -> tuple[str, str]:
    """(key line, SHA256 fingerprint) the host at address:port presents, for a person to
    confirm with the host's owner before it is pinned."""
    if not viewer.can("host.manage"):
        raise NotAllowedError("hosts are managed by vendor staff")
    if not ADDRESS_PATTERN.match(address or ""):
        raise ServiceError("a host name or IP address is required", field="address")
    if not 1 <= port <= 65535:
        raise ServiceError("a TCP port from 1 to 65535", field="port")
    try:
        return scan_host_key(address, port, timeout=SCAN_TIMEOUT_S)
    except RunnerError as error:
        raise ServiceError(str(error), field="address", code="unreachable") from error


def host_connection_check(*, actor: Actor, viewer: Viewer, host: Host) -> ConnectionReport:
    """Reach, host key against the pin, authentication, shell, python3, the run directory,
    the profile's tools: one check each, in order; a failure is a failed check, not an error."""
    if not viewer.can("host.manage"):
        raise NotAllowedError("hosts are managed by vendor staff")
    if host.transport != Host.Transport.SSH:
        local = CheckResult("local", True, "runs on the service's own machine")
        return ConnectionReport(host.name, (local,))
    target = host_target(host, check_timeout_s=CHECK_TIMEOUT_S)
    run_dir = {**host.profile.parameters, **host.parameters}.get("run_root")
    try:
        report = check_connection(
            target, required_tools=host.profile.required_tools, run_dir=run_dir
        )
    except SpecError as problem:
        raise ServiceError(problem.reason, field=f"parameters.{problem.field}") from None
    audit_record(
        actor=actor,
        action="host.check",
        target=host,
        organization_id=host.organization_id,
        detail={"ok": report.ok, "failed": [c.name for c in report.checks if not c.ok]},
    )
    return report
