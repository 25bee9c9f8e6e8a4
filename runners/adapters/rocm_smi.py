"""Reads `rocm-smi ... --json` ({card0: {...}, system: {...}}; key spellings vary by ROCm version).

Pure: no I/O, no Django. Produces the inventory form of runners.adapters.inventory.
"""

from __future__ import annotations

import re
from typing import Any

from runners.adapters.documents import describe, load_json
from runners.adapters.errors import FormatProblem
from runners.adapters.inventory import build_gpu, build_inventory, memory_mib, percent, text_value

CARD_KEY = re.compile(r"^card(\d{1,6})$", re.ASCII)
# Keys are matched without regard to case: ROCm 6.1 renamed "Card series" to "Card Series".
NAME_KEYS = ("card series", "marketing name", "device name")
TOTAL_KEYS = ("vram total memory (b)",)
USED_KEYS = ("vram total used memory (b)",)
UTILIZATION_KEYS = ("gpu use (%)",)
DRIVER_KEYS = ("driver version",)


def parse_rocm_smi(text: str) -> dict[str, Any]:
    """The cards in card-number order; memory from the VRAM byte counts."""
    document = load_json(text)
    if not isinstance(document, dict):
        raise FormatProblem(f"rocm-smi JSON is {describe(document)}, expected an object")
    cards = sorted(
        (int(match.group(1)), key) for key in document if (match := CARD_KEY.match(key)) is not None
    )
    gpus = [_card(index, _fields(document[key], key)) for index, key in cards]
    system = _fields(document.get("system") or {}, "system")
    return build_inventory("rocm-smi-json", gpus, driver_version=_pick(system, DRIVER_KEYS))


def is_rocm_smi(document: Any) -> bool:
    return isinstance(document, dict) and any(CARD_KEY.match(str(key)) for key in document)


def _fields(section: Any, where: str) -> dict[str, str]:
    """The section's string values keyed by lower-cased name."""
    if not isinstance(section, dict):
        raise FormatProblem(f"{where} is {describe(section)}, expected an object")
    return {str(key).lower(): value for key, value in section.items() if isinstance(value, str)}


def _pick(fields: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = text_value(fields.get(key))
        if value is not None:
            return value
    return None


def _card(index: int, fields: dict[str, str]) -> dict[str, Any]:
    where = f"card{index}"
    return build_gpu(
        index,
        _pick(fields, NAME_KEYS),
        uuid=_pick(fields, ("unique id",)),
        bus_id=_pick(fields, ("pci bus",)),
        memory_total_mib=memory_mib(
            _pick(fields, TOTAL_KEYS), f"{where} VRAM total", default_unit="B"
        ),
        memory_used_mib=memory_mib(
            _pick(fields, USED_KEYS), f"{where} VRAM used", default_unit="B"
        ),
        utilization_pct=percent(_pick(fields, UTILIZATION_KEYS), f"{where} GPU use"),
    )
