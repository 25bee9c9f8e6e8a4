"""Pending host cleanups: what a run left on a host it could not reach when it ended, the
janitor's claim on each, and the lease rule that keeps such a host out of use until the
run's processes are gone (docs/transport.md "Pending cleanup").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F, Q
from django.utils import timezone

from gates.errors import ServiceError
from gates.models import Host, HostCleanup, Run
from gates.services.hosts.access import host_target
from runners.cleanup import HostLeftovers
from runners.transport import SshTarget

CLAIM_S = 180


class HostCleanupPendingError(ServiceError):
    """The host still runs what an earlier run left there; the janitor is retrying."""

    code = "host_cleanup_pending"
    status = 409


@dataclass(frozen=True)
class CleanupJob:
    """One claimed cleanup: how to reach the host and what to remove there."""

    cleanup_id: int
    claim: datetime
    host_name: str
    target: SshTarget | None
    leftovers: HostLeftovers


def host_cleanup_record(*, run: Run, leftovers: HostLeftovers, problem: str) -> HostCleanup:
    """Record (or refresh) the pending cleanup of a run that ends while its host is away.
    A failing run records it while it still holds the lease, so no other run can lease the
    host in between; a run that ended normally had its servers stopped by its plan already."""
    cleanup, _ = HostCleanup.objects.update_or_create(
        run=run,
        defaults={
            "host_id": run.host_id,
            "run_dir": leftovers.run_dir,
            "token": leftovers.token,
            "launched_dirs": list(leftovers.launched_dirs),
            "keep_run_dir": leftovers.keep_run_dir,
            "last_problem": problem[:5000],
            "done_at": None,
        },
    )
    return cleanup


def host_cleanups_due() -> list[int]:
    """Pending cleanups no live janitor holds; the least tried first, so a host that stays
    away for days never starves a fresh cleanup of the janitor's time."""
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=timezone.now())
    due = HostCleanup.objects.filter(free, done_at__isnull=True)
    due = due.order_by("attempts", "created_at", "id")
    return list(due.values_list("id", flat=True))


def host_cleanup_claim(*, cleanup_id: int) -> CleanupJob | None:
    """Claim one pending cleanup by id (a conditional UPDATE); None when done or held."""
    now = timezone.now()
    # The claim is its own expiry, to the microsecond: only its holder knows it.
    until = now + timedelta(seconds=CLAIM_S)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    claimed = HostCleanup.objects.filter(free, pk=cleanup_id, done_at__isnull=True).update(
        claimed_until=until, attempts=F("attempts") + 1
    )
    if claimed != 1:
        return None
    cleanup = HostCleanup.objects.select_related("host").get(pk=cleanup_id)
    host = cleanup.host
    leftovers = HostLeftovers(
        run_dir=cleanup.run_dir,
        token=cleanup.token,
        keep_run_dir=cleanup.keep_run_dir,
        launched_dirs=tuple(cleanup.launched_dirs),
    )
    local = host.transport == Host.Transport.LOCAL
    return CleanupJob(
        cleanup_id=cleanup.pk,
        claim=until,
        host_name=host.name,
        target=None if local else host_target(host),
        leftovers=leftovers,
    )


def host_cleanup_finish(*, job: CleanupJob, problems: list[str]) -> bool:
    """Mark the cleanup done (no problems) or note why it must wait; True when done. Only the
    claim's holder writes; a second run of the same job finds it done and changes nothing."""
    mine = HostCleanup.objects.filter(
        pk=job.cleanup_id, done_at__isnull=True, claimed_until=job.claim
    )
    if problems:
        mine.update(last_problem="\n".join(problems)[:5000], claimed_until=None)
        return False
    return mine.update(done_at=timezone.now(), last_problem="", claimed_until=None) == 1


def host_cleanup_pending(host_id: int) -> HostCleanup | None:
    return HostCleanup.objects.filter(host_id=host_id, done_at__isnull=True).first()


def host_require_clean(host_id: int) -> None:
    """Refuse to lease a host where an earlier run's processes may still run."""
    pending = host_cleanup_pending(host_id)
    if pending is None:
        return
    raise HostCleanupPendingError(
        f"host has a pending cleanup from run {pending.run_id}: its processes could not be "
        f"stopped when it ended ({pending.last_problem[:300] or 'host unreachable'}); the "
        "janitor retries until they are gone, and the host can be leased again then",
        field="host",
    )
