"""Serves plotly.min.js from the pinned plotly package as static/vendor/plotly.min.js.

Vendoring the 4.6 MB file into git would pin it twice; this keeps the Python package the one
place its version is chosen, and pages never load it from a CDN.
"""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).parent / "package_data"
PLOTLY_STATIC_PATH = "vendor/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def find(self, path: str, find_all: bool = False, **kwargs: object) -> str | list[str]:
        if path != PLOTLY_STATIC_PATH:
            return [] if find_all else ""
        match = str(PLOTLY_DIR / "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns: list[str] | None):
        # The prefix puts the file at vendor/plotly.min.js when collectstatic copies it.
        storage = FileSystemStorage(location=str(PLOTLY_DIR))
        storage.prefix = "vendor"
        yield "plotly.min.js", storage
