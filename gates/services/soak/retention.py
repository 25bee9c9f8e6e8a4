"""G4 retention: the janitor's side. Once a soak's evidence is sealed (and the spec's grace has
passed), the raw files of the windows that tell nothing are deleted in bounded chunks; the
record of what was dropped is written first, so a bundle built meanwhile already says so. The
rule itself is pure (gates/evidence/retention.py); SoakSample rows and window lines stay.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from gates.models import Artifact, Decision, Soak
from runners.soak import collector
from runners.soak.retention import (
    kept_windows,
    ranges_seqs,
    raw_file_dropped,
    seq_ranges,
    window_flags,
)

logger = logging.getLogger(__name__)
CHUNK = 1000
# How long one janitor holds a soak; it renews the claim with every chunk it deletes.
CLAIM_S = 600
CANDIDATES = 100


@dataclass(frozen=True)
class PruneResult:
    run_id: int
    windows: int
    dropped_windows: int
    files: int
    bytes: int
    done: bool


def soaks_to_prune(*, now: datetime | None = None, limit: int = CANDIDATES) -> list[int]:
    """Run ids of ended soaks with a retention policy, not yet pruned, every decision on them
    sealed at least the policy's keep_after_sealed_days ago, and no live claim."""
    now = now or timezone.now()
    rows = (
        Soak.objects.filter(state=Soak.State.ENDED, pruned_at__isnull=True)
        .filter(Q(prune_until__isnull=True) | Q(prune_until__lt=now))
        .filter(run__spec__document__has_key="retention", run__decisions__isnull=False)
        .values_list("run_id", flat=True)
        .distinct()
        .order_by("run_id")[:limit]
    )
    return [run_id for run_id in rows if _due(run_id, now)]


def _due(run_id: int, now: datetime) -> bool:
    policy = _policy(run_id)
    if not policy:
        return False  # a spec without a policy keeps every raw file
    decisions = Decision.objects.filter(runs=run_id).select_related("seal", "spec")
    sealed = [getattr(decision, "seal", None) for decision in decisions]
    seals = [seal for seal in sealed if seal is not None]
    if not seals or len(seals) < len(sealed):
        return False  # until every decision's evidence is sealed, every raw file is kept
    grace = timedelta(days=policy["keep_after_sealed_days"])
    return all(seal.created_at + grace <= now for seal in seals)


def _policy(run_id: int) -> dict:
    document = Soak.objects.filter(run_id=run_id).values_list("run__spec__document", flat=True)
    return dict((document.first() or {}).get("retention") or {})


def soak_prune(*, run_id: int, budget_s: float, chunk: int = CHUNK) -> PruneResult | None:
    """Delete the dropped windows' raw files of one soak, `chunk` at a time, for at most
    `budget_s` (then the next janitor goes on). None when another holds it or it is done."""
    now = timezone.now()
    with transaction.atomic():
        claimed = (
            Soak.objects.filter(run_id=run_id, pruned_at__isnull=True)
            .filter(Q(prune_until__isnull=True) | Q(prune_until__lt=now))
            .update(prune_until=now + timedelta(seconds=CLAIM_S))
        )
        if not claimed:
            return None
        if not _due(run_id, now):  # a new decision not sealed yet: wait for it
            Soak.objects.filter(run_id=run_id).update(prune_until=None)
            return None
        soak = Soak.objects.get(run_id=run_id)
        if not soak.retention:
            soak.retention = retention_record(soak)
            soak.save(update_fields=["retention"])
    dropped = _dropped_artifacts(run_id, soak.retention)
    deadline = time.monotonic() + budget_s
    while dropped and time.monotonic() < deadline:
        batch, dropped = dropped[:chunk], dropped[chunk:]
        _delete(soak, batch)
    finished = not dropped
    Soak.objects.filter(pk=soak.pk).update(
        prune_until=None, **({"pruned_at": timezone.now()} if finished else {})
    )
    soak.refresh_from_db()
    result = PruneResult(
        run_id=run_id,
        windows=soak.retention["windows"],
        dropped_windows=soak.retention["dropped_windows"],
        files=soak.pruned_files,
        bytes=soak.pruned_bytes,
        done=finished,
    )
    logger.info(
        "soak of run %s: raw files of %d of %d windows dropped (%d files, %.1f MiB raw)%s",
        run_id,
        result.dropped_windows,
        result.windows,
        result.files,
        result.bytes / 2**20,
        "" if finished else "; more next time",
    )
    return result


def retention_record(soak: Soak) -> dict:
    """What the bundle signs: the policy, the windows stored, and the dropped seq ranges."""
    policy = soak.run.spec.document["retention"]
    rows = soak.run.soak_samples.values_list("seq", "metrics")
    flags = [window_flags(seq, metrics) for seq, metrics in rows.iterator(chunk_size=2000)]
    clauses = [c for d in soak.run.decisions.all() for c in (d.result or {}).get("clauses") or []]
    kept = kept_windows(flags, clauses, policy["keep_every_nth_window"])
    dropped = {row.seq for row in flags} - kept
    return {
        "policy": policy,
        "windows": len(flags),
        "kept_windows": len(kept),
        "dropped_windows": len(dropped),
        "dropped": seq_ranges(dropped),
    }


def _dropped_artifacts(run_id: int, record: dict) -> list[tuple[int, int]]:
    """(id, size) of every stored raw file of a dropped window, its line left out."""
    dropped = ranges_seqs(record["dropped"])
    rows = Artifact.objects.filter(run_id=run_id, name__startswith="soak/w").exclude(
        name__endswith="/" + collector.LINE_FILE
    )
    listed = rows.values_list("id", "name", "size").order_by("id").iterator(chunk_size=5000)
    return [(pk, size) for pk, name, size in listed if raw_file_dropped(name, dropped)]


def _delete(soak: Soak, batch: list[tuple[int, int]]) -> None:
    """One chunk, counted in the same transaction as its deletion (a crash loses neither)."""
    with transaction.atomic():
        ids = list(
            Artifact.objects.select_for_update()
            .filter(id__in=[pk for pk, _ in batch])
            .values_list("id", "size")
        )
        Artifact.objects.filter(id__in=[pk for pk, _ in ids]).delete()
        Soak.objects.filter(pk=soak.pk).update(
            pruned_files=F("pruned_files") + len(ids),
            pruned_bytes=F("pruned_bytes") + sum(size for _, size in ids),
            prune_until=timezone.now() + timedelta(seconds=CLAIM_S),
        )
