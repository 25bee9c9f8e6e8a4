"""The pair the fidelity tests drive: one real vLLM 0.32 (CPU, the tiny model) and one simhost,
both with max_model_len 1024 and the same tokenizer file, started once per session
(tests/realvllm/conftest.py's `servers`), and the plain HTTP helpers that ask them."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from simhost.textgen import join_words, vocab
from tests.simhost.conftest import REPO, simhost_env
from tests.simhosts import free_port
from tests.sshd import wait_for

NAME = "tiny-llama"
MAX_MODEL_LEN = 1024


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stream(url: str, body: dict) -> list[dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        lines = response.read().decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def run_pair(venv: Path, tiny_model: Path, logs: Path) -> Iterator[dict[str, str]]:
    """{"vllm": url, "simhost": url}, both healthy; stopped when the generator closes."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    ports = {"vllm": free_port(), "simhost": free_port()}
    commands = {
        "vllm": [
            str(venv / "bin" / "vllm"),
            "serve",
            str(tiny_model),
            "--served-model-name",
            NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(ports["vllm"]),
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--enable-prefix-caching",
        ],
        "simhost": [
            sys.executable,
            "-m",
            "simhost",
            "serve",
            "--model-preset",
            "sim-1b",
            "--served-model-name",
            NAME,
            "--port",
            str(ports["simhost"]),
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--enable-prefix-caching",
            "--time-scale",
            "0.2",
        ],
    }
    environments = {"vllm": env, "simhost": simhost_env(logs)}
    processes = {}
    try:
        for name, command in commands.items():
            with open(logs / f"{name}.log", "wb") as log:
                processes[name] = subprocess.Popen(
                    command,
                    env=environments[name],
                    cwd=REPO,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        wait_for(lambda: all(healthy(url) for url in urls.values()), timeout=600, interval=1)
        yield urls
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def prompts(count: int, length: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    text = "Tollgate decides each gate from what the tools measured, not what anyone says. "
    return [
        text[: rng.randint(20, len(text))] + join_words(rng.choices(vocab(), k=length))
        for _ in range(count)
    ]
