"""The audit log page: vendor admins read the whole trail, customer owners their own
organization's; filters by engagement, actor, action and time; paginated at constant queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from gates import services
from gates.models import Run
from gates.pages.audit.page import PAGE_SIZE

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def record(action, *, organization=None, target=None, user=None, label="web", detail=None):
    return services.audit_record(
        actor=services.Actor(user=user, label=label),
        action=action,
        target=target,
        organization_id=organization.pk if organization else None,
        detail=detail,
    )


def rows_of(page: str) -> list[str]:
    return page.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("</tr>")[:-1]


def actions_on(page: str) -> list[str]:
    return [chunk.split('"')[0] for chunk in page.split('data-action="')[1:]]


def test_a_vendor_admin_reads_everything_and_filters_by_engagement(
    client, vendor_admin, engagement, other_engagement
):
    client.force_login(vendor_admin)
    everything = actions_on(client.get(reverse("gates:audit-log")).content.decode())
    assert everything.count("engagement.create") == 2
    gate = engagement.gates.get(kind="G1")
    record("gate.waive", organization=engagement.organization, target=gate, user=vendor_admin)
    page = client.get(reverse("gates:audit-log"), {"engagement": engagement.pk}).content.decode()
    assert actions_on(page) == ["gate.waive", "engagement.create"]
    assert f'href="{reverse("gates:gate-detail", args=[gate.pk])}"' in page


def test_a_customer_owner_reads_only_their_organizations_events(
    client, customer_owner, engagement, other_engagement
):
    client.force_login(customer_owner)
    page = client.get(reverse("gates:audit-log")).content.decode()
    assert actions_on(page) == ["engagement.create"]
    assert other_engagement.title not in page
    # Another organization's engagement is not even a choice of the filter.
    response = client.get(reverse("gates:audit-log"), {"engagement": other_engagement.pk})
    assert response.status_code == 400 and "engagement: Select a valid choice" in (
        response.content.decode()
    )
    assert not actions_on(response.content.decode())


@pytest.mark.parametrize("who", ["vendor_engineer", "customer_viewer"])
def test_other_roles_are_refused(client, request, who):
    client.force_login(request.getfixturevalue(who))
    assert client.get(reverse("gates:audit-log")).status_code == 403


def test_filters_by_actor_action_and_time(client, vendor_admin, customer_owner, customer_org):
    record("token.create", organization=customer_org, user=customer_owner)
    record("run.create", organization=customer_org, user=vendor_admin)
    record("host.check", label="system")
    client.force_login(vendor_admin)
    url = reverse("gates:audit-log")

    def shown(**query) -> list[str]:
        return actions_on(client.get(url, query).content.decode())

    assert shown(actor="cowner") == ["token.create"]
    assert shown(actor="system") == ["host.check"]
    assert shown(action="run.create") == ["run.create"]
    soon = (timezone.now() + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    past = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    assert shown(since=soon) == []
    assert len(shown(since=past, until=soon)) == 3


def test_a_backwards_time_range_names_the_field(client, vendor_admin):
    client.force_login(vendor_admin)
    response = client.get(
        reverse("gates:audit-log"), {"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"}
    )
    assert response.status_code == 400
    assert "until: must be after the start of the range" in response.content.decode()


def test_pages_hold_page_size_events_at_a_constant_query_count(client, vendor_admin, customer_org):
    client.force_login(vendor_admin)

    def count(query=None) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("gates:audit-log"), query or {}).status_code == 200
        return len(queries)

    record("run.create", organization=customer_org, user=vendor_admin)
    count()  # the session's first read also pushes its idle expiry (once a minute)
    few = count()
    for index in range(PAGE_SIZE + 10):
        record(f"action.{index % 7}", organization=customer_org, user=vendor_admin)
    assert count() == few
    second = client.get(reverse("gates:audit-log"), {"page": 2}).content.decode()
    assert len(actions_on(second)) == 11 and "Page 2 of 2" in second


def test_each_event_reads_as_a_sentence_naming_its_targets_as_pages_do(
    client, vendor_admin, engagement
):
    gate = engagement.gates.get(kind="G3")
    spec = gate.current_spec
    run = Run.objects.create(gate=gate, spec=spec, attempt=2)
    organization = engagement.organization
    detail = {"party": "vendor", "version": spec.version, "digest": spec.digest, "key": None}
    record("spec.sign", organization=organization, target=spec, user=vendor_admin, detail=detail)
    verdict = {"verdict": "inconclusive", "run": run.pk, "decision": 1}
    record(
        "gate.decide",
        organization=organization,
        target=gate,
        label="decision-engine",
        detail=verdict,
    )
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:audit-log")).content.decode()
    decide, sign = rows_of(page)[:2]
    assert '<span data-field="sentence">the system decided G3 run #2: inconclusive</span>' in decide
    assert f'<a href="{reverse("gates:gate-detail", args=[gate.pk])}">G3</a>' in decide
    assert (
        f'<span data-field="sentence">vadmin signed G3 spec v{spec.version} for the vendor</span>'
        in sign
    )
    assert f">G3 spec v{spec.version}</td>" in sign  # the target column names it the same way


def test_the_json_is_behind_a_summary_naming_its_event_and_markup_in_a_detail_is_escaped(
    client, vendor_admin, engagement
):
    event = record(
        "gate.waive",
        organization=engagement.organization,
        target=engagement.gates.get(kind="G2"),
        user=vendor_admin,
        detail={"gate": "G2", "justification": "<script>alert(1)</script> & more"},
    )
    client.force_login(vendor_admin)
    page = client.get(reverse("gates:audit-log")).content.decode()
    row = rows_of(page)[0]
    assert "<script>alert(1)</script>" not in page
    said = "vadmin waived G2: “&lt;script&gt;alert(1)&lt;/script&gt; &amp; more”"
    assert f'<span data-field="sentence">{said}</span>' in row
    summary = row.split("<summary>", 1)[1].split("</summary>", 1)[0]
    assert summary == f'JSON<span class="sr-only"> of gate.waive event #{event.pk}</span>'
    assert (
        "&quot;justification&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt; &amp; more&quot;"
        in row
    )


def test_an_event_with_no_detail_has_a_sentence_and_no_json(client, vendor_admin, customer_org):
    record("credentials.rotate", label="rotate_keys")
    client.force_login(vendor_admin)
    row = rows_of(client.get(reverse("gates:audit-log")).content.decode())[0]
    assert "the key rotation command re-encrypted 0 stored credentials" in row
    assert "<details>" not in row
