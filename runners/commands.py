"""Profile command templates -> validated argv -> one shell-quoted command line.

Pure: no I/O, no Django, no paramiko. Every value that reaches a remote shell passes a Kind here.
"""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from runners.errors import SpecError

# A placeholder is "{identifier}"; any other brace is literal, so JSON arguments such as
# --kv-transfer-config '{"kv_connector": "X"}' need no escaping (JSON keys are always quoted).
# The host helper's command line, to fill with {python} and {run_dir}. -S: hostctl.py is
# standard library only, so site-packages (a venv's .pth files) need not load: Python's bare
# start 29 -> 10 ms here, a health check 65 -> 61 ms (bench/g3_harness_overhead.py), paid on
# every health check, /metrics scrape, listener check and soak read.
HOSTCTL_ARGV = ("{python}", "-S", "{run_dir}/hostctl.py")

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PATH = re.compile(r"^(?:/[A-Za-z0-9._@+,=-]+)+$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*(?:/[A-Za-z0-9][A-Za-z0-9._:-]*)*$")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*")
_URL_PATH = re.compile(r"^(?:/[A-Za-z0-9._~-]*)*$")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_SHOWN_CHARS = 60


class KindError(ValueError):
    """A value does not fit its kind; the message says why (without the placeholder name)."""


@dataclass(frozen=True)
class Kind:
    """What a placeholder accepts: `check` returns the canonical text or raises KindError."""

    description: str
    check: Callable[[object], str]


def integer(low: int, high: int) -> Kind:
    def check(value: object) -> str:
        number = _as_integer(value)
        if not low <= number <= high:
            raise KindError(f"must be between {low} and {high}, got {number}")
        return str(number)

    return Kind(f"an integer from {low} to {high}", check)


def number(low: float, high: float, *, low_open: bool = False) -> Kind:
    def check(value: object) -> str:
        found = _as_number(value)
        too_low = found <= low if low_open else found < low
        if too_low or found > high:
            bracket = "(" if low_open else "["
            raise KindError(f"must be in {bracket}{low}, {high}], got {found}")
        return repr(found)

    return Kind(f"a number from {low} to {high}", check)


def choice(*words: str) -> Kind:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in words:
            raise KindError(f"must be one of {', '.join(words)}; got {_show(value)}")
        return value

    return Kind(f"one of {', '.join(words)}", check)


def pattern(regex: re.Pattern[str], description: str, *, max_length: int = 255) -> Kind:
    def check(value: object) -> str:
        if not isinstance(value, str) or len(value) > max_length or not regex.fullmatch(value):
            raise KindError(f"must be {description}; got {_show(value)}")
        return value

    return Kind(description, check)


def absolute_path() -> Kind:
    def check(value: object) -> str:
        if not isinstance(value, str) or len(value) > 4096 or not _PATH.fullmatch(value):
            raise KindError(f"must be an absolute path of plain names; got {_show(value)}")
        if any(part in (".", "..") for part in value.split("/")):
            raise KindError(f"must not contain '.' or '..' components; got {_show(value)}")
        return value

    return Kind("an absolute path", check)


def run_directory() -> Kind:
    """An absolute path at least two levels deep: it is created, and removed on cleanup."""
    path = absolute_path()

    def check(value: object) -> str:
        text = path.check(value)
        if text.count("/") < 2:
            raise KindError(f"must be at least two levels below /; got {_show(value)}")
        return text

    return Kind("an absolute run directory path, two levels or more below /", check)


def model_source() -> Kind:
    """Where `vllm serve` loads weights from: an absolute path or a hub id like org/name."""
    path = absolute_path()
    model_id = pattern(_MODEL_NAME, "a hub model id")

    def check(value: object) -> str:
        if isinstance(value, str) and value.startswith("/"):
            return path.check(value)
        try:
            return model_id.check(value)
        except KindError:
            raise KindError(
                f"must be an absolute path or a hub model id (org/name); got {_show(value)}"
            ) from None

    return Kind("an absolute path or a hub model id", check)


def host_address() -> Kind:
    def check(value: object) -> str:
        if isinstance(value, str) and (_HOST_NAME.fullmatch(value) or _is_ip(value)):
            return value
        raise KindError(f"must be a host name or an IP address; got {_show(value)}")

    return Kind("a host name or IP address", check)


def http_url() -> Kind:
    def check(value: object) -> str:
        if not isinstance(value, str) or len(value) > 2048:
            raise KindError(f"must be an http(s) URL; got {_show(value)}")
        _check_url(value)
        return value

    return Kind("an http(s) URL with an explicit host:port", check)


def _check_url(text: str) -> None:
    parts = urlsplit(text)
    host = parts.hostname or ""
    problem = None
    if parts.scheme not in ("http", "https"):
        problem = "the scheme must be http or https"
    elif parts.username or parts.password or parts.query or parts.fragment:
        problem = "credentials, query and fragment are not allowed"
    elif not (_HOST_NAME.fullmatch(host) or _is_ip(host)):
        problem = "the host must be a host name or an IP address"
    elif _port_of(parts) is None:
        problem = "the port must be given explicitly (host:port)"
    elif not _URL_PATH.fullmatch(parts.path):
        problem = "the path may hold only letters, digits and ._~-/"
    if problem:
        raise KindError(f"{problem}; got {_show(text)}")


def _port_of(parts: SplitResult) -> int | None:
    try:
        port = parts.port
    except ValueError:
        return None
    return port if port else None


def _is_ip(text: str) -> bool:
    if "%" in text:  # ipaddress accepts any IPv6 scope id text after '%'
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _as_integer(value: object) -> int:
    # bool is an int subclass; True as a port or seed is a bug upstream, not a 1.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    raise KindError(f"must be an integer; got {_show(value)}")


def _as_number(value: object) -> float:
    problem = KindError(f"must be a finite number; got {_show(value)}")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise problem
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        raise problem
    try:
        found = float(value)
    except OverflowError:  # an int beyond the float range
        raise problem from None
    if not math.isfinite(found):
        raise problem
    return found


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


PLACEHOLDERS: dict[str, Kind] = {
    "python": absolute_path(),
    "port": integer(1, 65535),
    "host_address": host_address(),
    "model": pattern(_MODEL_NAME, "a model name (letters, digits, ._:- and / between parts)"),
    "model_path": model_source(),
    "base_url": http_url(),
    "run_dir": run_directory(),
    "dataset": choice("random", "prefix_repetition", "cold_recovery", "sharegpt"),
    "num_prompts": integer(1, 1_000_000),
    "max_concurrency": integer(1, 100_000),
    "input_len": integer(1, 10_000_000),
    "output_len": integer(1, 10_000_000),
    "prefix_len": integer(0, 10_000_000),
    "suffix_len": integer(0, 10_000_000),
    "seed": integer(0, 2**32 - 1),
    "temperature": number(0.0, 2.0),
    "offload_gib": number(0.0, 1_048_576.0),
    "result_dir": absolute_path(),
    "result_filename": pattern(_FILE_NAME, "a file name (letters, digits, ._-)"),
    "gpu_memory_utilization": number(0.0, 1.0, low_open=True),
    "tensor_parallel_size": integer(1, 64),
    "max_model_len": integer(1, 10_000_000),
    # Added for the gate programs (runners/program/perform.py) and the built-in profiles.
    "num_prefixes": integer(1, 1_000_000),
    # Which offload tier an arm uses; side services (runners/engine.py) start by it.
    "offload_backend": choice("native", "lmcache", "hicache", "mooncake", "kvbm"),
    "max_tokens": integer(1, 100_000),
    "run_root": absolute_path(),
    # The HTTP port of LMCache's multi-process server (its health check), offload_backend lmcache.
    "lmcache_http_port": integer(1, 65535),
    # The lmcache profile: its server's ZMQ port (LMCacheMPConnector's lmcache.mp.port). Its
    # lmcache_mp_* counters are on the HTTP port's /metrics: `lmcache server` opens no other.
    "lmcache_mp_port": integer(1, 65535),
    # cold_recovery's flush phase (docs/gates.md): how many unrelated prompts, and their seed.
    "flush_prompts": integer(1, 10_000_000),
    "flush_seed": integer(0, 2**32 - 1),
    # MiB a GPU may hold before the run's first server starts (runners/contract.py).
    "gpu_memory_held_max_mib": number(0.0, 1_048_576.0),
    # simhost, the emulated host: its scenario, host description, faults and time scale.
    "time_scale": number(0.0, 1000.0, low_open=True),
    "sim_scenario": choice("offload-helps", "offload-helps-compact", "offload-does-not-help"),
    "sim_model_preset": choice("sim-1b", "sim-480b-tp8"),
    "sim_host_config": absolute_path(),
    "sim_fault_file": absolute_path(),
    # A trace replay (runners/program/replay.py): the file uploaded to the host, and where the
    # client writes one record per request.
    "replay_file": absolute_path(),
    "records_file": absolute_path(),
    # The vllm profile replays with `vllm bench serve --dataset-name timed_trace` instead: its
    # trace file, its row count, the tokens per hash id, and the client's PYTHONHASHSEED
    # (Python takes 0 to 2**32 - 1), which fixes the prompts vLLM makes from the hash ids.
    "timed_trace_file": absolute_path(),
    "replay_prompts": integer(1, 100_000_000),
    "trace_block_tokens": integer(1, 1_000_000),
    "replay_seed": integer(0, 2**32 - 1),
    # Engine tunables beyond vLLM's (docs/hosts.md, "Engines"). SGLang HiCache: the host tier
    # as a multiple of the GPU pool, or in GB per rank (overrides the ratio); how it is written;
    # the L3 storage behind it; the KV page size in tokens.
    "hicache_ratio": number(1.0, 1000.0, low_open=True),
    "hicache_size_gb": number(0.0, 1_048_576.0),
    "hicache_write_policy": choice("write_through", "write_through_selective", "write_back"),
    "hicache_storage_backend": choice("file", "mooncake", "hf3fs", "nixl", "aibrix", "dynamic"),
    "page_size": integer(1, 4096),
    "mem_fraction_static": number(0.0, 1.0, low_open=True),
    # Mooncake store: the master's RPC and metrics ports, its HTTP metadata server's port.
    "mooncake_rpc_port": integer(1, 65535),
    "mooncake_metrics_port": integer(1, 65535),
    "mooncake_metadata_port": integer(1, 65535),
    # The JSON file vLLM's MooncakeStoreConnector reads (MOONCAKE_CONFIG_PATH), on the host.
    "mooncake_config_path": absolute_path(),
    # Dynamo KVBM: the host tier in GB, and the port of its own metrics endpoint.
    "kvbm_cpu_cache_gb": number(0.0, 1_048_576.0),
    "kvbm_metrics_port": integer(1, 65535),
    # sglang.bench_serving's generated-shared-prefix dataset: prompts per shared prefix.
    "prompts_per_prefix": integer(1, 1_000_000),
}


def placeholders_in(template: Sequence[str]) -> list[str]:
    """The placeholder names a template uses, in order of first use."""
    names: list[str] = []
    for token in _checked_template(template):
        for name in _PLACEHOLDER.findall(token):
            if name not in names:
                names.append(name)
    return names


def fill(
    template: Sequence[str],
    values: Mapping[str, object],
    *,
    kinds: Mapping[str, Kind] = PLACEHOLDERS,
) -> list[str]:
    """Replace each {name} with its validated value; every token stays one argv element."""
    tokens = _checked_template(template)
    checked = {name: _checked_value(name, values, kinds) for name in placeholders_in(tokens)}
    return [_PLACEHOLDER.sub(lambda found: checked[found.group(1)], token) for token in tokens]


def checked_values(
    values: Mapping[str, object], *, kinds: Mapping[str, Kind] = PLACEHOLDERS
) -> dict[str, object]:
    """Every value that has a kind, checked now rather than when a template first uses it, so
    a run's bad path (a run_root with '..') is refused before anything touches its host."""
    for name, value in values.items():
        if name in kinds and value is not None:
            _checked_value(name, values, kinds)
    return dict(values)


def _checked_template(template: Sequence[str]) -> list[str]:
    if isinstance(template, str) or not template:
        raise SpecError("a command template must be a non-empty list of tokens", field="template")
    for token in template:
        if not isinstance(token, str) or "\x00" in token:
            raise SpecError(
                f"every token must be text without NUL; got {_show(token)}", field="template"
            )
    return list(template)


def _checked_value(name: str, values: Mapping[str, object], kinds: Mapping[str, Kind]) -> str:
    kind = kinds.get(name)
    if kind is None:
        raise SpecError("unknown placeholder in the command template", field=name)
    if name not in values or values[name] is None:
        raise SpecError(f"no value given (expected {kind.description})", field=name)
    try:
        return kind.check(values[name])
    except KindError as problem:
        raise SpecError(str(problem), field=name) from None


def checked_argv(argv: Sequence[str]) -> list[str]:
    """argv as a list, refused unless it is a non-empty list of text without NUL bytes."""
    if isinstance(argv, str) or not argv:
        raise SpecError("a command must be a non-empty list of arguments", field="argv")
    for arg in argv:
        if not isinstance(arg, str) or "\x00" in arg or not _encodable(arg):
            raise SpecError(
                f"every argument must be UTF-8 text without NUL; got {_show(arg)}", field="argv"
            )
    return list(argv)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")  # a lone surrogate cannot travel as UTF-8
    except UnicodeEncodeError:
        return False
    return True


def to_shell(argv: Sequence[str]) -> str:
    """One POSIX-shell command line in which each element of argv is exactly one word."""
    return " ".join(shlex.quote(arg) for arg in checked_argv(argv))
