"""Alert fixtures: a real SMTP server (aiosmtpd) and a failed gate whose alert is queued."""

from __future__ import annotations

import socket
import threading
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller

from gates import services
from tests.contract import sign_as_both


class Inbox:
    """An aiosmtpd handler that keeps every message; `hold` makes DATA wait before replying."""

    def __init__(self):
        self.messages = []
        self.hold = threading.Event()
        self.hold.set()

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((sorted(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        self.hold.wait(30)
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def text_and_html(message) -> tuple[str, str]:
    parts = {
        part.get_content_type(): part.get_payload(decode=True).decode()
        for part in message.walk()
        if not part.is_multipart()
    }
    return parts["text/plain"], parts["text/html"]


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.TOLLGATE_ONCALL_EMAILS = ["oncall@vendor.example"]
    yield inbox
    inbox.hold.set()
    controller.stop()


def fail_gate(actor, viewer, engagement, host, *, kind="G1", verdict="fail", clauses=None):
    gate = engagement.gates.get(kind=kind)
    sign_as_both(gate)  # a verdict on an unsigned spec is a rehearsal: it alerts nobody
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clauses = clauses or [
        {"check": "gpu_count", "verdict": verdict, "cause": "4 observed, 8 expected"}
    ]
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": clauses})
    return gate


@pytest.fixture
def failed_gate(
    actor, vendor_viewer, engagement, host, customer_owner, customer_viewer, other_owner
):
    """G1 failed once: the outbox holds one alert."""
    return fail_gate(actor, vendor_viewer, engagement, host)
