"""Parses `python -m sglang.launch_server` arguments with SGLang's own parser (ServerArgs), without
starting a server. Run with the test-engines virtualenv's python:

    python sglang_args_check.py '[["--flag", "value", ...], ...]'

each list the words after `-m sglang.launch_server` (one import of SGLang for every arm).
Prints the cache settings SGLang read, one JSON line per list; exits non-zero on any argument
SGLang refuses.
ServerArgs' own checks (__post_init__) probe the accelerator; whether they ran is printed too.
"""

from __future__ import annotations

import argparse
import json
import sys

from sglang.srt.server_args import ServerArgs

READ = (
    "model_path",
    "served_model_name",
    "port",
    "tp_size",
    "context_length",
    "mem_fraction_static",
    "page_size",
    "enable_metrics",
    "enable_cache_report",
    "disable_radix_cache",
    "enable_hierarchical_cache",
    "hicache_ratio",
    "hicache_size",
    "hicache_write_policy",
    "hicache_storage_backend",
    "hicache_storage_backend_extra_config",
)


def main(lines: list[list[str]]) -> int:
    for argv in lines:
        print(json.dumps(read_args(argv)))
    return 0


def read_args(argv: list[str]) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(argv)
    read: dict[str, object] = {name: getattr(args, name, None) for name in READ}
    try:
        ServerArgs.from_cli_args(args)
        read["post_init"] = "ok"
    except Exception as error:  # reported, not judged: it probes a GPU
        read["post_init"] = f"{type(error).__name__}: {str(error)[:200]}"
    return read


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
