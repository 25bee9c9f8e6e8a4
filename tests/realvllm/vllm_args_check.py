"""Parses `vllm serve` arguments with vLLM's own parser and builds its engine arguments and KV
transfer config, without starting an engine. Run with the test-vllm virtualenv's python:

    python vllm_args_check.py MODEL [--flag value ...]      (the words after `vllm serve`)

Prints the offload settings vLLM read; exits non-zero on any argument vLLM refuses.
"""

from __future__ import annotations

import sys

from vllm.config import CacheConfig, KVTransferConfig, VllmConfig
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser


def main(argv: list[str]) -> int:
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    args = parser.parse_args(["--model", argv[0], *argv[1:]])
    engine = AsyncEngineArgs.from_cli_args(args)
    cache = CacheConfig(
        enable_prefix_caching=engine.enable_prefix_caching,
        kv_offloading_size=engine.kv_offloading_size,
        kv_offloading_backend=engine.kv_offloading_backend,
    )
    # The expansion VllmConfig applies to the two top-level flags (or the --kv-transfer-config
    # given, which vLLM has already validated into its config class), on a config of its own.
    config = VllmConfig.__new__(VllmConfig)
    object.__setattr__(config, "cache_config", cache)
    object.__setattr__(config, "kv_transfer_config", engine.kv_transfer_config)
    VllmConfig._post_init_kv_transfer_config(config)
    transfer: KVTransferConfig | None = config.kv_transfer_config
    print(f"kv_offloading_backend={cache.kv_offloading_backend}")
    print(f"kv_offloading_size={cache.kv_offloading_size}")
    print(f"prefix_caching={cache.enable_prefix_caching}")
    print(f"kv_connector={transfer.kv_connector if transfer else None}")
    if transfer is not None:
        # A connector vLLM ships is one its factory registered; an outside one (Dynamo's KVBM)
        # names the module vLLM imports it from.
        print(f"kv_connector_registered={transfer.kv_connector in KVConnectorFactory._registry}")
        print(f"kv_connector_module_path={transfer.kv_connector_module_path}")
        print(f"kv_role={transfer.kv_role}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
