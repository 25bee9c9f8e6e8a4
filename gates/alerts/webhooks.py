"""Webhooks: the SSRF rules a URL must pass, the body each receiver format expects, the
HMAC-SHA256 signature, and the HTTPS POST itself (the one place alerts leave over HTTP).

The address is resolved and checked when the URL is saved and again at every send, and the
connection goes to the address that was checked, so a DNS answer that changes in between
(rebinding) cannot point a delivery at an internal service. Redirects are never followed.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

SIGNATURE_HEADER = "Tollgate-Signature"
USER_AGENT = "Tollgate-Webhook/1"


class WebhookRefusedError(ValueError):
    """The URL breaks a rule (scheme, address); never retried."""


class WebhookDeliveryError(Exception):
    """The receiver could not be reached or did not accept; `permanent` ends the retries."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        self.permanent = permanent
        super().__init__(message)


@dataclass(frozen=True)
class UrlRules:
    allow_http: bool
    allow_private: bool


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str


def check_url(url: str, rules: UrlRules) -> Target:
    """The target to connect to, or WebhookRefusedError naming the broken rule."""
    parts = urlsplit(url)
    allowed = ("https", "http") if rules.allow_http else ("https",)
    if parts.scheme not in allowed:
        raise WebhookRefusedError("the URL must be https")
    if not parts.hostname or parts.username or parts.password:
        raise WebhookRefusedError("the URL needs a host and no user name or password")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise WebhookRefusedError("the URL's port is not a number") from error
    address = _checked_address(parts.hostname, port, rules)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, address)


def _checked_address(host: str, port: int, rules: UrlRules) -> str:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        raise WebhookRefusedError(f"the host {host!r} does not resolve") from error
    # IPv4 and IPv6 socket addresses start with the address text (typeshed also allows int).
    addresses = [str(info[4][0]) for info in infos]
    # Every address the name has must pass: the resolver may hand out any of them later.
    for address in addresses:
        reason = address_problem(address)
        if reason and not rules.allow_private:
            raise WebhookRefusedError(f"the host {host!r} resolves to a {reason} address")
    return addresses[0]


def address_problem(address: str) -> str | None:
    """Why an address is no place for a webhook (loopback, private...), or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for reason in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{reason}"):
            return reason.replace("_", "-")
    return None if ip.is_global else "non-global"


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`; the time stops replays."""
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: bytes, header: str, body: bytes, *, now: float, tolerance_s: int = 300) -> bool:
    """What a receiver does (docs/alerts.md has the same in a few lines)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not fields.get("t", "").isdigit() or abs(now - int(fields["t"])) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, int(fields["t"]), body), header)


def payload(
    fmt: str, *, facts: dict, subject: str, key: str, critical: bool, routing_key: str = ""
) -> dict:
    """The JSON body in the receiver's shape: Tollgate's own, Slack's or PagerDuty's."""
    if fmt == "slack":
        link = (facts.get("gate") or facts.get("engagement") or {}).get("url", "")
        return {"text": f"{subject}\n{link}".strip()}
    if fmt == "pagerduty":
        return {
            "routing_key": routing_key,
            "event_action": "trigger",
            "dedup_key": key[:255],
            "payload": {
                "summary": subject[:1024],
                "source": "tollgate",
                "severity": "critical" if critical else "warning",
                "custom_details": facts,
            },
        }
    return {
        "id": key,
        "event": facts.get("event"),
        "critical": critical,
        "subject": subject,
        **facts,
    }


def post(
    url: str,
    body: bytes,
    *,
    secret: bytes,
    rules: UrlRules,
    timeout_s: float,
    cafile: str | None = None,
) -> int:
    """POST the signed body; returns the status, or raises WebhookDeliveryError."""
    try:
        target = check_url(url, rules)
    except WebhookRefusedError as error:
        raise WebhookDeliveryError(str(error), permanent=True) from error
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature(secret, int(time.time()), body),
    }
    connection = _connection(target, timeout_s, cafile)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException) as error:
        raise WebhookDeliveryError(f"{type(error).__name__}: {error}") from error
    finally:
        connection.close()
    if 200 <= status < 300:
        return status
    # 408 and 429 ask to come back later, as 5xx do; any other 4xx will not heal by retrying.
    retry = status >= 500 or status in (408, 429)
    raise WebhookDeliveryError(f"the receiver answered HTTP {status}", permanent=not retry)


def _connection(target: Target, timeout_s: float, cafile: str | None) -> http.client.HTTPConnection:
    if target.scheme == "https":
        context = ssl.create_default_context(cafile=cafile)
        return _PinnedHTTPSConnection(target, timeout=timeout_s, context=context)
    return _PinnedHTTPConnection(target, timeout=timeout_s)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked address while naming the host in the Host header."""

    def __init__(self, target: Target, **kwargs) -> None:
        super().__init__(target.host, target.port, **kwargs)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """The same over TLS: the certificate is checked against the host name (SNI)."""

    def __init__(self, target: Target, *, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self._address = target.address
        # The base class sets ALPN on this same object; kept under our name, not its private one.
        self._tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def json_body(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
