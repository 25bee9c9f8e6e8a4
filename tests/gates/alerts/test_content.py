"""What an alert says comes only from its own engagement: generated organizations, titles,
clauses and failure reasons never put another customer's name, or any secret, in a message."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gates import services
from gates.alerts.content import redact
from gates.models import Alert, Organization
from tests.conftest import PRIVATE_KEY, make_host, make_user
from tests.contract import sign_as_both

pytestmark = pytest.mark.django_db

NAME = st.text(alphabet=st.characters(categories=("L", "N")), min_size=5, max_size=24)
# Another customer's name or title holds at least one letter beyond ASCII. Every word Tollgate
# writes itself (template text, JSON keys such as "cause", ids, generated e-mail addresses such as
# owner6093914638261695554@example.com) is ASCII, so a hit on such a name is a leak, never a
# coincidence: the plain NAME strategy once failed CI on a foreign title "cause" and a name "00001".
NON_ASCII_LETTER = st.characters(categories=("L",), min_codepoint=0x100).filter(
    lambda letter: not letter.lower().isascii()  # the Kelvin sign lowers to "k"
)
FOREIGN = st.tuples(NAME, NON_ASCII_LETTER, st.integers(0, 24)).map(
    lambda parts: parts[0][: parts[2]] + parts[1] + parts[0][parts[2] :]
)
CAUSE = st.text(alphabet=st.characters(categories=("L", "N", "Zs", "P")), max_size=80)


def alert_text(alert: Alert) -> str:
    return "\n".join(
        [
            alert.subject,
            alert.body,
            alert.html_body,
            json.dumps(alert.facts, ensure_ascii=False),  # a leaked name stays findable
            *alert.recipients,
        ]
    )


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ours=NAME,
    theirs=FOREIGN,
    title=NAME,
    other_title=FOREIGN,
    cause=CAUSE,
    verdict=st.sampled_from(["fail", "inconclusive", "invalid", "infra_error"]),
)
def test_a_customers_alerts_never_name_another_customer_or_carry_a_secret(
    actor, vendor_viewer, ours, theirs, title, other_title, cause, verdict
):
    for a in (ours, title):
        for b in (theirs, other_title):
            assume(b.lower() not in a.lower() and a.lower() not in b.lower())
    assume(theirs.lower() not in cause.lower() and other_title.lower() not in cause.lower())
    with transaction.atomic():
        texts = raise_every_event(
            actor, vendor_viewer, ours, theirs, title, other_title, cause, verdict
        )
        transaction.set_rollback(True)
    assert any(title.lower() in text.lower() for text in texts)  # the search can see a name
    for text in texts:
        lowered = text.lower()
        assert theirs.lower() not in lowered and other_title.lower() not in lowered
        assert "PRIVATE KEY" not in text and "otherowner" not in text
        assert "theirs.example" not in text


def raise_every_event(actor, viewer, ours, theirs, title, other_title, cause, verdict):
    mine = Organization.objects.create(name=ours, slug=f"o{abs(hash(ours))}", kind="customer")
    other = Organization.objects.create(
        name=theirs,
        slug=f"t{abs(hash(theirs))}",
        kind="customer",
        alert_emails=["ops@theirs.example"],
    )
    make_user(f"owner{abs(hash(ours))}", mine, "customer_owner")
    make_user("otherowner", other, "customer_owner")
    engagement = services.engagement_create(
        actor=actor, organization=mine, title=title, model_name="m"
    )
    services.engagement_create(actor=actor, organization=other, title=other_title, model_name="m")
    host = make_host(mine)
    make_host(other, name="their-gpu")
    gate = engagement.gates.get(kind="G1")
    sign_as_both(gate)
    run = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_claim(run_id=run.pk)
    clause = {"check": "gpu_count", "verdict": verdict, "cause": cause}
    services.decision_record(run_id=run.pk, result={"verdict": verdict, "clauses": [clause]})
    second = services.run_create(actor=actor, viewer=viewer, gate=gate, host=host)
    services.run_fail(
        run_id=second.pk, outcome="infra_error", reason=f"ssh said {cause}\n{PRIVATE_KEY}"
    )
    return [alert_text(alert) for alert in Alert.objects.filter(engagement=engagement)]


def test_redaction_cuts_private_keys_and_api_tokens():
    text = f"before {PRIVATE_KEY} middle tg_abcdefghijklmnop after"
    assert redact(text) == "before [redacted]\n middle [redacted] after"
