"""`make test-vllm`: the `vllm` profile against a real (CPU) vLLM. Skipped unless
TOLLGATE_VLLM_VENV names the virtualenv bin/vllm-venv built; the model is made on first use."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realvllm.pair import run_pair
from tests.sshd import SshServer

HERE = Path(__file__).resolve().parent
VENV = os.environ.get("TOLLGATE_VLLM_VENV")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if VENV and Path(VENV, "bin", "vllm").exists():
        return
    skip = pytest.mark.skip(reason="needs TOLLGATE_VLLM_VENV (make test-vllm builds it)")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def venv() -> Path:
    return Path(VENV or "")


@pytest.fixture(scope="session")
def tiny_model(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded tiny Llama and its offline-trained tokenizer (tests/realvllm/tinymodel.py)."""
    out = Path(os.environ.get("TOLLGATE_VLLM_MODEL") or tmp_path_factory.mktemp("model"))
    subprocess.run([str(venv / "bin" / "python"), str(HERE / "tinymodel.py"), str(out)], check=True)
    return out


class VllmSshServer(SshServer):
    """A loopback sshd whose sessions find the CPU vLLM on PATH, offline, with a 1 GiB KV cache
    (vLLM's CPU backend sizes it from VLLM_CPU_KVCACHE_SPACE, in GiB)."""

    def __init__(self, workdir: Path, venv: Path) -> None:
        super().__init__(workdir)
        self.venv = venv

    def _write_config(self) -> None:
        super()._write_config()
        config = self.workdir / "sshd_config"
        path = f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        env = f"SetEnv SHLVL=1 PATH={path} VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1"
        config.write_text(config.read_text().replace("SetEnv SHLVL=1", env))


@pytest.fixture(scope="module")
def vllm_sshd(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = VllmSshServer(tmp_path_factory.mktemp("sshd"), venv)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def servers(
    venv: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The real vLLM and simhost the fidelity tests compare (tests/realvllm/pair.py), started
    once for every fidelity module: a CPU vLLM takes a minute or more to load."""
    yield from run_pair(venv, tiny_model, tmp_path_factory.mktemp("servers"))
