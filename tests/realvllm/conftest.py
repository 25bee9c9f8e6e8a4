"""`make test-vllm`: the `vllm` profile against a real (CPU) vLLM. Skipped unless
TOLLGATE_VLLM_VENV names the virtualenv bin/vllm-venv built; the model is made on first use."""

from __future__ import annotations

import os
import shlex
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


# The test host's KV cache, in vLLM blocks (128 tokens each on the CPU backend): 8,192 tokens,
# so cold_recovery's flush (1.2 x the cache) was 18 prompts in a measured run. vLLM's CPU
# backend sizes its cache in whole GiB (VLLM_CPU_KVCACHE_SPACE): 1 GiB is 60,620 tokens of the
# tiny model, a flush of 143 prompts per bench, and G3 took over 25 minutes.
TEST_HOST_KV_BLOCKS = 64
# `vllm serve` on the test host: the profile's command line, plus that cache size and eager
# mode (torch.compile costs 35-65 s per server start here and changes no token or metric the
# tests read). Every other `vllm` command (bench, --version) is passed through untouched.
VLLM_ON_THE_TEST_HOST = """#!/bin/sh
if [ "$1" = serve ]; then
    exec {vllm} "$@" --num-gpu-blocks-override {blocks} --enforce-eager
fi
exec {vllm} "$@"
"""


class VllmSshServer(SshServer):
    """A loopback sshd whose sessions find the CPU vLLM on PATH, offline, its servers with a
    small KV cache (TEST_HOST_KV_BLOCKS) and no graph compilation."""

    def __init__(self, workdir: Path, venv: Path) -> None:
        super().__init__(workdir)
        self.venv = venv

    def _write_config(self) -> None:
        super()._write_config()
        config = self.workdir / "sshd_config"
        wrapper_dir = self.workdir / "bin"
        wrapper_dir.mkdir(exist_ok=True)
        wrapper = wrapper_dir / "vllm"
        wrapper.write_text(
            VLLM_ON_THE_TEST_HOST.format(
                vllm=shlex.quote(str(self.venv / "bin" / "vllm")), blocks=TEST_HOST_KV_BLOCKS
            )
        )
        wrapper.chmod(0o755)
        path = f"{wrapper_dir}:{self.venv}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
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
