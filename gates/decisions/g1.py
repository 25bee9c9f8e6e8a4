"""G1 arrival acceptance: expected inventory against observed facts, one check per expectation,
and version comparison (PEP 440 via packaging, with a fallback for vendor strings).
Pure: a typed spec and plain facts in, a typed decision out; imports no Django.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from packaging.version import Version

from documents.cell import CellVerdict
from documents.decision import G1Check, G1Decision, G1Facts
from documents.spec import Expect, G1Spec
from gates.decisions.numbers import finite_float, is_number
from gates.decisions.validity import EvidenceError

GIB = 2**30
# The leading numeric release of a vendor string that is not PEP 440. Digit runs are bounded
# (int() refuses thousands of digits), and a longer run is unreadable, not cut short.
_RELEASE = re.compile(r"\s*v?([0-9]{1,30}(?:\.[0-9]{1,30})*)(?![0-9])", re.IGNORECASE)
_VERDICT_OF: dict[bool | None, CellVerdict] = {True: "pass", False: "fail", None: "inconclusive"}
# A check reads the expectations and the facts; None when the spec does not ask for it.
_Check = Callable[[Expect, G1Facts], G1Check | None]


def version_key(text: str) -> Version | None:
    """A comparable version ("0.9.2" < "0.20.1" < "0.20.1.post1"), or None when unreadable.

    PEP 440 strings are read by packaging, local labels dropped ("0.20.1+rocm721" is 0.20.1;
    a build for a platform is no newer). A vendor string that is not PEP 440, such as ROCm's
    "6.2.41133-dd7f95766" or "6.0.0-amd64", counts as its leading numeric release.
    """
    if not isinstance(text, str):
        return None
    try:
        return Version(Version(text).public)
    except ValueError:  # InvalidVersion, or a digit run longer than int() reads
        pass
    release = _RELEASE.match(text)
    return Version(release.group(1)) if release else None


def version_at_least(observed: str | None, minimum: str) -> bool | None:
    """Whether `observed` >= `minimum`; None when the observed version is absent or unreadable."""
    want, have = version_key(minimum), version_key(observed) if observed is not None else None
    if want is None:
        raise ValueError(f"cannot read version {minimum!r}")
    return None if have is None else have >= want


def decide_g1(spec: G1Spec, facts: Any) -> G1Decision:
    """The G1 verdict: fail if any expectation is not met, inconclusive if any is unobserved."""
    expect = spec["expect"].copy()
    observed = _parse_facts(facts)
    rows = [row for check in _CHECKS if (row := check(expect, observed)) is not None]
    failed = [f"{row['check']}: {row['cause']}" for row in rows if row["ok"] is False]
    unknown = [f"{row['check']}: {row['cause']}" for row in rows if row["ok"] is None]
    verdict: CellVerdict
    if failed:
        verdict, reasons = "fail", failed
    elif unknown:
        verdict, reasons = "inconclusive", unknown
    else:
        verdict, reasons = "pass", [f"all {len(rows)} inventory checks met"]
    return {
        "gate": "G1",
        "spec_version": spec.get("version"),
        "verdict": verdict,
        "reasons": reasons,
        "clauses": rows,
        "validity": [],
        "inputs": {"expect": expect, "facts": observed},
    }


def _row(check: str, expected: Any, observed: Any, ok: bool | None, cause: str) -> G1Check:
    return {
        "check": check,
        "expected": expected,
        "observed": observed,
        "ok": ok,
        "verdict": _VERDICT_OF[ok],
        "cause": cause,
    }


def _unobserved(check: str, expected: Any, what: str) -> G1Check:
    return _row(check, expected, None, None, f"{what} was not observed")


def _parse_facts(facts: Any) -> G1Facts:
    if not isinstance(facts, dict):
        raise EvidenceError("facts", "must be an object")
    for key in ("gpu_inventory", "offload_tier"):
        if facts.get(key) is not None and not isinstance(facts[key], dict):
            raise EvidenceError(f"facts.{key}", "must be an object or null")
    for key in ("vllm_version", "engine_version", "kernel"):
        if facts.get(key) is not None and not isinstance(facts[key], str):
            raise EvidenceError(f"facts.{key}", "must be a string or null")
    for key in ("host_memory_bytes", "free_disk_bytes"):
        if facts.get(key) is not None and not is_number(facts[key]):
            raise EvidenceError(f"facts.{key}", "must be a number or null")
    gpus = (facts.get("gpu_inventory") or {}).get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
        raise EvidenceError("facts.gpu_inventory.gpus", "must be a list of objects")
    return {
        "gpu_inventory": facts.get("gpu_inventory"),
        "vllm_version": facts.get("vllm_version"),
        "engine_version": facts.get("engine_version") or facts.get("vllm_version"),
        "host_memory_bytes": facts.get("host_memory_bytes"),
        "free_disk_bytes": facts.get("free_disk_bytes"),
        "kernel": facts.get("kernel"),
        "offload_tier": facts.get("offload_tier"),
    }


def _gpus(observed: G1Facts) -> list[dict[str, Any]] | None:
    inventory = observed["gpu_inventory"]
    if inventory is None:
        return None
    gpus: list[dict[str, Any]] = inventory.get("gpus", [])  # _parse_facts checked the shape
    return gpus


def _check_vendor(expect: Expect, observed: G1Facts) -> G1Check | None:
    want = expect.get("gpu_vendor")
    if want is None:
        return None
    source = str((observed["gpu_inventory"] or {}).get("source") or "")
    vendor = (
        "nvidia" if source.startswith("nvidia") else "amd" if source[:3] in ("roc", "amd") else None
    )
    if vendor is None:
        return _unobserved("gpu_vendor", want, "the GPU vendor")
    return _row("gpu_vendor", want, vendor, vendor == want, f"inventory from {source}")


def _check_model(expect: Expect, observed: G1Facts) -> G1Check | None:
    pattern = expect.get("gpu_model_pattern")
    if pattern is None:
        return None
    gpus = _gpus(observed)
    if gpus is None:
        return _unobserved("gpu_model", pattern, "the GPU inventory")
    names = [str(gpu.get("name")) for gpu in gpus]
    odd = [name for name in names if not re.search(pattern, name, re.IGNORECASE)]
    if not names:
        return _row("gpu_model", pattern, names, False, "no GPU was found")
    cause = f"{len(odd)} GPU(s) do not match: {sorted(set(odd))}" if odd else "every GPU matches"
    return _row("gpu_model", pattern, names, not odd, cause)


def _check_count(expect: Expect, observed: G1Facts) -> G1Check | None:
    want = expect.get("gpu_count")
    if want is None:
        return None
    gpus = _gpus(observed)
    if gpus is None:
        return _unobserved("gpu_count", want, "the GPU inventory")
    return _row("gpu_count", want, len(gpus), len(gpus) == want, f"{len(gpus)} GPU(s) found")


def _check_gpu_memory(expect: Expect, observed: G1Facts) -> G1Check | None:
    want = expect.get("gpu_memory_min_gib")
    if want is None:
        return None
    gpus = _gpus(observed)
    sizes: list[Any] = [gpu.get("memory_total_mib") for gpu in gpus or []]
    if not gpus or any(finite_float(size) is None for size in sizes):
        return _unobserved("gpu_memory_min_gib", want, "the memory of every GPU")
    smallest = min(sizes) / 1024
    return _row(
        "gpu_memory_min_gib",
        want,
        smallest,
        smallest >= want,
        f"smallest GPU has {smallest:.2f} GiB",
    )


VersionKey = Literal["driver_min", "cuda_min", "rocm_min", "vllm_min", "engine_min"]


def _version_check(check: str, key: VersionKey, fact: Callable[[G1Facts], Any]) -> _Check:
    def run(expect: Expect, observed: G1Facts) -> G1Check | None:
        want = expect.get(key)
        if want is None:
            return None
        have = fact(observed)
        have = have if isinstance(have, str) else None
        ok = version_at_least(have, want)
        if ok is None and key == "vllm_min" and observed["engine_version"] is not None:
            engine = observed["engine_version"]
            cause = f"the host's engine is not vLLM (version {engine}); expect.engine_min applies"
            return _row(check, want, None, None, cause)
        if ok is None:
            return _row(check, want, have, None, f"no readable version observed ({have!r})")
        return _row(check, want, have, ok, f"observed {have}, minimum {want}")

    return run


def _inventory_fact(name: str) -> Callable[[G1Facts], Any]:
    return lambda observed: (observed["gpu_inventory"] or {}).get(name)


def _minimum_check(
    check: str,
    key: Literal["host_memory_min_gib", "free_disk_min_gib"],
    fact: Literal["host_memory_bytes", "free_disk_bytes"],
    scale: float,
    unit: str,
) -> _Check:
    def run(expect: Expect, observed: G1Facts) -> G1Check | None:
        want = expect.get(key)
        if want is None:
            return None
        have = observed[fact]
        have = finite_float(have)
        if have is None:
            return _unobserved(check, want, fact)
        value = have / scale
        return _row(check, want, value, value >= want, f"{value:.2f} {unit} observed")

    return run


def _check_offload(expect: Expect, observed: G1Facts) -> G1Check | None:
    want = expect.get("offload_tier")
    if not want or (not want.get("required") and want.get("min_capacity_gib") is None):
        return None
    tier = observed["offload_tier"]
    if tier is None or not isinstance(tier.get("present"), bool):
        return _unobserved("offload_tier", want, "the offload tier")
    if not tier["present"]:
        ok = not want.get("required")
        return _row("offload_tier", want, tier, ok, "no offload tier is present")
    floor, capacity = want.get("min_capacity_gib"), tier.get("capacity_gib")
    if floor is None:
        return _row("offload_tier", want, tier, True, "an offload tier is present")
    capacity = finite_float(capacity)
    if capacity is None:
        return _row("offload_tier", want, tier, None, "offload tier capacity was not observed")
    return _row(
        "offload_tier", want, tier, capacity >= floor, f"offload tier of {capacity:.2f} GiB present"
    )


def _check_kernel(expect: Expect, observed: G1Facts) -> G1Check | None:
    pattern = expect.get("kernel_pattern")
    if pattern is None:
        return None
    kernel = observed["kernel"]
    if kernel is None:
        return _unobserved("kernel", pattern, "the kernel release")
    ok = re.search(pattern, kernel) is not None
    return _row("kernel", pattern, kernel, ok, "matches" if ok else "does not match")


_CHECKS: tuple[_Check, ...] = (
    _check_vendor,
    _check_model,
    _check_count,
    _check_gpu_memory,
    _version_check("driver_min", "driver_min", _inventory_fact("driver_version")),
    _version_check("cuda_min", "cuda_min", _inventory_fact("cuda_version")),
    _version_check("rocm_min", "rocm_min", _inventory_fact("rocm_version")),
    _version_check("vllm_min", "vllm_min", lambda observed: observed["vllm_version"]),
    _version_check("engine_min", "engine_min", lambda observed: observed["engine_version"]),
    _minimum_check("host_memory_min_gib", "host_memory_min_gib", "host_memory_bytes", GIB, "GiB"),
    _check_offload,
    _minimum_check("free_disk_min_gib", "free_disk_min_gib", "free_disk_bytes", GIB, "GiB"),
    _check_kernel,
)
