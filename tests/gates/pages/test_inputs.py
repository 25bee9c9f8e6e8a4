"""Page inputs read strictly (issue 27 item 6): ids in ASCII digits only, text PostgreSQL can
store; a bad one is a 400 or a form error naming the field, never a 500."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from gates.inputs import MAX_ID, whole_number
from tests.gates.pages.test_views import _run_with_file

# Each passes str.isdigit() (the old check); int() refuses the first two, reads the third as 3.
ODD_DIGITS = ["²", "9" * 5000, "٣"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1", 1),
        ("0042", 42),
        (str(MAX_ID), MAX_ID),
        (str(MAX_ID + 1), None),
        ("0", None),
        ("-1", None),
        (" 1", None),
        ("1.0", None),
        ("", None),
        (None, None),
        *[(odd, None) for odd in ODD_DIGITS],
    ],
)
def test_an_id_is_ascii_digits_within_a_bigint(text, expected):
    assert whole_number(text) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ODD_DIGITS)
def test_a_run_file_with_an_odd_id_is_a_400_naming_id(client, vendor_admin, engagement, odd):
    run, _ = _run_with_file(engagement)
    client.force_login(vendor_admin)
    response = client.get(reverse("gates:run-file", args=[run.pk]), {"id": odd})
    assert response.status_code == 400
    assert "id: must be a whole number" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ODD_DIGITS)
def test_the_planner_with_an_odd_engagement_is_a_400_naming_it(client, vendor_admin, odd):
    client.force_login(vendor_admin)
    response = client.get(reverse("gates:planner"), {"engagement": odd})
    assert response.status_code == 400
    assert "engagement: must be a whole number" in response.content.decode()


def posted_error(client, url: str, data: dict) -> str:
    response = client.post(url, data)
    assert response.status_code == 302
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ODD_DIGITS)
def test_signing_a_spec_with_an_odd_version_is_a_form_error_naming_it(
    client, vendor_admin, engagement, odd
):
    gate = engagement.gates.get(kind="G1")
    client.force_login(vendor_admin)
    error = posted_error(client, reverse("gates:spec-sign", args=[gate.pk]), {"version": odd})
    assert "version: must be a whole number" in error
    assert not gate.current_spec.signatures.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ODD_DIGITS)
def test_signing_an_inventory_with_an_odd_amendment_is_a_form_error_naming_it(
    client, customer_owner, engagement, odd
):
    client.force_login(customer_owner)
    url = reverse("gates:inventory-sign", args=[engagement.pk])
    assert "amendment: must be a whole number" in posted_error(client, url, {"amendment": odd})


@pytest.mark.django_db
def test_a_nul_in_any_page_field_is_a_400_naming_the_field(client, vendor_admin, engagement):
    gate = engagement.gates.get(kind="G3")
    client.force_login(vendor_admin)
    response = client.post(reverse("gates:gate-reset", args=[gate.pk]), {"reason": "why\x00"})
    assert response.status_code == 400
    assert "reason: the string holds the NUL character U+0000" in response.content.decode()
    query = client.get(reverse("gates:engagement-list"), {"q\x00": "x"})
    # The field's name is shown escaped: the page must stay printable.
    assert query.status_code == 400
    assert "q\\u0000: the string holds the NUL character" in query.content.decode()
