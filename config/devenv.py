"""Writes a development .env (DEBUG on, fresh random keys) when none exists.

`make demo` and `make test` call it; production sets real environment variables instead.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
from pathlib import Path

TEMPLATE = """\
# Development settings written by `python -m config.devenv`; not for production.
DEBUG=true
SECRET_KEY={secret_key}
TOLLGATE_ENCRYPTION_KEYS={encryption_key}
"""


def write_dotenv(path: Path) -> bool:
    if path.exists():
        return False
    text = TEMPLATE.format(
        secret_key=secrets.token_urlsafe(50),
        encryption_key=base64.b64encode(os.urandom(32)).decode(),
    )
    path.write_text(text)
    path.chmod(0o600)
    return True


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".env")
    print(f"wrote {target}" if write_dotenv(target) else f"{target} exists; left as it is")
