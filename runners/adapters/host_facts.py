"""Reads host facts for G1: `/proc/meminfo`, `df -B1`, `uname -r`, the vLLM and ROCm versions.

Pure: no I/O, no Django. Each fact is its own tool with its own small normalized form.
"""

from __future__ import annotations

import re
from typing import Any

from runners.adapters.documents import decode
from runners.adapters.errors import FormatProblem, excerpt, reading
from runners.adapters.fields import whole

MEMINFO_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d{1,19})(?:\s+(kB))?\s*$", re.ASCII)
# df block-size headers and the bytes in one block.
DF_BLOCKS = {"1b-blocks": 1, "1k-blocks": 1024, "1024-blocks": 1024}
DF_NUMBER = r"(\d{1,19}|-)"
KERNEL_RELEASE = re.compile(r"^\d+\.\d+[0-9A-Za-z.+_~-]*$", re.ASCII)
VERSION = re.compile(r"^v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?([0-9A-Za-z.+_-]*)$", re.ASCII)
# `/opt/rocm/.info/version` holds e.g. "6.3.1-48"; `amd-smi version` prints "ROCm version: 6.3.1".
ROCM_RELEASE = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,6}))?(?:-[0-9A-Za-z.]+)?$", re.ASCII)
ROCM_IN_AMD_SMI = re.compile(r"ROCm version:\s*(\S+)")
VLLM_MISSING = ("No module named 'vllm'", "vllm: command not found", "vllm: not found")


def parse_meminfo(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """MemTotal (required) and MemAvailable (None on kernels before 3.14) in bytes."""
    with reading(source):
        fields = dict(_meminfo_fields(decode(text)))
        if "MemTotal" not in fields:
            raise FormatProblem("no MemTotal line: not /proc/meminfo")
        return {
            "tool": "meminfo",
            "mem_total_bytes": fields["MemTotal"],
            "mem_available_bytes": fields.get("MemAvailable"),
        }


def parse_df(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Each mount of `df -B1` (also -k, -P, -T) with its size, used and available bytes."""
    with reading(source):
        lines = [line for line in decode(text).splitlines() if line.strip()]
        header = lines[0].split()
        if not header or header[0] != "Filesystem" or "Mounted" not in header:
            raise FormatProblem("first line is not a df header (Filesystem ... Mounted on)")
        typed = len(header) > 1 and header[1] == "Type"
        block = _block_bytes(header[2 if typed else 1])
        pattern = _df_row_pattern(typed)
        rows = _unwrap_df_rows(lines[1:])
        return {"tool": "df", "mounts": [_df_mount(row, pattern, typed, block) for row in rows]}


def parse_uname(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The kernel release printed by `uname -r`."""
    with reading(source):
        lines = decode(text).split()
        if len(lines) != 1 or not KERNEL_RELEASE.match(lines[0]):
            raise FormatProblem(f"expected the one word `uname -r` prints, got {excerpt(lines)}")
        return {"tool": "uname", "kernel_release": lines[0]}


def parse_vllm_version(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The version from `vllm --version` or `python3 -c 'import vllm; print(vllm.__version__)'`.

    vLLM may log lines before the version; the last line that is a version wins.
    """
    with reading(source):
        lines = [line.strip() for line in decode(text).splitlines() if line.strip()]
        for missing in VLLM_MISSING:
            if any(missing in line for line in lines):
                raise FormatProblem(f"vLLM is not installed ({missing})")
        for line in reversed(lines):
            match = VERSION.match(line)
            if match:
                return {
                    "tool": "vllm-version",
                    "version": line.removeprefix("v"),
                    "release": [int(part) for part in match.groups()[:3] if part is not None],
                }
        raise FormatProblem("no version line (expected e.g. 0.11.1)")


def parse_rocm_version(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """The ROCm release from `cat /opt/rocm/.info/version` or `amd-smi version`."""
    with reading(source):
        decoded = decode(text)
        found = ROCM_IN_AMD_SMI.search(decoded)
        version = found.group(1) if found else decoded.strip()
        match = ROCM_RELEASE.match(version)
        if match is None:
            raise FormatProblem(f"no ROCm version (expected e.g. 6.3.1-48), got {excerpt(version)}")
        release = [int(part) for part in match.groups() if part is not None]
        return {"tool": "rocm-version", "version": version, "release": release}


def _meminfo_fields(text: str) -> list[tuple[str, int]]:
    fields = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = MEMINFO_LINE.match(line.strip())
        if match is None:
            raise FormatProblem(f"line {number} is not `Name: value [kB]`: {excerpt(line)}")
        name, value, unit = match.groups()
        # "kB" in /proc/meminfo is KiB; lines without a unit (HugePages_Total) are counts.
        fields.append((name, whole(int(value) * (1024 if unit else 1), name)))
    return fields


def _block_bytes(column: str) -> int:
    block = DF_BLOCKS.get(column.lower())
    if block is None:
        raise FormatProblem(f"df size column is {excerpt(column)}; run `df -B1` (bytes)")
    return block


def _df_row_pattern(typed: bool) -> re.Pattern[str]:
    kind = r"(\S+)\s+" if typed else "()"
    numbers = rf"{DF_NUMBER}\s+{DF_NUMBER}\s+{DF_NUMBER}\s+(\d{{1,3}}%|-)\s+"
    return re.compile(rf"^(\S+)\s+{kind}{numbers}(\S.*?)\s*$", re.ASCII)


def _unwrap_df_rows(lines: list[str]) -> list[str]:
    # Old df prints a long device name alone on a line and the numbers on the next one.
    rows: list[str] = []
    pending = ""
    for line in lines:
        if len(line.split()) == 1 and not pending:
            pending = line.strip()
            continue
        rows.append(f"{pending} {line.strip()}" if pending else line)
        pending = ""
    if pending:
        raise FormatProblem(f"df row for {excerpt(pending)} has no sizes")
    return rows


def _df_mount(row: str, pattern: re.Pattern[str], typed: bool, block: int) -> dict[str, Any]:
    match = pattern.match(row)
    if match is None:
        raise FormatProblem(f"df row is not `filesystem sizes... mount`: {excerpt(row, 80)}")
    filesystem, kind, size, used, available, _, mount = match.groups()
    return {
        "filesystem": filesystem,
        "type": kind if typed else None,
        "mount": mount,
        "size_bytes": _df_bytes(size, block, mount),
        "used_bytes": _df_bytes(used, block, mount),
        "available_bytes": _df_bytes(available, block, mount),
    }


def _df_bytes(value: str, block: int, mount: str) -> int | None:
    # df prints "-" where a pseudo file system has no size.
    return None if value == "-" else whole(int(value) * block, f"df {mount}")


def parse_engine_version(text: str | bytes, *, source: str = "<input>") -> dict[str, Any]:
    """Any engine's version probe (`python3 -c 'import sglang; print(sglang.__version__)'`,
    `lmcache --version` ...): the last line that is a version, as vllm-version reads it."""
    with reading(source):
        lines = [line.strip() for line in decode(text).splitlines() if line.strip()]
        for line in reversed(lines):
            word = line.split()[-1]
            match = VERSION.match(word)
            if match:
                return {
                    "tool": "engine-version",
                    "version": word.removeprefix("v"),
                    "release": [int(part) for part in match.groups()[:3] if part is not None],
                }
        raise FormatProblem("no version line (expected e.g. 0.5.23)")
