"""Signed acknowledge links (django.core.signing): whoever holds the email may acknowledge
its alert, until the link expires; the alert's own state makes the link single-use."""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.urls import reverse

SALT = "tollgate.alerts.ack"


class AckLinkError(Exception):
    """The link is tampered with, malformed or expired; `reason` says which, for the page."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def ack_token(alert_key: str) -> str:
    # The key, not the row id: the body carrying the link is rendered before the row exists.
    return signing.TimestampSigner(salt=SALT).sign_object({"k": alert_key}, compress=True)


def ack_url(alert_key: str) -> str:
    return f"{settings.SITE_URL}{reverse('gates:alert-ack', args=[ack_token(alert_key)])}"


def ack_key(token: str) -> str:
    """The alert key a valid token names; raises AckLinkError otherwise."""
    signer = signing.TimestampSigner(salt=SALT)
    try:
        value = signer.unsign_object(token, max_age=settings.TOLLGATE_ACK_LINK_MAX_AGE_S)
    except signing.SignatureExpired as error:
        raise AckLinkError("this acknowledge link has expired") from error
    except (signing.BadSignature, ValueError) as error:
        raise AckLinkError("this acknowledge link is not valid") from error
    if not isinstance(value, dict) or not isinstance(value.get("k"), str):
        raise AckLinkError("this acknowledge link is not valid")
    return value["k"]
