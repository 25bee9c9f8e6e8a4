"""gunicorn's settings for every deployment (`gunicorn -c python:config.gunicorn config.wsgi`):
an access log on stdout that never carries a credential. Query parameters with an auth-looking
name are written as [redacted] wherever the request line, query or referrer is logged, and
the Authorization and Cookie headers never are.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

from gunicorn.glogging import Logger

accesslog = "-"
AUTH_LOOKING = re.compile(
    r"token|key|secret|passw|pwd|auth|session|sig|credential|code|jwt|bearer|cookie|csrf",
    re.IGNORECASE,
)
REDACTED = "[redacted]"
# Request headers gunicorn would log with %({name}i)s; never worth writing down.
SECRET_HEADERS = ("authorization", "cookie", "proxy-authorization", "x-api-key")


def redact_query(query: str) -> str:
    """The query string with the value of every auth-looking parameter replaced."""
    pairs = []
    for pair in query.split("&"):
        name = pair.partition("=")[0]
        pairs.append(f"{name}={REDACTED}" if AUTH_LOOKING.search(unquote_plus(name)) else pair)
    return "&".join(pairs)


def redact_uri(uri: str) -> str:
    path, question, query = uri.partition("?")
    return f"{path}?{redact_query(query)}" if question else uri


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        atoms["q"] = redact_query(atoms.get("q") or "")
        atoms["f"] = redact_uri(atoms.get("f") or "-")
        atoms["r"] = " ".join(
            redact_uri(part) if index == 1 else part
            for index, part in enumerate(str(atoms.get("r", "")).split(" "))
        )
        for key in ("{raw_uri}e", "{query_string}e", "{http_referer}e", "{referer}i"):
            if key in atoms:
                atoms[key] = redact_uri(str(atoms[key]))
        for name in SECRET_HEADERS:
            for key in (f"{{{name}}}i", f"{{http_{name.replace('-', '_')}}}e"):
                if key in atoms:
                    atoms[key] = REDACTED
        return atoms


logger_class = RedactingLogger
