"""Delivering outbox rows: email over SMTP, webhooks over HTTPS; retried with backoff.

The one window for a second copy: the SMTP server accepted the message and the worker died
before the row was marked. The row stays locked while sending and is marked in the same
transaction right after the server's reply, before the SMTP connection is closed, so the
window is one commit; a re-send carries the same Message-ID (docs/alerts.md).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from django.conf import settings
from django.core.mail import get_connection
from django.db import transaction
from django.utils import timezone

from gates.alerts import mail, webhooks
from gates.crypto import CryptoError
from gates.models import Alert
from gates.services.alerts.settings import webhook_rules, webhook_secret

MAX_DELIVERY_ATTEMPTS = 8
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3600


class _Failure(Exception):
    def __init__(self, message: str, *, permanent: bool = False) -> None:
        self.permanent = permanent
        super().__init__(message)


def alert_claim_due(*, limit: int = 20) -> list[int]:
    """Ids of alerts due for a delivery attempt (escalations of acknowledged alerts never)."""
    due = Alert.objects.filter(
        delivered_at__isnull=True,
        attempts__lt=MAX_DELIVERY_ATTEMPTS,
        next_attempt_at__lte=timezone.now(),
    ).exclude(level__gt=0, parent__acked_at__isnull=False)
    return list(due.order_by("next_attempt_at").values_list("id", flat=True)[:limit])


def alert_deliver(*, alert_id: int) -> bool:
    """Try to send one alert; returns True once it is delivered. Safe to run twice."""
    connection = None
    try:
        with transaction.atomic():
            alert = _lock_due(alert_id)
            if alert is None:
                return False
            alert.attempts += 1
            try:
                connection = _send(alert)
            except _Failure as failure:
                _retry_later(alert, failure)
                return False
            alert.delivered_at = timezone.now()
            alert.last_error = ""
            alert.save(update_fields=["attempts", "last_error", "delivered_at"])
            return True
    finally:
        if connection is not None:  # QUIT after the commit: not inside the window
            with contextlib.suppress(OSError):
                connection.close()


def _lock_due(alert_id: int) -> Alert | None:
    alert = (
        # of=("self",): only this row is locked; its parent and endpoint are read as they are.
        Alert.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("parent", "webhook")
        .filter(pk=alert_id, delivered_at__isnull=True, attempts__lt=MAX_DELIVERY_ATTEMPTS)
        .first()
    )
    if alert is None or alert.next_attempt_at > timezone.now():
        return None
    if alert.level > 0 and alert.parent.acked_at is not None:
        return None  # acknowledged while this escalation waited: it goes nowhere
    return alert


def _retry_later(alert: Alert, failure: _Failure) -> None:
    alert.last_error = str(failure)[:1000]
    if failure.permanent:
        alert.attempts = MAX_DELIVERY_ATTEMPTS
    delay = min(BACKOFF_BASE_S * 2 ** (alert.attempts - 1), BACKOFF_MAX_S)
    alert.next_attempt_at = timezone.now() + timedelta(seconds=delay)
    alert.save(update_fields=["attempts", "last_error", "next_attempt_at"])


def _send(alert: Alert):
    if alert.channel == Alert.Channel.WEBHOOK:
        _post_webhook(alert)
        return None
    return _send_email(alert)


def _send_email(alert: Alert):
    """Send and return the open connection, for the caller to close after the commit."""
    if not alert.recipients:
        return None
    connection = get_connection(fail_silently=False)
    root = alert.parent or alert
    message = mail.alert_email(
        key=alert.idempotency_key,
        root_key=root.idempotency_key,
        recipients=alert.recipients,
        subject=alert.subject,
        text=alert.body,
        html=alert.html_body,
        connection=connection,
    )
    try:
        connection.open()
        message.send()
    except OSError as error:  # smtplib errors and timeouts are OSErrors
        with contextlib.suppress(OSError):
            connection.close()
        raise _Failure(f"{type(error).__name__}: {error}") from error
    return connection


def _post_webhook(alert: Alert) -> None:
    endpoint = alert.webhook
    if endpoint is None or not endpoint.active:
        raise _Failure("the webhook endpoint was removed", permanent=True)
    try:
        secret = webhook_secret(endpoint)
    except CryptoError as error:
        raise _Failure(str(error), permanent=True) from error
    root = alert.parent or alert
    body = webhooks.json_body(
        webhooks.payload(
            endpoint.format,
            facts=alert.facts,
            subject=alert.subject,
            key=root.idempotency_key,
            critical=alert.critical,
            routing_key=secret.decode(),
        )
    )
    try:
        webhooks.post(
            endpoint.url,
            body,
            secret=secret,
            rules=webhook_rules(),
            timeout_s=settings.TOLLGATE_WEBHOOK_TIMEOUT_S,
            cafile=settings.TOLLGATE_WEBHOOK_CA_FILE or None,
        )
    except webhooks.WebhookDeliveryError as error:
        raise _Failure(str(error), permanent=error.permanent) from error
