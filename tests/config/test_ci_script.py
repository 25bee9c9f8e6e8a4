"""`.ci/run` and `make bench-smoke` keep their promises: the README's test command first, and
every bench at a small size (a bench without a SMOKE_ line would run at full size in CI)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _benches() -> list[str]:
    return sorted(p.stem for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text())


def test_ci_runs_the_readme_test_command_and_the_bench_smoke() -> None:
    # Continued lines joined; a command sent to the background (the real-vLLM virtualenvs,
    # built beside the tests) is not one the build waits on in order.
    script = (ROOT / ".ci/run").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in script.splitlines()]
    commands = [line for line in lines if line.startswith("make ") and not line.endswith("&")]
    assert commands[0] == "make test"
    assert commands[-1] == "make test-vllm"
    assert "make bench-smoke" in commands
    assert "`make test`" in (ROOT / "README.md").read_text()


def test_every_bench_has_a_smoke_size() -> None:
    makefile = (ROOT / "Makefile").read_text()
    sized = set(re.findall(r"^SMOKE_(\w+) :=", makefile, flags=re.M))
    # A bench left out of the smoke run, on purpose and with a comment why, needs no size.
    skip_line = re.search(r"^SMOKE_SKIP := (.*)$", makefile, flags=re.M)
    sized |= {Path(path).stem for path in (skip_line[1].split() if skip_line else [])}
    missing = [bench for bench in _benches() if bench not in sized]
    assert not missing, f"give these benches a SMOKE_<name> line in the Makefile: {missing}"


def test_every_bench_runs_as_a_plain_script() -> None:
    # `make bench` runs `python bench/NAME.py`: the script's own folder is on the path, the
    # repository root is not, so a bench importing `bench.`, `gates.` or `simhost.` puts it there.
    first_party = re.compile(r"^(from|import) (bench|gates|simhost|runners|documents)\b", re.M)
    for bench in _benches():
        text = (ROOT / "bench" / f"{bench}.py").read_text()
        if first_party.search(text):
            assert "sys.path" in text, (
                f"bench/{bench}.py imports the project without its root on the path"
            )
