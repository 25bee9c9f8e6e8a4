"""Filters for the pages: `{{ value|number }}`, `{{ seconds|duration }}`, `{{ time|moment }}`
(gates/pages/formatting.py says how each reads)."""

from __future__ import annotations

from django import template

from gates.pages import formatting

register = template.Library()
register.filter("number", formatting.number)
register.filter("shown", formatting.shown)
register.filter("share", formatting.share)
register.filter("duration", formatting.duration)
register.filter("moment", formatting.moment)
