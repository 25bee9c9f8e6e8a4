"""bench/soak_fleet.py's figures from the tick records (bench/soak_fleet_app.py): each claimed
tick's lateness against its due time, duplicates, the share on time, and the side-by-side table.
Pure: no I/O but printing the table. A helper of the bench, not a bench."""

from __future__ import annotations

TICK_S = 30.0  # TOLLGATE_SOAK_TICK_S, as the bench runs it
SWEEP_S = 10.0  # the beat's tick-soaks sweep (config/queues.py)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def analyse(
    ticks: list[dict],
    first_due: dict[int, float],
    *,
    start: float,
    warmup: float,
    end: float,
    sweep_s: float = SWEEP_S,
) -> dict:
    """Lateness of each claimed tick against its due time; a soak's next tick is due
    TICK_S after its last release. Ticks due during the warm-up (each worker process opens
    its connections then) are left out of the lateness figures, counted still."""
    claimed = sorted((t for t in ticks if t.get("claimed")), key=lambda t: t["claim_at"])
    by_soak: dict[int, list[dict]] = {}
    for tick in claimed:
        by_soak.setdefault(tick["run_id"], []).append(tick)
    lateness, duplicates, ticked, due_ticks, missed = [], 0, 0, 0, 0
    measured_from = start + warmup
    for run_id, due in first_due.items():
        for tick in by_soak.get(run_id, []):
            late = tick["claim_at"] - due
            duplicates += late < -0.5  # claimed before it was due: a second tick
            if due >= measured_from:
                lateness.append(late)
                ticked, due_ticks = ticked + 1, due_ticks + 1
            due = tick.get("release_at", tick["end"]) + TICK_S
        if measured_from <= due < end - TICK_S:
            lateness.append(end - due)  # due, never ticked by the end: at least this late
            due_ticks += 1
        missed += run_id not in by_soak
    on_time = sum(late < TICK_S for late in lateness) / max(len(lateness), 1)
    wall = [1000 * (t["end"] - t["start"]) for t in claimed]
    cpu = [1000 * t["cpu"] for t in claimed]
    return {
        "claimed_all": len(claimed),
        "ticks_vs_due": f"{ticked} / {due_ticks}",
        "expected_ticks": int(len(first_due) * (end - measured_from) / TICK_S),
        "lateness_p50_s": _quantile(lateness, 0.5),
        "lateness_p99_s": _quantile(lateness, 0.99),
        "lateness_max_s": max(lateness, default=float("nan")),
        "on_time_30s": on_time,
        "on_time_sweep": sum(late <= sweep_s for late in lateness) / max(len(lateness), 1),
        "soaks_missed": missed,
        "duplicates": duplicates,
        "dropped": sum(1 for t in ticks if not t.get("claimed")),
        "tick_ms_p50_p99": f"{_quantile(wall, 0.5):.0f} / {_quantile(wall, 0.99):.0f}",
        "tick_cpu_ms_p50": _quantile(cpu, 0.5),
        "holds": on_time >= 0.999 and missed == 0,
    }


def print_table(results: list[dict]) -> None:
    rows = [
        ("worker processes", "processes", "{}"),
        ("soaks", "soaks", "{}"),
        ("ticks claimed / due", "ticks_vs_due", "{}"),
        ("lateness p50 (s)", "lateness_p50_s", "{:.2f}"),
        ("lateness p99 (s)", "lateness_p99_s", "{:.2f}"),
        ("lateness max (s)", "lateness_max_s", "{:.2f}"),
        ("on time, within 30 s", "on_time_30s", "{:.1%}"),
        ("within one beat sweep (10 s)", "on_time_sweep", "{:.1%}"),
        ("soaks never ticked", "soaks_missed", "{}"),
        ("duplicate ticks", "duplicates", "{}"),
        ("messages dropped by the claim", "dropped", "{}"),
        ("queue depth max / at end", "queue_depth_max_end", "{}"),
        ("tick wall p50 / p99 (ms)", "tick_ms_p50_p99", "{}"),
        ("worker CPU per tick (ms)", "worker_cpu_ms_per_tick", "{:.1f}"),
        ("  its tick process's, p50 (ms)", "tick_cpu_ms_p50", "{:.1f}"),
        ("host side CPU per tick (ms)", "host_cpu_ms_per_tick", "{:.1f}"),
        ("PostgreSQL CPU per tick (ms)", "postgres_cpu_ms_per_tick", "{:.1f}"),
        ("worker CPU busy (of its CPUs)", "worker_cpu_share", "{:.0%}"),
        ("soaks a worker core holds (30 s / CPU)", "soaks_per_worker_core", "{}"),
        ("holds the 30 s schedule", "holds", "{}"),
        ("load average (1 min) at start / end", "load", "{}"),
    ]
    print()
    for label, key, form in rows:
        cells = [form.format(result[key]) for result in results]
        print(f"{label:<42}" + "".join(f"{cell:>18}" for cell in cells))
