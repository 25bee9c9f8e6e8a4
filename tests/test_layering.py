"""The dependency rules of docs/architecture.md, checked on the source.

- Pure packages (the decision engine, the planner, the chart builders, the spec validator)
  import no framework.
- Nothing in runners/ imports Django or anything from gates (worker/ is where they meet).
- No import cycles between the project's packages (sub-packages and top-level modules).
- simhost imports nothing from the rest; paramiko only in the SSH transport; Celery only in
  the Celery app and the tasks.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "documents", "gates", "runners", "simhost", "worker")
PURE = (
    "documents",
    "gates/decisions",
    "gates/planner",
    "gates/charts",
    "gates/specs",
    "gates/sshsig.py",
    "gates/alerts/events.py",
    "gates/pages/report/tables.py",
    "gates/pages/audit/words.py",
    "gates/pages/audit/sentences.py",
    "gates/history/series.py",
    "gates/history/comparison.py",
    "gates/demo/interleave.py",
    "gates/evidence/agreements.py",
    "gates/evidence/layout.py",
    "gates/evidence/statement.py",
    "gates/evidence/recompute.py",
    "gates/evidence/redaction.py",
    "gates/evidence/verify.py",
    "gates/evidence/versions.py",
)
FRAMEWORKS = (
    "django",
    "celery",
    "rest_framework",
    "drf_spectacular",
    "kombu",
    "paramiko",
    "gates.models",
    "gates.services",
    "gates.api",
    "gates.pages",
)
MAX_MODULE_LINES = 400


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name `path` imports, `from x import y` also as `x.y`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def source_files(*roots: str) -> list[Path]:
    files = []
    for root in roots:
        path = ROOT / root
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [p for p in files if "migrations" not in p.parts]


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


# A pure module under a framework package (gates/pages/audit/sentences.py) may import another.
PURE_MODULES = tuple(p.removesuffix(".py").replace("/", ".") for p in PURE if p.endswith(".py"))


def is_pure(module: str) -> bool:
    return any(module == pure or module.startswith(f"{pure}.") for pure in PURE_MODULES)


@pytest.mark.parametrize("path", source_files(*PURE), ids=relative)
def test_pure_packages_import_no_framework(path):
    bad = {m for m in imported_modules(path) if m.startswith(FRAMEWORKS) and not is_pure(m)}
    assert not bad, f"{relative(path)} imports {bad}"


def test_a_pure_module_may_import_another_pure_module_but_not_its_framework_neighbours():
    assert is_pure("gates.pages.audit.words.AuditFacts")
    assert not is_pure("gates.pages.audit.page") and not is_pure("gates.pages.audit")


@pytest.mark.parametrize("path", source_files("runners"), ids=relative)
def test_runners_import_no_django_and_nothing_from_gates(path):
    django_side = ("django", "celery", "rest_framework", "kombu", "gates", "config")
    bad = {m for m in imported_modules(path) if m.startswith(django_side)}
    assert not bad, f"{relative(path)} imports {bad}"


def node_of(module: str) -> str:
    """The node a module belongs to in the package graph: its sub-package, or the module itself
    when it sits at a package's top (gates.specs.validation, worker.tasks,
    runners.program.sequence)."""
    parts = module.split(".")
    for depth in (2, 1):
        candidate = ROOT.joinpath(*parts[:depth])
        if candidate.is_dir() or candidate.with_suffix(".py").is_file():
            return ".".join(parts[:depth])
    return parts[0]


@cache
def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in source_files(*PACKAGES):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        source = node_of(module.removesuffix(".__init__"))
        targets = {
            node_of(name)
            for name in imported_modules(path)
            if name.split(".")[0] in PACKAGES and node_of(name) != source
        }
        graph.setdefault(source, set()).update(targets)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*trail[trail.index(target) :], target] if target in trail else [target]
            if target not in state and (cycle := visit(target, [*trail, target])):
                return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [node])):
            return cycle
    return None


def test_there_are_no_import_cycles_between_packages():
    cycle = find_cycle(package_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_services_poke_tasks_by_name_and_never_import_them():
    importers = {
        relative(p)
        for p in source_files("gates")
        if any(m.startswith("worker.tasks") for m in imported_modules(p))
    }
    assert not importers


def test_simhost_imports_nothing_from_tollgate():
    for path in source_files("simhost"):
        bad = {
            m
            for m in imported_modules(path)
            if m.split(".")[0] in ("config", "gates", "runners", "django")
        }
        assert not bad, f"{relative(path)} imports {bad}"


def test_paramiko_is_imported_only_by_the_ssh_transport():
    importers = {
        relative(p)
        for p in source_files("config", "gates", "runners", "simhost")
        if any(m.split(".")[0] == "paramiko" for m in imported_modules(p))
    }
    assert importers == {"runners/transport/ssh.py"}


def test_celery_is_imported_only_by_the_celery_app_and_tasks():
    importers = {
        relative(p)
        for p in source_files("config", "gates", "runners", "worker")
        if any(m.split(".")[0] == "celery" for m in imported_modules(p))
    }
    assert importers <= {"config/celery.py", "worker/tasks.py"}


@pytest.mark.parametrize("path", source_files(*PACKAGES), ids=relative)
def test_no_module_is_over_the_size_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{relative(path)} has {lines} lines"


# A plugin registry (one module per tool) may grow past the limit; nothing else does.
REGISTRIES = {"runners/adapters", "gates/migrations", "tests/runners/adapters"}
MAX_MODULES_PER_FOLDER = 15


def folders() -> list[Path]:
    tests = {p.parent for p in (ROOT / "tests").rglob("*.py") if "fixtures" not in p.parts}
    return sorted({p.parent for p in source_files(*PACKAGES)} | tests)


@pytest.mark.parametrize("folder", folders(), ids=relative)
def test_no_folder_holds_more_than_fifteen_modules(folder):
    if relative(folder) in REGISTRIES:
        return
    modules = sorted(p.name for p in folder.glob("*.py"))
    assert len(modules) <= MAX_MODULES_PER_FOLDER, f"{relative(folder)}: {modules}"


def test_the_flat_gates_folder_is_gone():
    """Sub-domains are packages a newcomer can guess; these once sat flat in gates/."""
    flat = {"acceptance", "integration", "stability", "clauses", "inference", "validity"}
    flat |= {"planner_models", "planner_capacity", "planner_charts", "kvplans", "charts_g2"}
    flat |= {"dashboards", "views", "demo_walk", "decisions", "charts", "demo", "planner"}
    assert not {name for name in flat if (ROOT / "gates" / f"{name}.py").exists()}


def test_no_code_trusts_unknown_host_keys():
    for path in source_files("config", "gates", "runners"):
        text = path.read_text()
        assert "AutoAddPolicy" not in text and "WarningPolicy" not in text, path
