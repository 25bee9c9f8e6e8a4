"""Alert emails: a text and an HTML part, a Message-ID derived from the alert's key, sent over
a connection the caller closes after recording the delivery (see alert_deliver)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.mail import EmailMultiAlternatives


def message_id(key: str) -> str:
    """Stable per key: a re-send after a crash carries the same id, so clients fold it."""
    return f"<alert-{hashlib.sha256(key.encode()).hexdigest()[:32]}@tollgate>"


def alert_email(
    *,
    key: str,
    root_key: str | None,
    recipients: list[str],
    subject: str,
    text: str,
    html: str,
    connection,
) -> EmailMultiAlternatives:
    headers = {"Message-ID": message_id(key), "Auto-Submitted": "auto-generated"}
    if root_key and root_key != key:  # an escalation threads under the first message
        headers["In-Reply-To"] = headers["References"] = message_id(root_key)
    message = EmailMultiAlternatives(
        subject=subject,
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=recipients,
        headers=headers,
        connection=connection,
    )
    if html:
        message.attach_alternative(html, "text/html")
    return message
