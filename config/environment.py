"""Reading settings from the environment: NAME or NAME_FILE (Docker secrets), typed, and a
local .env that never overrides the real environment. Used by config/settings.py only."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def read_dotenv(path: Path) -> None:
    """Load KEY=VALUE lines from a local .env without overriding the real environment."""
    if not path.is_file():
        return
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ImproperlyConfigured(f"{path}:{number}: expected KEY=VALUE")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def env(name: str, default: str | None = None) -> str | None:
    """The value of NAME, or the content of the file named by NAME_FILE (Docker secrets)."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(f"{name}_FILE={file_path}: {error.strerror}") from error
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    value = env(name)
    if value is None:
        return default
    if value.strip().lower() in TRUE_WORDS:
        return True
    if value.strip().lower() in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def envint(name: str, default: int) -> int:
    value = env(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from error


def envlist(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in (env(name, default) or "").split(",") if item.strip()]
