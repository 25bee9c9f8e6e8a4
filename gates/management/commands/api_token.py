"""Create an API token for CI and print its secret once."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from gates import services
from gates.errors import ServiceError
from gates.models import Engagement, Organization
from gates.tenancy import viewer_for_user


class Command(BaseCommand):
    help = "Create an API token (shown once) for a user of an organization."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", required=True, help="the member the token acts for")
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--name", required=True, help="what the token is for, e.g. ci")
        parser.add_argument(
            "--scopes", default="read", help="comma-separated: read,run,sign,tokens"
        )
        parser.add_argument("--engagement", type=int, help="limit the token to one engagement")
        parser.add_argument("--days", type=int, default=90, help="expiry in days (0: never)")

    def handle(self, *args, **options) -> None:
        user = get_user_model().objects.filter(username=options["user"]).first()
        organization = Organization.objects.filter(slug=options["org"]).first()
        if user is None or organization is None:
            raise CommandError("--user and --org must name an existing user and organization")
        engagement = None
        if options["engagement"]:
            engagement = Engagement.objects.filter(pk=options["engagement"]).first()
            if engagement is None:
                raise CommandError(f"--engagement: no engagement {options['engagement']}")
        if options["days"] < 0:
            raise CommandError("--days: a token cannot expire in the past (0: never expires)")
        expires = timezone.now() + timedelta(days=options["days"]) if options["days"] else None
        try:
            _, secret = services.api_token_create(
                actor=services.Actor(user=user, label="manage.py api_token"),
                viewer=viewer_for_user(user),
                organization=organization,
                name=options["name"],
                scopes=[s.strip() for s in options["scopes"].split(",") if s.strip()],
                engagement=engagement,
                expires_at=expires,
            )
        except ServiceError as error:
            raise CommandError(f"{error.field or 'token'}: {error.detail}") from error
        self.stdout.write(secret)
