"""A raw file a step keeps as evidence: what a probe printed, a bench's result.json.

A module of its own, importing nothing, so runners.errors can carry a failure's files without
importing the parsers of runners.results (which import runners.errors).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Artifact:
    name: str
    tool: str
    content: bytes
