"""The soak page's data: a G4 run's stored windows as columns (gates/pages/soak/columns.py),
in hours since the soak's start, with its gaps, crashes and change points, handed to the pure
builders in gates.charts.g4.

`soak_series` (a JSON route beside the run page) draws a time range again: the page asks for
it when the reader zooms (full resolution once the range holds few enough windows) and polls
it while the soak runs.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from gates.charts import g4
from gates.models import Decision, Run, Soak
from gates.pages.soak.columns import NUMBERS, column, stored_columns
from gates.tenancy import get_visible_or_404, viewer_for_request

GIB = 2**30
MAX_RANGE_H = 24 * 365


def soak_page(run: Run, soak: Soak | None, *, full_resolution: bool = False) -> dict | None:
    """What templates/gates/_soak.html shows: the figure, the table, the crash list.
    `full_resolution` draws every window (the benchmark's naive page)."""
    if soak is None:
        return None
    points = None if full_resolution else g4.PAGE_POINTS
    data = soak_data(run, soak)
    return {
        "figure": g4.soak_figure(data, points=points),
        "table": g4.summary_rows(data),
        "crashes": data.crashes,
        "windows": data.total,
        "live": not run.is_ended,
        "points": points,
        "retention": {**soak.retention_summary(), "mib_freed": soak.pruned_bytes / 2**20},
    }


def soak_data(run: Run, soak: Soak, from_h: float | None = None, to_h: float | None = None):
    """The soak's stored windows in [from_h, to_h] hours since its start (all when not
    given), with the gaps, crashes and change points in view."""
    table = stored_columns(run, soak.last_seq)
    origin = _origin(run, soak, table)
    hours = (column(table, "epoch") - origin) / 3600
    view = np.ones(len(hours), dtype=bool)
    if from_h is not None:
        view &= hours >= from_h
    if to_h is not None:
        view &= hours <= to_h
    crashed = view & (column(table, "crashed") > 0)
    return g4.SoakData(
        hours=hours[view],
        values=_series({name: column(table, name)[view] for name in NUMBERS}),
        gaps=_gaps(soak, origin),
        crashes=[round(float(hour), g4.HOUR_DECIMALS) for hour in hours[crashed]],
        change_points=_change_points(run, soak, column(table, "seq"), hours),
        total=len(table),
    )


def _origin(run: Run, soak: Soak, table: np.ndarray) -> float:
    """The soak's start (epoch seconds): its clock, else its first window, else the run's."""
    if soak.started is not None:
        return soak.started
    if len(table):
        return float(column(table, "epoch")[0])
    return (run.started_at or datetime.now(tz=UTC)).timestamp()


def _series(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    requests = columns["completed"] + columns["failed"]
    with np.errstate(divide="ignore", invalid="ignore"):
        error_rate = np.where(requests > 0, 100 * columns["failed"] / requests, np.nan)
    return {
        "output_throughput": columns["output_throughput"],
        "ttft_p50_ms": columns["ttft_p50_ms"],
        "ttft_p99_ms": columns["ttft_p99_ms"],
        "error_rate_pct": error_rate,
        "kv_cache_usage_pct": 100 * columns["kv_cache_usage"],
        "offload_hit_rate_pct": 100 * columns["external_hit_rate"],
        "server_rss_gib": columns["memory_bytes"] / GIB,
        "host_available_gib": columns["host_available_bytes"] / GIB,
        "gpu_memory_gib": columns["gpu_memory_used_mib"] / 1024,
    }


def _gaps(soak: Soak, origin: float) -> list[dict]:
    return [
        {
            "start_h": round((gap["start"] - origin) / 3600, g4.HOUR_DECIMALS),
            "end_h": round((gap["end"] - origin) / 3600, g4.HOUR_DECIMALS),
            "cause": gap.get("cause", ""),
        }
        for gap in soak.gaps
    ]


def _change_points(
    run: Run, soak: Soak, seqs: np.ndarray, hours: np.ndarray
) -> dict[str, list[float]]:
    """From the decision once there is one, else from the provisional verdict."""
    decision = run.decisions.filter(kind=Decision.Kind.ENGINE).only("result").first()
    result = decision.result if decision is not None else soak.provisional

    def hour_of(seq) -> float | None:
        at = int(np.searchsorted(seqs, seq)) if isinstance(seq, int) else len(seqs)
        found = at < len(seqs) and seqs[at] == seq
        return round(float(hours[at]), g4.HOUR_DECIMALS) if found else None

    return g4.change_point_hours(result, hour_of)


def _range_param(request: HttpRequest, name: str) -> float | None:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise RangeError(name, "must be a number of hours") from None
    if not -MAX_RANGE_H <= value <= MAX_RANGE_H:
        raise RangeError(name, f"must be within ±{MAX_RANGE_H} hours")
    return value


class RangeError(ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@login_required
@require_GET
def soak_series(request: HttpRequest, pk: int) -> JsonResponse:
    """The soak's figure and table for ?from_h=&to_h= (hours since its start; both optional)."""
    viewer = viewer_for_request(request)
    run = get_visible_or_404(Run.objects.select_related("gate"), viewer, pk=pk)
    soak = Soak.objects.filter(run=run).first()
    if soak is None:
        raise Http404("this run is not a soak")
    try:
        from_h, to_h = _range_param(request, "from_h"), _range_param(request, "to_h")
    except RangeError as error:
        return JsonResponse({"detail": str(error), "field": error.field}, status=400)
    if from_h is not None and to_h is not None and to_h < from_h:
        problem = {"detail": "to_h: must not be before from_h", "field": "to_h"}
        return JsonResponse(problem, status=400)
    data = soak_data(run, soak, from_h, to_h)
    zoomed = (from_h, to_h) if from_h is not None and to_h is not None else None
    return JsonResponse(
        {
            "figure": g4.soak_figure(data, x_range=zoomed),
            "table": g4.summary_rows(data),
            "windows": data.total,
            "shown": len(data.hours),
            "live": not run.is_ended,
        }
    )
