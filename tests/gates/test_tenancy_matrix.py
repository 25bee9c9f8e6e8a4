"""The tenancy matrix, generated: every route the URL resolver knows (API and pages), every
customer role and token scope, objects of the caller's and of another organization.

Asserted for every route: another organization's object is a 404 (or the very refusal the
caller gets on its own object: a refusal that comes before the lookup leaks nothing) and
writes nothing; a token without the scope a method needs is a 403; anonymous callers are
refused; a list never holds another organization's rows; every POST that creates honours
`Idempotency-Key`.

ADDING AN ENDPOINT (this file fails with "no rule for api:foo" until you do): add one line to
RULES below, keyed by the URL name, e.g.

    "api:run-soak-stop": api("run", POST="run", body={"reason": "x"}),
    "api:gate-spec-proposals": api("gate", GET="read", POST="run", creates=True),
    "gates:soak-page": page("run", "GET"),
    "healthz": public("liveness for load balancers: no tenant data"),

- the first argument names the object the URL's `pk` is: "engagement", "gate", "run", "host",
  "token", "alert", "trace" (add a kind to `world()` if it is new), or None for a collection;
- one keyword per HTTP method the view implements, giving the token scope it needs ("read":
  any token; "run", "sign", "tokens"); the test checks the view implements exactly those;
- `body=` a request body that passes validation, so the scope check is what answers;
- `vendor_only=True` if customers are refused outright (403) whatever the object;
- `creates=True` if the POST creates something (it must then carry `@idempotent`);
- `lists="engagement"` for a GET that lists rows of that kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from gates import services
from gates.models import ApiToken, Decision
from gates.tenancy import viewer_for_user
from tests.conftest import make_host, make_user
from tests.gates.test_tenancy import token_client

pytestmark = pytest.mark.django_db

SCOPES = list(ApiToken.Scope.values)
# Django's admin has its own staff-only permission system and no tenant-scoped objects.
EXEMPT_NAMESPACES = {"admin"}


@dataclass(frozen=True)
class Rule:
    kind: str  # "api", "page" or "public"
    object: str | None = None
    methods: dict[str, str] = field(default_factory=dict)
    body: dict | None = None
    vendor_only: bool = False
    creates: bool = False
    lists: str | None = None
    why: str = ""


def api(obj=None, *, body=None, vendor_only=False, creates=False, lists=None, **methods) -> Rule:
    return Rule("api", obj, methods, body, vendor_only, creates, lists)


def page(obj=None, *methods: str, body=None) -> Rule:
    return Rule("page", obj, dict.fromkeys(methods, "session"), body)


def public(why: str) -> Rule:
    return Rule("public", why=why)


UPLOAD = {"kind": "health", "seconds": 1}
TRACE = b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [7]}\n'
TRACE_UPLOAD = {"format": "mooncake", "file": TRACE}
RULES: dict[str, Rule] = {
    "api:engagement-list": api(
        GET="read",
        POST="run",
        creates=True,
        lists="engagement",
        body={"organization": "northwind", "title": "T", "model_name": "m"},
    ),
    "api:engagement-detail": api("engagement", GET="read"),
    "api:engagement-inventory": api("engagement", GET="read"),
    "api:engagement-inventory-amend": api(
        "engagement",
        POST="run",
        vendor_only=True,
        creates=True,
        body={"run": 1, "reason": "GPU 3 was swapped for a spare H100"},
    ),
    "api:engagement-inventory-sign": api("engagement", POST="sign", body={"amendment": 1}),
    "api:engagement-traces": api(
        "engagement", GET="read", POST="run", creates=True, body=TRACE_UPLOAD
    ),
    "api:trace-detail": api("trace", GET="read"),
    "api:gate-detail": api("gate", GET="read"),
    "api:gate-spec": api("gate", GET="read", PUT="run", body={"document": {}}),
    "api:gate-spec-sign": api("gate", POST="sign", body={"version": 1}),
    "api:gate-reset": api("gate", POST="sign", body={"reason": "the bar was wrong"}),
    "api:gate-statistics": api("gate", GET="read"),
    "api:gate-history": api("gate", GET="read"),
    "api:clause-history": api(GET="read"),
    "api:run-compare": api("run", GET="read"),
    "api:gate-evidence": api("gate", GET="read"),
    "api:gate-evidence-signatures": api(
        "gate", POST="sign", creates=True, body={"ssh_signature": "x"}
    ),
    "api:evidence-keys": api(GET="read"),
    "api:party-keys": api(GET="read", POST="sign", creates=True, body={"public_key": "x"}),
    "api:gate-runs": api("gate", GET="read", POST="run", creates=True, body={"host": "gpu-1"}),
    "api:run-detail": api("run", GET="read"),
    "api:run-cancel": api("run", POST="run", body={"reason": "the host is needed elsewhere"}),
    "api:run-evidence": api("run", GET="read"),
    "api:run-measurements": api("run", GET="read"),
    "api:run-samples": api("run", GET="read"),
    "api:run-results": api("run", POST="run", creates=True, body=UPLOAD),
    "api:run-decide": api("run", POST="run", creates=True),
    "api:soak-stop": api("run", POST="run", body={"reason": "enough"}),
    "api:soak-extend": api("run", POST="run", body={"hours": 1}),
    "api:host-list": api(
        GET="run", POST="run", vendor_only=True, creates=True, lists="host", body={"name": "x"}
    ),
    "api:host-scan": api(POST="run", vendor_only=True, body={"address": "127.0.0.1"}),
    "api:host-detail": api("host", GET="run", vendor_only=True),
    "api:host-check": api("host", POST="run", vendor_only=True),
    "api:planner": api(POST="read", body={"model": "not-a-preset"}),
    "api:token-list": api(
        GET="tokens", POST="tokens", creates=True, lists="token", body={"name": "x", "scopes": []}
    ),
    "api:token-detail": api("token", DELETE="tokens"),
    "gates:engagement-list": page(None, "GET"),
    "gates:engagement-new": page(None, "GET", "POST", body={"title": "T", "model_name": "m"}),
    "gates:engagement-detail": page("engagement", "GET"),
    "gates:gate-detail": page("gate", "GET"),
    "gates:gate-report": page("gate", "GET"),
    "gates:gate-report-pdf": page("gate", "GET"),
    "gates:run-start": page("gate", "POST", body={"host": "1"}),
    "gates:gate-review": page("gate", "POST", body={"action": "waive"}),
    "gates:spec-edit": page("gate", "GET", "POST", body={"document": "{}"}),
    "gates:spec-sign": page("gate", "POST"),
    "gates:gate-reset": page("gate", "POST", body={"reason": "the bar was wrong"}),
    "gates:run-detail": page("run", "GET"),
    "gates:gate-history": page("gate", "GET"),
    "gates:clause-history": page(None, "GET"),
    "gates:run-compare": page("run", "GET"),
    "gates:run-cancel": page("run", "POST", body={"reason": "the host is needed elsewhere"}),
    "gates:run-log": page("run", "GET"),
    "gates:run-file": page("run", "GET"),
    "gates:inventory-amend": page("run", "POST", body={"reason": "GPU 3 was swapped for a spare"}),
    "gates:inventory-sign": page("engagement", "POST", body={"amendment": "1"}),
    "gates:soak-control": page("run", "POST", body={"action": "extend", "hours": "1"}),
    "gates:soak-series": page("run", "GET"),
    "gates:trace-upload": page("engagement", "POST", body={"format": "mooncake"}),
    "gates:trace-detail": page("trace", "GET"),
    "gates:planner": page(None, "GET", "POST"),
    "gates:planner-save": page("engagement", "POST"),
    # A band is found by the digest of its inputs (no organization's object; 404 without it).
    "gates:planner-ttft": page(None, "GET"),
    "gates:alert-ack-here": page("alert", "POST"),
    "gates:alert-preferences": page(None, "GET", "POST"),
    "gates:engagement-alerts": page("engagement", "GET", "POST"),
    "gates:host-list": page(None, "GET"),
    "gates:host-add": page(None, "GET", "POST", body={"step": "scan", "address": "127.0.0.1"}),
    "gates:host-detail": page("host", "GET", "POST", body={"name": "renamed", "port": "22"}),
    "gates:host-check": page("host", "POST"),
    "gates:host-key": page("host", "GET", "POST", body={"step": "scan"}),
    "gates:token-list": page(None, "GET", "POST", body={"name": "x", "scopes": ["read"]}),
    "gates:token-revoke": page("token", "GET", "POST"),
    "gates:audit-log": page(None, "GET"),
    "gates:gate-publication": page("gate", "GET", "POST", body={"action": "propose"}),
    "gates:claim-new": page(None, "GET", "POST", body={"text": "30 % lower TTFT"}),
    "password_change": page(None, "GET", "POST"),
    "password_change_done": page(None, "GET"),
    "password_reset": public("asks for a reset email; answers the same whether or not it exists"),
    "password_reset_done": public("says the email is on its way: no account data"),
    "password_reset_confirm": public("the emailed single-use, expiring link is its own credential"),
    "password_reset_complete": public("says the password was set: no account data"),
    "gates:alert-ack": public("a signed, expiring, single-use link is its own credential"),
    "login": public("the sign-in form"),
    # The evidence library: only what both parties consented to publish (its own walk over
    # every state is tests/gates/library/test_public_pages.py).
    "gates:library": public("lists published reports and claims only"),
    "gates:library-report": public("a published (or withdrawn) report, redacted as agreed"),
    "gates:library-pdf": public("a published report's PDF, redacted as agreed"),
    "gates:library-bundle": public("a published report's redacted, re-signed bundle"),
    "gates:library-claim": public("a vendor claim and its status against published reports"),
    "gates:library-badge": public("the claim's status as an SVG badge"),
    "gates:library-feed": public("the claim's status as JSON"),
    "logout": public("signs the caller out; touches no tenant data"),
    "healthz": public("liveness for load balancers: database and worker canary, no tenant data"),
    "api-schema": public("the OpenAPI document: no tenant data"),
    "api-docs": public("Swagger UI over the schema: no tenant data"),
}


def routes(patterns=None, namespace: str | None = None):
    """(name, pattern, callback) of every route the resolver knows, namespaces joined."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            inner = ":".join(filter(None, [namespace, entry.namespace])) or None
            yield from routes(entry.url_patterns, inner)
        elif isinstance(entry, URLPattern):
            name = f"{namespace}:{entry.name}" if namespace and entry.name else entry.name
            unnamed = ":".join(filter(None, [namespace, f"<unnamed {entry.pattern}>"]))
            yield name or unnamed, entry.pattern, entry.callback


def checked_routes() -> dict:
    return {
        name: callback
        for name, _, callback in routes()
        if name.split(":")[0] not in EXEMPT_NAMESPACES
    }


# --- the rule table is complete and true -------------------------------------------------------


def test_every_route_has_a_rule_and_every_rule_a_route():
    known = checked_routes()
    missing = sorted(set(known) - set(RULES))
    stale = sorted(set(RULES) - set(known))
    assert not missing, f"no rule for {missing}: add them to RULES (see this file's docstring)"
    assert not stale, f"rules for routes that no longer exist: {stale}"


@pytest.mark.parametrize("name", sorted(n for n, r in RULES.items() if r.kind == "api"))
def test_an_api_rule_names_exactly_the_methods_its_view_implements(name):
    view = checked_routes()[name].view_class
    implemented = {
        method.upper()
        for method in view.http_method_names
        if method not in ("options", "head") and hasattr(view, method)
    }
    assert implemented == set(RULES[name].methods), f"{name}: update its rule's methods"


@pytest.mark.parametrize(
    "name", sorted(n for n, r in RULES.items() if r.kind == "api" and "POST" in r.methods)
)
def test_every_creating_post_honours_an_idempotency_key(name):
    callback = checked_routes()[name]
    decorated = getattr(callback.view_class.post, "idempotent", False)
    assert decorated == RULES[name].creates, f"{name}: @idempotent and `creates` disagree"


# --- the world: two customer organizations, each with every kind of object ---------------------


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Each case makes its world afresh; PBKDF2 for its five users would be most of the time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def make_token(user, organization, scopes=("read",)) -> ApiToken:
    token, _ = services.api_token_create(
        actor=services.Actor(user=user),
        viewer=viewer_for_user(user),
        organization=organization,
        name="matrix",
        scopes=list(scopes),
    )
    return token


@pytest.fixture
def world(
    actor,
    vendor_viewer,
    vendor_admin,
    vendor_org,
    customer_owner,
    customer_org,
    other_owner,
    other_customer_org,
):
    def objects(organization, owner, title: str, host_name: str) -> dict:
        engagement = services.engagement_create(
            actor=actor, organization=organization, title=title, model_name="m"
        )
        gate = engagement.gates.get(kind="G1")
        host = make_host(organization, name=host_name)
        run = services.run_create(actor=actor, viewer=vendor_viewer, gate=gate, host=host)
        token = make_token(owner, organization)
        # A decided gate, so its evidence has something to show (a waiver: no run to recompute).
        Decision.objects.create(gate=gate, spec=gate.current_spec, kind="waiver", verdict="pass")
        alert = services.alert_enqueue(
            event="gate_failed", key=f"matrix:{title}", engagement=engagement, subject="s", body="b"
        )
        trace = services.trace_upload(
            actor=actor,
            viewer=vendor_viewer,
            engagement=engagement,
            name="t.jsonl",
            content=TRACE.replace(b"[7]", b"[8]"),  # not the one the matrix uploads
            trace_format="mooncake",
        )
        return {
            "engagement": engagement,
            "trace": trace,
            "gate": gate,
            "run": run,
            "host": host,
            "token": token,
            "alert": alert,
        }

    mine = objects(customer_org, customer_owner, "ours", "gpu-1")
    return {
        "mine": mine,
        # What vendor staff reach of ours: the same objects, and a token of the vendor's own.
        "vendor": {**mine, "token": make_token(vendor_admin, vendor_org)},
        "foreign": objects(other_customer_org, other_owner, "theirs", "contoso-gpu"),
    }


def session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def foreign_callers(customer_owner, customer_org, vendor_admin, vendor_org, world):
    """Every customer role, signed in and by token with each scope, and vendor tokens bound to
    the caller's own engagement: none of them may see the other organization."""
    viewer = make_user("cviewer2", customer_org, "customer_viewer")
    callers = {"owner session": session(customer_owner), "viewer session": session(viewer)}
    for scope in SCOPES:
        callers[f"owner token [{scope}]"] = token_client(customer_owner, customer_org, [scope])
    callers["owner token [all]"] = token_client(customer_owner, customer_org, SCOPES)
    bound = world["mine"]["engagement"]
    callers["vendor token bound to our engagement"] = token_client(
        vendor_admin, vendor_org, SCOPES, engagement=bound
    )
    return callers


# Routes that name two objects of the rule's kind (`pk` and `other`): both are the object, so
# another organization's object is on both sides (one on either side: tests/gates/history/).
PAIRED = {"api:run-compare", "gates:run-compare"}


def url_for(name: str, objects: dict) -> str:
    rule = RULES[name]
    if not rule.object:
        return reverse(name)
    pk = objects[rule.object].pk
    return reverse(name, kwargs={"pk": pk, "other": pk} if name in PAIRED else {"pk": pk})


def send(client, method: str, url: str, rule: Rule):
    # Pages post forms; the API takes JSON, or a form where the view parses one (uploads).
    if rule.kind == "page":
        return getattr(client, method.lower())(url, rule.body)
    if rule.body is TRACE_UPLOAD and method == "POST":  # a fresh file: a sent one is read out
        body = TRACE_UPLOAD | {"file": SimpleUploadedFile("t.jsonl", TRACE)}
        return getattr(client, method.lower())(url, body, format="multipart")
    body_format = "multipart" if rule.body is UPLOAD else "json"
    # A GET sends its body as the query, where `format` would pick DRF's renderer.
    body = None if rule.body is TRACE_UPLOAD else rule.body
    return getattr(client, method.lower())(url, body, format=body_format)


def row_counts() -> dict:
    return {
        model.__name__: model.objects.count() for model in apps.get_app_config("gates").get_models()
    }


# --- the matrix ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(n for n, r in RULES.items() if r.object))
def test_another_organizations_object_is_a_404_for_every_role_and_scope(
    name, world, customer_owner, customer_org, vendor_admin, vendor_org
):
    rule = RULES[name]
    callers = foreign_callers(customer_owner, customer_org, vendor_admin, vendor_org, world)
    before = row_counts()
    for label, client in callers.items():
        if rule.kind == "page" and "token" in label:
            continue  # pages take sessions only
        for method in rule.methods:
            response = send(client, method, url_for(name, world["foreign"]), rule)
            if response.status_code == 403:
                own = send(client, method, url_for(name, world["mine"]), rule)
                assert own.status_code == 403, f"{label} {method} {name}: 403 on a foreign object"
            else:
                assert response.status_code == 404, (
                    f"{label} {method} {name}: {response.status_code}"
                )
    assert row_counts() == before, f"{name}: a refused request wrote something"


@pytest.mark.parametrize(
    "name, method",
    sorted(
        (n, m)
        for n, r in RULES.items()
        if r.kind == "api"
        for m, s in r.methods.items()
        if s != "read"
    ),
)
def test_a_token_without_the_scope_a_method_needs_is_a_403(
    name, method, world, vendor_admin, vendor_org
):
    rule = RULES[name]
    needed = rule.methods[method]
    client = token_client(vendor_admin, vendor_org, [s for s in SCOPES if s != needed])
    before = row_counts()
    response = send(client, method, url_for(name, world["vendor"]), rule)
    assert response.status_code == 403, f"{method} {name} without {needed!r}: {response.content}"
    assert response.json()["error"] == "forbidden"
    assert row_counts() == before


@pytest.mark.parametrize(
    "name", sorted(n for n, r in RULES.items() if r.kind == "api" and "GET" in r.methods)
)
def test_the_callers_own_object_is_readable_so_the_404s_mean_something(
    name, world, vendor_admin, vendor_org
):
    client = token_client(vendor_admin, vendor_org, SCOPES)
    response = client.get(url_for(name, world["vendor"]))
    assert response.status_code == 200, f"GET {name}: {response.status_code}"


@pytest.mark.parametrize("name", sorted(n for n, r in RULES.items() if r.lists))
def test_a_list_never_holds_another_organizations_rows(
    name, world, customer_owner, customer_org, vendor_admin, vendor_org
):
    rule = RULES[name]
    foreign_id = world["foreign"][rule.lists].pk
    callers = foreign_callers(customer_owner, customer_org, vendor_admin, vendor_org, world)
    for label, client in callers.items():
        response = client.get(reverse(name))
        if response.status_code == 403:
            continue  # refused outright (hosts for customers, tokens without the scope)
        assert response.status_code == 200, f"{label} GET {name}"
        body = response.json()
        rows = body["results"] if isinstance(body, dict) else body  # paged lists hold results
        ids = [row["id"] for row in rows]
        assert foreign_id not in ids, f"{label} GET {name} lists another organization's row"


@pytest.mark.parametrize("name", sorted(n for n, r in RULES.items() if r.kind != "public"))
def test_anonymous_callers_are_refused(name, world):
    rule = RULES[name]
    client = APIClient()
    for method in rule.methods:
        response = send(client, method, url_for(name, world["mine"]), rule)
        if rule.kind == "page":
            assert response.status_code == 302 and "/login/" in response["Location"], name
        else:
            assert response.status_code in (401, 403), f"anonymous {method} {name}"
