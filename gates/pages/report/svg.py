"""Plotly figures as static SVG, for the PDF report (WeasyPrint runs no JavaScript).

Kaleido, Plotly's own exporter, draws the very figure dicts the pages embed with the same
plotly.js the pages load (our static copy: never a CDN, and MathJax off), in a headless Chromium
it starts through choreographer (the system `chromium`, or BROWSER_PATH). One browser renders
every figure of a report. I/O: a browser subprocess; nothing else here.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kaleido
from django.contrib.staticfiles import finders

from config.staticfinders import PLOTLY_STATIC_PATH

logger = logging.getLogger(__name__)

# Wide enough for the forest plot's labels at A4 width (the PDF scales the SVG to the page).
WIDTH_PX = 900
# Kaleido's own limit covers drawing one figure (a fraction of a second); ours covers the whole
# export, the browser's start included (about 6 s on a loaded 2-core machine). Inside
# gunicorn's 30 s worker timeout: a stuck browser gives a PDF that says its charts are
# missing, not a killed worker.
FIGURE_TIMEOUT_S = 10
EXPORT_TIMEOUT_S = 20


class ChartExportError(Exception):
    """The figures could not be drawn (no browser, or it failed): the report says so instead."""


def figures_as_svg(figures: list[dict[str, Any]]) -> list[str]:
    """Each figure as an SVG document, in order; raises ChartExportError when none can be drawn."""
    if not figures:
        return []
    # asyncio.run needs a thread without a running loop (a view may be called from one).
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(asyncio.run, _render_in_time(figures)).result()
        except Exception as error:  # kaleido and choreographer raise many kinds of errors
            logger.warning("static chart export failed: %r", error)
            raise ChartExportError(str(error) or type(error).__name__) from error


async def _render_in_time(figures: list[dict[str, Any]]) -> list[str]:
    # Cancelling leaves Kaleido's context, which closes the browser.
    return await asyncio.wait_for(_render(figures), EXPORT_TIMEOUT_S)


async def _render(figures: list[dict[str, Any]]) -> list[str]:
    plotlyjs = finders.find(PLOTLY_STATIC_PATH)
    options = {"n": 1, "timeout": FIGURE_TIMEOUT_S, "plotlyjs": plotlyjs, "mathjax": False}
    async with kaleido.Kaleido(**options) as renderer:
        return [await _svg(renderer, figure) for figure in figures]


async def _svg(renderer: kaleido.Kaleido, figure: dict[str, Any]) -> str:
    height = (figure.get("layout") or {}).get("height") or 400
    options = {"format": "svg", "width": WIDTH_PX, "height": height}
    return (await renderer.calc_fig(figure, opts=options)).decode()
