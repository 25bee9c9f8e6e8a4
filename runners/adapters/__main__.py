"""Command line: `python -m runners.adapters FILE [--tool NAME]` prints the normalized JSON.

The only adapter code that reads a file. Exit 0 on success, 2 with one line on stderr for
unknown or broken input (or bad usage), 3 with one line for a bug in an adapter.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import NoReturn

from runners.adapters import ADAPTERS, parse
from runners.adapters.errors import AdapterError, one_line

EXIT_BAD_INPUT = 2
EXIT_BUG = 3
# Far above any real tool output; keeps a wrong path (a disk image, a log) from eating memory.
MAX_INPUT_BYTES = 512 * 1024 * 1024


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line, like every other failure here."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {one_line(message, 300)}\n")


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    path = arguments.file
    source = "<stdin>" if path == "-" else path
    try:
        data = _read(path, source)
        result = parse(data, tool=arguments.tool, source=source)
        output = json.dumps(result, indent=2, allow_nan=False)
    except AdapterError as error:
        return _fail(EXIT_BAD_INPUT, str(error))
    except Exception as error:  # a bug, but the contract is one line and never a traceback
        return _fail(EXIT_BUG, f"{source}: adapter bug ({type(error).__name__}: {error})")
    sys.stdout.write(output + "\n")
    return 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m runners.adapters",
        description="Print a tool output file as Tollgate's normalized JSON.",
    )
    parser.add_argument("file", help="the tool output file, or - for standard input")
    parser.add_argument("--tool", help=f"skip detection: one of {', '.join(ADAPTERS)}")
    return parser.parse_args(argv)


def _read(path: str, source: str) -> bytes:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        raise AdapterError(
            f"cannot read the file ({error.strerror or error})", source=source
        ) from None
    if len(data) > MAX_INPUT_BYTES:
        raise AdapterError(f"larger than {MAX_INPUT_BYTES} bytes: not tool output", source=source)
    return data


def _fail(code: int, message: str) -> int:
    sys.stderr.write(one_line(message, 500) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
