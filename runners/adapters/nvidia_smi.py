"""Reads `nvidia-smi -q -x` (DTD v11-v13) and `nvidia-smi --query-gpu=... --format=csv` output.

Pure: no I/O, no Django. Produces the inventory form of runners.adapters.inventory.
"""

from __future__ import annotations

import csv
import re
from typing import Any
from xml.etree.ElementTree import Element

from runners.adapters.documents import load_xml
from runners.adapters.errors import FormatProblem
from runners.adapters.fields import whole
from runners.adapters.inventory import (
    build_gpu,
    build_inventory,
    memory_mib,
    percent,
    text_value,
)

# The fields Tollgate's probes ask for; a CSV without a header must hold exactly these, in order.
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "utilization.gpu",
)
HEADER_CELL = re.compile(r"^[a-z][a-z0-9_.]*( \[[^\]]+\])?$", re.IGNORECASE)


def parse_nvidia_smi_xml(text: str) -> dict[str, Any]:
    """`nvidia-smi -q -x`; GPUs are counted from `<gpu>` elements, never from attached_gpus."""
    root = load_xml(text)
    if root.tag != "nvidia_smi_log":
        raise FormatProblem(f"XML root is <{root.tag[:40]}>, expected <nvidia_smi_log>")
    gpus = [_xml_gpu(index, gpu) for index, gpu in enumerate(root.findall("gpu"))]
    return build_inventory(
        "nvidia-smi-xml",
        gpus,
        driver_version=_xml_text(root, "driver_version"),
        cuda_version=_xml_text(root, "cuda_version"),
    )


def parse_nvidia_smi_csv(text: str) -> dict[str, Any]:
    """`--query-gpu=... --format=csv[,noheader][,nounits]`; no header means QUERY_GPU_FIELDS."""
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    fields = _header_fields(rows[0]) if rows else None
    if fields is None:
        fields = list(QUERY_GPU_FIELDS)
    else:
        rows = rows[1:]
    if "name" not in fields and "memory.total" not in fields:
        raise FormatProblem("nvidia-smi CSV has neither a name nor a memory.total column")
    records = [_csv_record(fields, row, number) for number, row in enumerate(rows, 1)]
    gpus = [_csv_gpu(position, record) for position, record in enumerate(records)]
    driver = text_value(records[0].get("driver_version")) if records else None
    return build_inventory("nvidia-smi-csv", gpus, driver_version=driver)


def csv_header_fields(line: str) -> list[str] | None:
    """The field names when `line` is a --query-gpu CSV header, else None."""
    cells = next(csv.reader([line], skipinitialspace=True), [])
    return _header_fields(cells)


def _xml_text(element: Element, path: str) -> str | None:
    found = element.find(path)
    if found is None or found.text is None:
        return None
    return text_value(found.text)


def _xml_gpu(index: int, gpu: Element) -> dict[str, Any]:
    where = f"gpu[{index}]"
    return build_gpu(
        index,
        _xml_text(gpu, "product_name"),
        uuid=_xml_text(gpu, "uuid"),
        bus_id=gpu.get("id") or _xml_text(gpu, "pci/pci_bus_id"),
        memory_total_mib=memory_mib(_xml_text(gpu, "fb_memory_usage/total"), f"{where} total"),
        memory_used_mib=memory_mib(_xml_text(gpu, "fb_memory_usage/used"), f"{where} used"),
        utilization_pct=percent(_xml_text(gpu, "utilization/gpu_util"), f"{where} gpu_util"),
    )


def _header_fields(cells: list[str]) -> list[str] | None:
    # "memory.used [MiB]" -> "memory.used": the unit is repeated in each value (or implied).
    if not cells or not all(HEADER_CELL.match(cell.strip()) for cell in cells):
        return None
    fields = [cell.split(" [")[0].strip().lower() for cell in cells]
    return fields if set(fields) & set(QUERY_GPU_FIELDS) else None


def _csv_record(fields: list[str], row: list[str], number: int) -> dict[str, str]:
    if len(row) != len(fields):
        raise FormatProblem(f"CSV row {number} has {len(row)} values for {len(fields)} fields")
    return dict(zip(fields, row, strict=True))


def _csv_gpu(position: int, record: dict[str, str]) -> dict[str, Any]:
    index_text = text_value(record.get("index"))
    where = f"row {position + 1}"
    index = position if index_text is None else _index(index_text, f"{where} index")
    return build_gpu(
        index,
        text_value(record.get("name")),
        uuid=text_value(record.get("uuid")),
        bus_id=text_value(record.get("pci.bus_id")),
        memory_total_mib=memory_mib(text_value(record.get("memory.total")), f"{where} total"),
        memory_used_mib=memory_mib(text_value(record.get("memory.used")), f"{where} used"),
        utilization_pct=percent(text_value(record.get("utilization.gpu")), f"{where} util"),
    )


def _index(text: str, where: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise FormatProblem(f"{where} is not a GPU index")
    return whole(int(text), where)
