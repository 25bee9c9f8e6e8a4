"""Which software made a decision: Tollgate's version, a digest of the decision engine's and the
adapters' source, and the libraries they compute with. Reads only the installed source files
(no database, no network): the verifier compares its own with the bundle's."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a verdict is computed with: a change here can change a number.
ENGINE_SOURCES = (
    "gates/decisions",
    "gates/specs/validation.py",
    "gates/specs/schema.py",
    "runners/adapters",
    "runners/results.py",
)
LIBRARIES = ("numpy", "scipy", "jsonschema", "packaging", "prometheus_client", "cryptography")


def source_digest(paths: tuple[str, ...] = ENGINE_SOURCES) -> str:
    """SHA-256 over the engine's and adapters' Python files, by relative path, in name order."""
    digest = hashlib.sha256()
    for path in sorted(_python_files(paths)):
        digest.update(path.encode() + b"\0" + (ROOT / path).read_bytes() + b"\0")
    return digest.hexdigest()


def software_versions() -> dict:
    return {
        "tollgate": _version("tollgate"),
        "engine_and_adapters_source_sha256": source_digest(),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
    }


def _python_files(paths: tuple[str, ...]) -> list[str]:
    files = []
    for path in paths:
        full = ROOT / path
        found = [full] if full.is_file() else full.rglob("*.py")
        files += [str(p.relative_to(ROOT)) for p in found if "__pycache__" not in p.parts]
    return files


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
