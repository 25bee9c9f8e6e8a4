"""`make test-engines`: the other engines' profiles against their real tools, without a GPU.
Skipped unless TOLLGATE_ENGINES_VENV names the virtualenv bin/engines-venv built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.simhosts import free_port
from tests.sshd import wait_for

HERE = Path(__file__).resolve().parent
SIMHOST_TOKENIZER = HERE.parents[1] / "simhost" / "tokenizer.json"
VENV = os.environ.get("TOLLGATE_ENGINES_VENV")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if VENV and Path(VENV, "bin", "python").exists():
        return
    skip = pytest.mark.skip(reason="needs TOLLGATE_ENGINES_VENV (make test-engines builds it)")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def venv_python() -> Path:
    return Path(VENV or "", "bin", "python")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """simhost's own tokenizer as a Hugging Face tokenizer folder (no download)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    shutil.copy(SIMHOST_TOKENIZER, folder / "tokenizer.json")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def start_simhost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """Starts `python -m simhost <argv...> --port P` and answers its base URL once /health
    does; every server started is stopped after the module."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(*argv: str) -> str:
        port = free_port()
        log = tmp_path_factory.mktemp("simhost") / "server.log"
        with log.open("wb") as out:
            command = [sys.executable, "-m", "simhost", *argv, "--port", str(port)]
            processes.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: answers(base + "/health"), timeout=60)
        return base

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=30)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
