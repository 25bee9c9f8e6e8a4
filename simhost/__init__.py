"""simhost: a TEST DOUBLE that emulates a vLLM GPU host (no GPU, no model weights).

Standalone: imports nothing from config/, gates/ or runners/, and runs on Python 3.9+.
Third-party imports happen only inside `serve` (aiohttp, prometheus_client) and `bench`
(prometheus_client's text parser); the probes need the standard library alone.
"""

from __future__ import annotations

__version__ = "0.1.0"
