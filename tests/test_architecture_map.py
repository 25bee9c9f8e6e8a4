"""docs/architecture.md is the map of the house; these tests keep it true.

- Every module of the project's packages has its line in the map, and every listed module or
  folder exists.
- Models are written only by the layers the map's "Who writes models" allows.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("config", "documents", "gates", "runners", "simhost", "worker")
# A name in the map's tree: a module (`x.py`), a folder (`x/`), or a few files at the top.
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.-]+(?:/|\.py))(?: {2,}(?P<text>\S.*))?$")

# The ORM calls that write state, and who may make them (docs/architecture.md "Who writes models").
WRITE_METHODS = {"create", "bulk_create", "bulk_update", "update_or_create", "get_or_create"}
QUERYSET_WRITES = {"update", "delete", "select_for_update"}
INSTANCE_WRITES = {"save", "delete"}
WRITERS = (
    "gates/services/",
    "gates/evidence/store.py",
    "gates/evidence/keys.py",
    "gates/evidence/publication.py",
    "gates/models/",
    "gates/demo/world.py",
    "gates/admin.py",
)


def map_tree() -> str:
    """The map's "What lives where" code block."""
    section = MAP.read_text().split("## What lives where", 1)[1]
    return section.split("```", 2)[1]


@cache
def listed() -> dict[str, str]:
    """Every path the map names -> its description (folders end in `/`)."""
    entries: dict[str, str] = {}
    folders: list[str] = []
    for line in map_tree().splitlines():
        match = ENTRY.match(line)
        if not match:
            continue
        depth = len(match["indent"]) // 2
        folders = folders[:depth]
        path = "/".join([*folders, match["name"]])
        entries[path] = match["text"] or ""
        if match["name"].endswith("/"):
            folders.append(match["name"].rstrip("/"))
    return entries


def modules() -> list[str]:
    """Every module of the project's packages but migrations and package faces."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or path.name == "__init__.py":
                continue
            found.append(str(relative))
    return found


def test_the_map_parses_into_many_entries():
    """A positive control: a map that no longer parses would make the tests below vacuous."""
    entries = listed()
    assert len(entries) > 250
    assert entries["gates/services/runs/lifecycle.py"]
    assert "runners/program/" in entries


@pytest.mark.parametrize("module", modules())
def test_every_module_is_on_the_map_with_a_line(module):
    entries = listed()
    assert module in entries, f"{module} is missing from docs/architecture.md"
    assert entries[module].strip(), f"{module} has no description in docs/architecture.md"


def test_every_path_on_the_map_exists():
    missing = [path for path in listed() if not (ROOT / path.rstrip("/")).exists()]
    assert not missing, f"docs/architecture.md lists paths that do not exist: {missing}"


def call_chain(node: ast.expr) -> list[str]:
    """`Run.objects.filter(x=1).update` -> ["Run", "objects", "filter", "update"]."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            break
        else:
            break
    return names[::-1]


def model_writes(source: str) -> list[str]:
    """The ORM writes in `source`, as dotted call chains."""
    writes = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain = call_chain(node.func)
        method = chain[-1]
        through_manager = "objects" in chain[:-1]
        if (
            method in WRITE_METHODS
            or (through_manager and method in QUERYSET_WRITES)
            or (method in INSTANCE_WRITES and not node.args)
        ):
            writes.append(".".join(chain))
    return writes


def test_the_write_finder_finds_each_kind_of_write():
    source = """
Run.objects.create(gate=gate)
Run.objects.filter(pk=1).update(state="x")
run.save()
run.save(update_fields=["state"])
Soak.objects.get_or_create(run=run)
settings.update({"a": 1})
path.write_text("x")
"""
    assert model_writes(source) == [
        "Run.objects.create",
        "Run.objects.filter.update",
        "run.save",
        "run.save",
        "Soak.objects.get_or_create",
    ]


def writer_allowed(path: str) -> bool:
    return path.startswith(WRITERS)


@pytest.mark.parametrize("module", [m for m in modules() if not writer_allowed(m)])
def test_models_are_written_only_by_the_layers_the_map_allows(module):
    writes = model_writes((ROOT / module).read_text())
    assert not writes, f"{module} writes models ({writes}); move the write into gates/services/"
