"""GPU inventory output in the layouts of nvidia-smi (-q -x XML, --query-gpu CSV), rocm-smi
--json, amd-smi metric --json and amd-smi process --json: picks the renderer for a --format.

Pure rendering: host config and live usage in, text out. Standard library only.
"""

from __future__ import annotations

from datetime import datetime
from typing import List, Sequence

from simhost.host.amdsmi import (
    render_amd_smi_json,
    render_amd_smi_process,
    render_rocm_json,
    render_rocm_version,
)
from simhost.host.config import HostConfig
from simhost.host.inventory import GpuLive, SmiQueryError, SmiUnavailableError
from simhost.host.nvidiasmi import DEFAULT_QUERY, render_nvidia_csv, render_nvidia_xml

FORMATS = (
    "nvidia-xml",
    "nvidia-csv",
    "rocm-json",
    "amd-smi-json",
    "amd-smi-process",
    "rocm-version",
)
__all__ = [
    "FORMATS",
    "GpuLive",
    "SmiQueryError",
    "SmiUnavailableError",
    "render",
]


def render(
    fmt: str,
    host: HostConfig,
    live: List[GpuLive],
    now: datetime,
    query: str = DEFAULT_QUERY,
    options: Sequence[str] = (),
) -> str:
    if fmt == "nvidia-xml":
        return render_nvidia_xml(host, live, now)
    if fmt == "nvidia-csv":
        return render_nvidia_csv(host, live, now, query, options)
    if fmt == "rocm-json":
        return render_rocm_json(host, live)
    if fmt == "amd-smi-json":
        return render_amd_smi_json(host, live)
    if fmt == "amd-smi-process":
        return render_amd_smi_process(host)
    if fmt == "rocm-version":
        return render_rocm_version(host)
    raise ValueError("--format: unknown {!r}".format(fmt))
