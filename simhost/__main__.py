"""Entry point for `python -m simhost` (the vLLM host test double)."""

from __future__ import annotations

import sys

from simhost.cli import main

if __name__ == "__main__":
    sys.exit(main())
