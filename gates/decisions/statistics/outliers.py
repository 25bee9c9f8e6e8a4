"""The pre-declared outlier rule of G3: a repetition whose server or client shows it was
disturbed (a failed-request spike beyond validity.max_failed_pct, or more preemptions than
statistics.outliers.max_preemptions) is set aside from every cell and re-run, up to
statistics.outliers.max_reruns; it is recorded and shown, never silently dropped. Beyond the
budget a disturbance keeps its validity verdict (the run is invalid).
Pure: plain dicts in and out; imports no Django.
"""

from __future__ import annotations

from documents.cell import ValidityCheck

DISTURBANCES = ("failed_pct", "preemptions")


def set_aside_disturbed(checks: list[ValidityCheck], max_reruns: int) -> dict[int, list[str]]:
    """The first `max_reruns` disturbed repetitions and why; their disturbance checks are marked
    `set_aside` so they no longer invalidate the run (other broken checks still do)."""
    disturbed: dict[int, list[str]] = {}
    for check in checks:
        repetition = check["repetition"]
        if repetition is not None and _is_disturbance(check):
            disturbed.setdefault(repetition, []).append(check["reason"])
    chosen = {rep: disturbed[rep] for rep in sorted(disturbed)[:max_reruns]}
    for check in checks:
        if _is_disturbance(check) and check["repetition"] in chosen:
            check["set_aside"] = True
    return chosen


def set_aside_notes(aside: dict[int, list[str]]) -> list[str]:
    return [
        f"repetition {rep} set aside and re-run (the spec's outlier rule): {'; '.join(reasons)}"
        for rep, reasons in aside.items()
    ]


def _is_disturbance(check: ValidityCheck) -> bool:
    return (
        check["ok"] is False
        and check["check"] in DISTURBANCES
        and check.get("repetition") is not None
    )
