"""The dependency rules of docs/architecture.md, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE_GATES_MODULES = [
    "decisions",
    "clauses",
    "inference",
    "validity",
    "acceptance",
    "integration",
    "stability",
    "specs",
    "planner",
    "planner_charts",
]
FRAMEWORKS = ("django", "celery", "rest_framework", "kombu", "gates.models", "gates.services")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def runner_modules() -> list[Path]:
    return [p for p in (ROOT / "runners").rglob("*.py") if p.name not in ("tasks.py", "apps.py")]


@pytest.mark.parametrize("path", runner_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_runners_import_no_django_except_tasks(path):
    bad = {m for m in imported_modules(path) if m.startswith(FRAMEWORKS)}
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize(
    "name", [n for n in PURE_GATES_MODULES if (ROOT / "gates" / f"{n}.py").exists()]
)
def test_pure_gates_modules_import_no_framework(name):
    bad = {m for m in imported_modules(ROOT / "gates" / f"{name}.py") if m.startswith(FRAMEWORKS)}
    assert not bad, f"gates/{name}.py imports {bad}"


def test_simhost_imports_nothing_from_tollgate():
    for path in (ROOT / "simhost").rglob("*.py"):
        bad = {
            m
            for m in imported_modules(path)
            if m.split(".")[0] in ("config", "gates", "runners", "django")
        }
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_paramiko_is_imported_only_by_the_ssh_transport():
    importers = {
        str(p.relative_to(ROOT))
        for package in ("config", "gates", "runners", "simhost")
        for p in (ROOT / package).rglob("*.py")
        if any(m.split(".")[0] == "paramiko" for m in imported_modules(p))
    }
    assert importers == {"runners/transport/ssh.py"}


def test_celery_is_imported_only_by_the_celery_app_and_tasks():
    importers = {
        str(p.relative_to(ROOT))
        for package in ("config", "gates", "runners")
        for p in (ROOT / package).rglob("*.py")
        if any(m.split(".")[0] == "celery" for m in imported_modules(p))
    }
    assert importers <= {"config/celery.py", "runners/tasks.py"}


def test_no_code_trusts_unknown_host_keys():
    for package in ("config", "gates", "runners"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            assert "AutoAddPolicy" not in text and "WarningPolicy" not in text, path
