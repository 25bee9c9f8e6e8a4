"""Golden-file helpers: find each captured fixture and its hand-written expected values."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ADAPTER_FOLDERS = (
    "vllm-bench",
    "guidellm",
    "aiperf",
    "vllm-metrics",
    "nvidia-smi",
    "rocm-smi",
    "amd-smi",
    "meminfo",
    "df",
    "uname",
)
EXPECTED_SUFFIX = ".expected.json"
BANNER = "#" * 80


def fixture_files() -> list[Path]:
    """Every captured output in the adapters' fixture folders (not expectations, not notes)."""
    return sorted(
        path
        for folder in ADAPTER_FOLDERS
        for path in (FIXTURES / folder).iterdir()
        if path.is_file() and not path.name.endswith(EXPECTED_SUFFIX) and path.suffix != ".md"
    )


def expected_for(fixture: Path) -> dict[str, Any]:
    return json.loads(fixture.with_name(fixture.stem + EXPECTED_SUFFIX).read_text())


def section(capture: str, title: str) -> str:
    """The body of one `# <title>` section of an nvidia_gpu_exporter multi-command capture."""
    parts = capture.split(BANNER + "\n")
    for index, part in enumerate(parts):
        if part.startswith(f"# {title}\n"):
            return parts[index + 1]
    raise KeyError(title)


def assert_same(actual: Any, expected: Any, path: str = "$") -> None:
    """Exact structure and values; floats equal to 12 significant digits (unit conversions)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not an object"
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key, value in expected.items():
            assert_same(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual!r}"
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_same(got, want, f"{path}[{index}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert isinstance(actual, float), f"{path}: {actual!r} is not a float"
        assert math.isclose(actual, expected, rel_tol=1e-12, abs_tol=0.0), f"{path}: {actual!r}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r}"
