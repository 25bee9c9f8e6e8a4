"""Webhooks through the outbox to a real HTTPS receiver in the test process: signed, retried
after a 500, delivered once more, never again; SSRF URLs refused when saved."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import json
import ssl
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.utils import timezone

from gates import services
from gates.alerts import webhooks
from gates.errors import ServiceError
from gates.models import Alert
from gates.services.alerts import settings as alert_settings
from tests.gates.alerts.conftest import fail_gate
from worker import tasks

pytestmark = pytest.mark.django_db


def self_signed(directory) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


class Receiver(http.server.ThreadingHTTPServer):
    """Answers each POST with the next status of `statuses` (then 200), keeping what came."""

    def __init__(self, statuses):
        self.statuses = list(statuses)
        self.received = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((dict(self.headers), body))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(tmp_path, settings):
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    servers = []

    def start(*statuses):
        server = Receiver(statuses)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"https://localhost:{server.server_address[1]}/hook"

    settings.TOLLGATE_WEBHOOK_CA_FILE = cert
    settings.TOLLGATE_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    yield start
    for server in servers:
        server.shutdown()


def hook(actor, vendor_viewer, engagement, url, fmt="tollgate"):
    return services.webhook_create(
        actor=actor, viewer=vendor_viewer, engagement=engagement, url=url, fmt=fmt
    )


def test_a_500_then_200_receiver_gets_the_event_once_more_with_a_signature_that_verifies(
    receiver, actor, vendor_viewer, engagement, host
):
    server, url = receiver(500)
    endpoint, secret = hook(actor, vendor_viewer, engagement, url)
    gate = fail_gate(actor, vendor_viewer, engagement, host)
    copy = Alert.objects.get(channel="webhook", webhook=endpoint)
    tasks.deliver_alert(copy.pk)
    copy.refresh_from_db()
    assert copy.delivered_at is None and "HTTP 500" in copy.last_error
    Alert.objects.filter(pk=copy.pk).update(next_attempt_at=timezone.now())
    tasks.deliver_alerts()
    tasks.deliver_alerts()
    tasks.deliver_alert(copy.pk)
    assert len(server.received) == 2
    headers, body = server.received[1]
    assert webhooks.verify(
        secret.encode(), headers[webhooks.SIGNATURE_HEADER], body, now=time.time()
    )
    assert not webhooks.verify(
        b"another secret", headers[webhooks.SIGNATURE_HEADER], body, now=time.time()
    )
    document = json.loads(body)
    assert document["event"] == "gate_failed" and document["gate"]["id"] == gate.pk
    assert document["decision"]["clause"]["name"] == "gpu_count"
    copy.refresh_from_db()
    assert copy.delivered_at is not None and copy.attempts == 2


def test_a_4xx_answer_is_not_retried(receiver, actor, vendor_viewer, engagement, host):
    server, url = receiver(404)
    endpoint, _ = hook(actor, vendor_viewer, engagement, url)
    fail_gate(actor, vendor_viewer, engagement, host)
    copy = Alert.objects.get(channel="webhook", webhook=endpoint)
    tasks.deliver_alert(copy.pk)
    Alert.objects.filter(pk=copy.pk).update(next_attempt_at=timezone.now())
    assert copy.pk not in services.alert_claim_due()
    assert len(server.received) == 1


def test_the_secret_is_stored_encrypted(receiver, actor, vendor_viewer, engagement):
    _, url = receiver()
    endpoint, secret = hook(actor, vendor_viewer, engagement, url)
    assert secret.encode() not in bytes(endpoint.secret_ciphertext)
    assert alert_settings.webhook_secret(endpoint) == secret.encode()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/x", "https"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://localhost/x", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://10.1.2.3/x", "private"),
        ("https://[::1]/x", "loopback"),
        ("https://[::ffff:192.168.0.1]/x", "private"),
        ("https://user:pw@hooks.example.com/x", "user name"),
        ("ftp://hooks.example.com/x", "https"),
    ],
)
def test_an_ssrf_url_is_refused_when_saved(actor, vendor_viewer, engagement, url, why):
    with pytest.raises(ServiceError) as refused:
        hook(actor, vendor_viewer, engagement, url)
    assert refused.value.field == "url" and why in refused.value.detail
    assert not engagement.webhooks.exists()


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("127.0.0.2", "loopback"),
        ("172.16.0.1", "private"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("100.64.0.1", "non-global"),
    ],
)
def test_address_rules(address, problem):
    ipaddress.ip_address(address)
    assert webhooks.address_problem(address) == problem


def test_slack_and_pagerduty_bodies_have_their_receivers_shape():
    facts = {"event": "gate_failed", "gate": {"url": "https://t.example/gates/1/"}}
    slack = webhooks.payload("slack", facts=facts, subject="G3 failed", key="k", critical=True)
    assert slack == {"text": "G3 failed\nhttps://t.example/gates/1/"}
    pager = webhooks.payload(
        "pagerduty", facts=facts, subject="G3 failed", key="k", critical=True, routing_key="R"
    )
    assert pager["routing_key"] == "R" and pager["event_action"] == "trigger"
    assert pager["dedup_key"] == "k" and pager["payload"]["severity"] == "critical"
    assert pager["payload"]["source"] == "tollgate" and pager["payload"]["summary"] == "G3 failed"


def test_a_stale_signature_does_not_verify():
    body = b"{}"
    header = webhooks.signature(b"s", 1_000, body)
    assert webhooks.verify(b"s", header, body, now=1_100)
    assert not webhooks.verify(b"s", header, body, now=2_000)
    assert not webhooks.verify(b"s", header, b"{ }", now=1_100)


def test_an_address_that_became_private_after_saving_is_refused_at_send(
    receiver, actor, vendor_viewer, engagement, host, settings
):
    """The rules run again at every delivery (a DNS answer may change after the check)."""
    server, url = receiver()
    endpoint, _ = hook(actor, vendor_viewer, engagement, url)
    settings.TOLLGATE_WEBHOOK_ALLOW_PRIVATE = False
    fail_gate(actor, vendor_viewer, engagement, host)
    copy = Alert.objects.get(channel="webhook", webhook=endpoint)
    tasks.deliver_alert(copy.pk)
    copy.refresh_from_db()
    assert copy.delivered_at is None and "loopback" in copy.last_error
    assert copy.pk not in services.alert_claim_due() and not server.received
