"""Workload traces: an upload validated by the streaming readers and stored with its SHA-256
(nothing stored when a line is refused), then characterised by a task with done/total progress.
The reading and the figures are runners.traces (pure); this module only stores them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from gates.errors import DuplicateError, NotAllowedError, ServiceError
from gates.models import Engagement, WorkloadTrace
from gates.services import pokes
from gates.services.audit import Actor, audit_record
from gates.services.worklist import worklist_claim, worklist_stale
from gates.specs.fields import WORKLOAD_PATHS
from gates.tenancy import Viewer
from runners.traces.characterize import characterize
from runners.traces.readers.formats import FORMATS, read_trace_bytes, trace_block_tokens
from runners.traces.records import TraceError, TraceRecord

# An upload is held in memory once and stored in one row: about a 3-million-line Mooncake trace.
MAX_TRACE_BYTES = 256 * 1024 * 1024
# A claim older than this belongs to a worker that died: the sweep's poke takes it over.
STALE_CLAIM = timedelta(minutes=15)
PROGRESS_EVERY = 2000  # requests between progress writes


def trace_upload(
    *,
    actor: Actor,
    viewer: Viewer,
    engagement: Engagement,
    name: str,
    content: bytes,
    trace_format: str,
    block_tokens: int | None = None,
) -> WorkloadTrace:
    """Validate every line, then store the file with its digest and poke its characterisation.
    A refused line raises ServiceError naming `line L, field F`; nothing is stored."""
    if not viewer.can("trace.upload"):
        raise NotAllowedError("only vendor engineers and customer owners may upload traces")
    if trace_format not in FORMATS:
        raise ServiceError(f"unknown format {trace_format!r}", field="format")
    if len(content) > MAX_TRACE_BYTES:
        raise ServiceError("larger than 256 MiB", field="file")
    block = trace_block_tokens(trace_format, block_tokens)
    requests = _count_valid(read_trace_bytes(content, trace_format, block))
    digest = hashlib.sha256(content).hexdigest()
    try:
        with transaction.atomic():
            trace = WorkloadTrace.objects.create(
                engagement=engagement,
                name=name[:200],
                format=trace_format,
                block_tokens=block,
                sha256=digest,
                size=len(content),
                content=content,
                requests=requests,
                uploaded_by=actor.user,
            )
            audit_record(
                actor=actor,
                action="trace.upload",
                target=trace,
                organization_id=engagement.organization_id,
                detail={"sha256": digest, "format": trace_format, "requests": requests},
            )
            pokes.poke_on_commit(pokes.CHARACTERIZE_TRACE, trace.pk)
    except IntegrityError:
        raise DuplicateError(
            f"this engagement already has the trace sha256:{digest}", field="file"
        ) from None
    return trace


def _count_valid(records: Iterator[TraceRecord]) -> int:
    """Read every record (the readers check each line as they go); a refusal names the line."""
    count = 0
    try:
        count = sum(1 for _ in records)
    except TraceError as error:
        raise ServiceError(
            f"line {error.line}, field {error.field}: {error.message}", field=error.field
        ) from None
    except UnicodeDecodeError as error:
        raise ServiceError(f"not UTF-8 text: {error.reason}", field="file") from None
    if count == 0:
        raise ServiceError("the trace holds no requests", field="file")
    return count


def trace_claim(trace_id: int) -> bool:
    """Take the characterisation up; False when it is done or another worker holds it."""
    waiting = WorkloadTrace.objects.filter(state=WorkloadTrace.State.CHARACTERIZING)
    return worklist_claim(waiting, trace_id, STALE_CLAIM, progress_done=0)


def trace_characterize(trace_id: int) -> None:
    """Characterise a claimed trace and store the figures (or why it could not)."""
    trace = WorkloadTrace.objects.get(pk=trace_id)
    records = _with_progress(
        read_trace_bytes(bytes(trace.content), trace.format, trace.block_tokens), trace_id
    )
    try:
        profile = characterize(
            records,
            block_tokens=trace.block_tokens,
            chained_ids=FORMATS[trace.format].chained_ids,
        )
    except (TraceError, UnicodeDecodeError) as error:  # validated at upload: a reader changed
        _finish(trace_id, state=WorkloadTrace.State.FAILED, error=str(error))
        return
    _finish(trace_id, state=WorkloadTrace.State.READY, profile=profile.to_dict())


def traces_to_characterize() -> list[int]:
    """Traces still waiting with no live claim: the beat sweep pokes them again."""
    waiting = WorkloadTrace.objects.filter(state=WorkloadTrace.State.CHARACTERIZING)
    return worklist_stale(waiting, STALE_CLAIM)


def _with_progress(records: Iterator[TraceRecord], trace_id: int) -> Iterator[TraceRecord]:
    for done, record in enumerate(records, start=1):
        yield record
        if done % PROGRESS_EVERY == 0:  # progress renews the claim: a long trace is not stale
            progress = {"progress_done": done, "claimed_at": timezone.now()}
            WorkloadTrace.objects.filter(pk=trace_id).update(**progress)


def _finish(trace_id: int, **fields: object) -> None:
    waiting = WorkloadTrace.objects.filter(pk=trace_id, state=WorkloadTrace.State.CHARACTERIZING)
    waiting.update(progress_done=F("requests"), **fields)


def spec_trace_check(engagement: Engagement, document: dict) -> None:
    """Refuse a spec whose workload names a trace this engagement has no upload of, or names
    it with another format or block size than it was uploaded with; the field is named."""
    for path, trace in _spec_traces(document):
        stored = engagement.traces.filter(sha256=trace["sha256"]).first()
        if stored is None:
            raise ServiceError(
                f"this engagement has no trace with sha256 {trace['sha256']}: upload it first",
                field=f"{path}.sha256",
            )
        if trace["format"] != stored.format:
            raise ServiceError(f"the trace was uploaded as {stored.format}", field=f"{path}.format")
        if "block_tokens" in trace and trace["block_tokens"] != stored.block_tokens:
            raise ServiceError(
                f"the trace was uploaded with block_tokens {stored.block_tokens}",
                field=f"{path}.block_tokens",
            )


def _spec_traces(document: dict) -> Iterator[tuple[str, dict]]:
    for path in WORKLOAD_PATHS:
        section: object = document
        for part in path.split("."):
            section = section.get(part) if isinstance(section, dict) else None
        if isinstance(section, dict) and isinstance(section.get("trace"), dict):
            yield f"{path}.trace", section["trace"]
