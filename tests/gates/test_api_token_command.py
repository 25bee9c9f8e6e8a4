"""manage.py api_token: a token is created for the future only (issue 12 item 6)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from gates import services
from gates.errors import ServiceError
from gates.models import ApiToken
from gates.tenancy import viewer_for_user

pytestmark = pytest.mark.django_db


def api_token(*args: str) -> str:
    out = StringIO()
    call_command(
        "api_token", "--user", "vadmin", "--org", "acme", "--name", "ci", *args, stdout=out
    )
    return out.getvalue().strip()


@pytest.mark.parametrize("days", ["-5", "-1"])
def test_a_negative_expiry_is_refused_and_creates_nothing(vendor_admin, vendor_org, days):
    with pytest.raises(CommandError, match="--days"):
        api_token("--days", days)
    assert not ApiToken.objects.exists()


def test_zero_days_never_expires_and_a_positive_count_expires_then(vendor_admin, vendor_org):
    assert api_token("--days", "0").startswith("tg_")
    assert api_token("--days", "30").startswith("tg_")
    never, later = ApiToken.objects.order_by("pk")
    assert never.expires_at is None
    assert timedelta(days=29) < later.expires_at - timezone.now() <= timedelta(days=30)


def test_the_service_refuses_an_expiry_in_the_past(vendor_admin, vendor_org):
    with pytest.raises(ServiceError) as refused:
        services.api_token_create(
            actor=services.Actor(user=vendor_admin),
            viewer=viewer_for_user(vendor_admin),
            organization=vendor_org,
            name="ci",
            scopes=["read"],
            expires_at=timezone.now() - timedelta(days=5),
        )
    assert refused.value.field == "expires_at"
    assert not ApiToken.objects.exists()
