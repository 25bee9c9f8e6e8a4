"""Filters for the pages: `{{ value|number }}`, `{{ seconds|duration }}`, `{{ time|moment }}`
(gates/pages/formatting.py says how each reads)."""

from __future__ import annotations

from django import template

from gates import figures
from gates.pages import formatting, overview

register = template.Library()
CHECK_RULES = overview.CHECK_RULES
register.filter("number", formatting.number)
register.filter("shown", formatting.shown)
register.filter("share", figures.share)
register.filter("duration", formatting.duration)
register.filter("moment", formatting.moment)
register.filter("said_once", formatting.said_once)
register.filter("fact", formatting.fact)
register.filter("fact_label", formatting.fact_label)
register.filter("verdict_words", overview.verdict_words)
register.filter("did_not_pass", overview.did_not_pass)
register.filter("qualifiers", overview.qualifiers)


@register.simple_tag
def clause_figures(clause: dict) -> dict[str, str]:
    """A G3 clause's bar, estimate and interval as gates.figures writes them (the chart and the
    PDF read the same): `{% clause_figures clause as shown %}`."""
    unit = clause.get("unit") or ""
    estimate, low, high = figures.estimate_interval(
        clause.get("estimate"), clause.get("low"), clause.get("high"), unit
    )
    has_interval = figures.finite(clause.get("low")) is not None or (
        figures.finite(clause.get("high")) is not None
    )
    return {
        "bar": figures.number(clause.get("threshold"), unit),
        "estimate": estimate,
        "interval": f"{low} to {high}" if has_interval else figures.DASH,
    }


@register.simple_tag
def check_figures(clause: dict) -> dict[str, str]:
    """A G1/G2/G4 check's comparison in words and its expected and observed values with their
    unit, as the PDF's clause table states them (gates.pages.report.tables)."""
    words, unit = CHECK_RULES.get(str(clause.get("metric")), (None, None))
    unit = clause.get("unit") or unit or ""
    unit = "" if unit == "version" else unit
    comparison = words or str(clause.get("comparison") or "").replace("_", " ") or figures.DASH
    return {
        "comparison": comparison,
        "expected": _with_unit(clause.get("expected"), unit),
        "observed": _with_unit(clause.get("observed"), unit),
    }


def _with_unit(value: object, unit: str) -> str:
    if figures.finite(value) is not None:
        return figures.number(value, unit)
    return formatting.shown(value)
