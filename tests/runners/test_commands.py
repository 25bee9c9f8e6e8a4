"""Profile templates -> validated argv -> one shell line (runners/commands.py)."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.commands import PLACEHOLDERS, checked_argv, fill, placeholders_in, to_shell
from runners.errors import SpecError

SERVE = [
    "{python}",
    "-m",
    "vllm.entrypoints.openai.api_server",
    "--model",
    "{model_path}",
    "--served-model-name",
    "{model}",
    "--port={port}",
    "--gpu-memory-utilization",
    "{gpu_memory_utilization}",
    "--kv-transfer-config",
    '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}',
]
SERVE_VALUES = {
    "python": "/opt/venv/bin/python",
    "model_path": "/models/Qwen2.5-0.5B",
    "model": "Qwen/Qwen2.5-0.5B-Instruct",
    "port": 8000,
    "gpu_memory_utilization": 0.9,
}


def test_it_fills_whole_tokens_and_placeholders_inside_tokens():
    argv = fill(SERVE, SERVE_VALUES)
    assert argv[0] == "/opt/venv/bin/python"
    assert argv[4] == "/models/Qwen2.5-0.5B"
    assert "--port=8000" in argv
    assert argv[9] == "0.9"


def test_it_leaves_json_braces_alone():
    argv = fill(SERVE, SERVE_VALUES)
    assert argv[-1] == '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'


def test_it_keeps_each_value_one_argument_even_with_spaces_in_the_template_value():
    argv = fill(["echo", "{dataset}"], {"dataset": "prefix_repetition"})
    assert argv == ["echo", "prefix_repetition"]


def test_it_lists_the_placeholders_a_template_uses_once_each():
    assert placeholders_in(["{port}", "--x={port}", "{seed}-{port}"]) == ["port", "seed"]


def test_it_refuses_an_unknown_placeholder_naming_it():
    with pytest.raises(SpecError) as caught:
        fill(["run", "{flavour}"], {"flavour": "x"})
    assert caught.value.field == "flavour"
    assert "unknown placeholder" in str(caught.value)


def test_it_refuses_a_missing_value_naming_the_placeholder():
    with pytest.raises(SpecError) as caught:
        fill(["--seed={seed}"], {})
    assert caught.value.field == "seed"
    assert "no value" in str(caught.value)


def test_it_ignores_values_the_template_does_not_use():
    assert fill(["echo", "{port}"], {"port": 80, "seed": "not checked"}) == ["echo", "80"]


@pytest.mark.parametrize("template", [[], "echo {port}", ["ok", 3], ["a\x00b"]])
def test_it_refuses_a_template_that_is_not_a_list_of_text(template):
    with pytest.raises(SpecError) as caught:
        fill(template, {"port": 1})
    assert caught.value.field == "template"


GOOD = [
    ("port", 1, "1"),
    ("port", "65535", "65535"),
    ("seed", 0, "0"),
    ("seed", 4294967295, "4294967295"),
    ("num_prompts", 64.0, "64"),
    ("prefix_len", 0, "0"),
    ("temperature", 0, "0.0"),
    ("temperature", "0.7", "0.7"),
    ("gpu_memory_utilization", 1, "1.0"),
    ("offload_gib", 512, "512.0"),
    ("dataset", "cold_recovery", "cold_recovery"),
    ("model", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("model", "qwen2.5:0.5b", "qwen2.5:0.5b"),
    ("model_path", "/models/llama/8b", "/models/llama/8b"),
    ("model_path", "Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen/Qwen3-Coder-480B-A35B-Instruct"),
    ("python", "/usr/bin/python3", "/usr/bin/python3"),
    ("result_dir", "/var/tmp/tollgate/.results", "/var/tmp/tollgate/.results"),
    ("run_dir", "/var/tmp/tollgate-run-12", "/var/tmp/tollgate-run-12"),
    ("result_filename", "c8_rep2.json", "c8_rep2.json"),
    ("host_address", "gpu-01.lab.example.com", "gpu-01.lab.example.com"),
    ("host_address", "10.0.0.7", "10.0.0.7"),
    ("host_address", "::1", "::1"),
    ("base_url", "http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("base_url", "https://gpu-01:8443/v1", "https://gpu-01:8443/v1"),
    ("base_url", "http://[::1]:8000/", "http://[::1]:8000/"),
    ("tensor_parallel_size", 8, "8"),
    ("max_model_len", "131072", "131072"),
]


@pytest.mark.parametrize(("name", "value", "expected"), GOOD)
def test_it_accepts_and_normalizes_a_good_value(name, value, expected):
    assert fill([f"{{{name}}}"], {name: value}) == [expected]


BAD = [
    ("port", 0),
    ("port", 65536),
    ("port", True),
    ("port", "80; id"),
    ("port", "8e3"),
    ("port", 80.5),
    ("port", "80\n"),
    ("seed", -1),
    ("seed", 2**32),
    ("num_prompts", 0),
    ("temperature", -0.1),
    ("temperature", "nan"),
    ("temperature", float("inf")),
    ("temperature", 10**400),
    ("temperature", "1e999"),
    ("gpu_memory_utilization", 0),
    ("gpu_memory_utilization", 1.01),
    ("dataset", "random; rm -rf /"),
    ("dataset", "Random"),
    ("model", "-rf"),
    ("model", "a b"),
    ("model", "$(id)"),
    ("model", "../../etc/passwd"),
    ("model", "org//model"),
    ("model", "m" * 300),
    ("model", "model\n"),
    ("model_path", "../weights"),
    ("model_path", "/models/../etc"),
    ("model_path", "/models/./x"),
    ("model_path", "/models/a b"),
    ("model_path", "/models/$(id)"),
    ("model_path", "/models/x\n"),
    ("python", ""),
    ("python", "python3"),
    ("run_dir", "/"),
    ("run_dir", "/tmp"),
    ("run_dir", "/tmp/run;id"),
    ("result_filename", "a/b.json"),
    ("result_filename", ".."),
    ("result_filename", "-rf"),
    ("host_address", "-oProxyCommand=id"),
    ("host_address", "fe80::1%$(id)"),
    ("host_address", "host name"),
    ("host_address", "a" * 64 + ".com"),
    ("base_url", "http://127.0.0.1"),
    ("base_url", "ftp://127.0.0.1:21"),
    ("base_url", "http://user:pw@127.0.0.1:80"),
    ("base_url", "http://127.0.0.1:80/?q=1"),
    ("base_url", "http://127.0.0.1:80/$(id)"),
    ("base_url", "http://127.0.0.1:99999"),
    ("base_url", "http://-bad-:80"),
    ("tensor_parallel_size", 0),
    ("max_model_len", None),
    ("max_model_len", [1]),
]


@pytest.mark.parametrize(("name", "value"), BAD)
def test_it_refuses_a_bad_value_with_a_spec_error_naming_the_placeholder(name, value):
    with pytest.raises(SpecError) as caught:
        fill([f"--x={{{name}}}"], {name: value})
    assert caught.value.field == name
    assert str(caught.value).startswith(f"{name}: ")


def test_its_error_message_shortens_a_very_long_value():
    with pytest.raises(SpecError) as caught:
        fill(["{model}"], {"model": "x y" * 5000})
    assert len(str(caught.value)) < 200


def test_the_table_has_every_placeholder_the_profiles_start_with():
    expected = {
        "python", "port", "host_address", "model", "model_path", "base_url", "run_dir",
        "dataset", "num_prompts", "max_concurrency", "input_len", "output_len", "prefix_len",
        "suffix_len", "seed", "temperature", "offload_gib", "result_dir", "result_filename",
        "gpu_memory_utilization", "tensor_parallel_size", "max_model_len",
    }  # fmt: skip
    assert expected <= set(PLACEHOLDERS)


@pytest.mark.parametrize("argv", [[], "ls -l", ["ls", None], ["a\x00"], ["lone \ud800"]])
def test_to_shell_refuses_what_is_not_a_list_of_text(argv):
    with pytest.raises(SpecError) as caught:
        to_shell(argv)
    assert caught.value.field == "argv"


def test_checked_argv_returns_a_list_copy():
    source = ("printf", "%s")
    assert checked_argv(source) == ["printf", "%s"]


TEXT = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")


@given(st.lists(st.text(TEXT), min_size=1))
def test_to_shell_splits_back_into_the_same_arguments(argv):
    assert shlex.split(to_shell(argv)) == argv


@settings(max_examples=60, deadline=None)
@given(st.text(TEXT, max_size=200))
def test_a_real_sh_receives_any_text_as_one_literal_argument(value):
    line = to_shell(["printf", "%s|%s", value, "end"])
    result = subprocess.run(["/bin/sh", "-c", line], capture_output=True, check=True)
    assert result.stdout.decode("utf-8", "surrogateescape") == f"{value}|end"


@given(st.integers(min_value=1, max_value=65535))
def test_every_valid_port_round_trips(port):
    assert fill(["{port}"], {"port": port}) == [str(port)]


@given(st.text(max_size=300))
def test_a_model_name_is_either_refused_or_free_of_shell_syntax(text):
    try:
        [value] = fill(["{model}"], {"model": text})
    except SpecError:
        return
    assert shlex.quote(value) == value  # nothing in it a shell would interpret
    assert not value.startswith("-")
