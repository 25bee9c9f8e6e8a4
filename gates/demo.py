"""The demo world: a vendor, a customer, two engagements against simhost, and the walk
through them that `manage.py demo --once` reports. Idempotent: running it twice reuses rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from gates import services
from gates.models import Engagement, Gate, Host, Membership, Organization, Profile

VENDOR = {"name": "Acme KV Tier (demo vendor)", "slug": "acme-kv", "kind": "vendor"}
CUSTOMER = {"name": "Northwind AI (demo customer)", "slug": "northwind", "kind": "customer"}
USERS = {
    "vendor": (VENDOR["slug"], Membership.Role.VENDOR_ADMIN),
    "customer": (CUSTOMER["slug"], Membership.Role.CUSTOMER_OWNER),
    "viewer": (CUSTOMER["slug"], Membership.Role.CUSTOMER_VIEWER),
}
ENGAGEMENTS = [
    {
        "title": "480B long-context agents (offload helps)",
        "model_name": "qwen3-coder-480b-sim",
        "platform": "simhost: 8x emulated GPUs, long reused prefixes, concurrency 4-16",
        "host": "simhost-long-context",
    },
    {
        "title": "8B short chat (offload does not help)",
        "model_name": "llama-3-8b-sim",
        "platform": "simhost: short prompts, no reuse, concurrency 1-2",
        "host": "simhost-short-chat",
    },
]


@dataclass
class DemoStep:
    name: str
    ok: bool
    detail: str


@dataclass
class DemoWorld:
    vendor: Organization
    customer: Organization
    engagements: list[Engagement]
    passwords: dict[str, str]
    steps: list[DemoStep] = field(default_factory=list)

    def walk(self) -> list[DemoStep]:
        """Check the demo end to end: pages, API, and each engagement's gates."""
        self._check_pages()
        for engagement in self.engagements:
            self._report_gates(engagement)
        return self.steps

    def _record(self, name: str, ok: bool, detail: str) -> None:
        self.steps.append(DemoStep(name, ok, detail))

    def _check_pages(self) -> None:
        client = Client(HTTP_HOST="127.0.0.1")
        logged_in = client.login(username="vendor", password=self.passwords["vendor"])
        self._record("vendor login", logged_in, "session created" if logged_in else "refused")
        page = client.get("/", secure=True)
        shown = all(e.title in page.content.decode() for e in self.engagements)
        self._record(
            "engagement list page",
            page.status_code == 200 and shown,
            f"HTTP {page.status_code}, demo engagements {'' if shown else 'not '}shown",
        )
        api = client.get("/api/v1/engagements/", secure=True)
        self._record("REST API", api.status_code == 200, f"HTTP {api.status_code}")

    def _report_gates(self, engagement: Engagement) -> None:
        gates = list(engagement.gates.order_by("position"))
        states = ", ".join(f"{g.kind} {g.state}/{g.verdict}" for g in gates)
        well_formed = [g.kind for g in gates] == ["G1", "G2", "G3", "G4"]
        self._record(f"engagement '{engagement.title}'", well_formed, states)


def build_demo_world(*, passwords: dict[str, str]) -> DemoWorld:
    with transaction.atomic():
        vendor = _organization(VENDOR)
        customer = _organization(CUSTOMER)
        for username, (slug, role) in USERS.items():
            _user(username, passwords[username], vendor if slug == vendor.slug else customer, role)
        actor = services.Actor.system("demo")
        engagements = [_engagement(actor, customer, spec) for spec in ENGAGEMENTS]
    return DemoWorld(vendor, customer, engagements, passwords)


def _organization(values: dict) -> Organization:
    organization, _ = Organization.objects.get_or_create(slug=values["slug"], defaults=values)
    return organization


def _user(username: str, password: str, organization: Organization, role: str) -> None:
    user, _ = get_user_model().objects.get_or_create(
        username=username, defaults={"email": f"{username}@demo.invalid"}
    )
    user.set_password(password)
    user.is_staff = role == Membership.Role.VENDOR_ADMIN
    user.is_superuser = role == Membership.Role.VENDOR_ADMIN
    user.save()
    Membership.objects.update_or_create(
        user=user, organization=organization, defaults={"role": role}
    )


def _engagement(actor, customer: Organization, values: dict) -> Engagement:
    existing = Engagement.objects.filter(organization=customer, title=values["title"]).first()
    if existing is not None:
        return existing
    Host.objects.get_or_create(
        organization=customer,
        name=values["host"],
        defaults={
            "transport": Host.Transport.LOCAL,
            "profile": Profile.objects.get(name="simhost"),
        },
    )
    engagement = services.engagement_create(
        actor=actor,
        organization=customer,
        title=values["title"],
        model_name=values["model_name"],
        platform=values["platform"],
    )
    assert engagement.gates.get(kind="G1").state == Gate.State.READY
    return engagement
