"""The hosts page (vendor staff): the hosts they may see with lease and last runs; adding one
by scanning its SSH host key, confirming the fingerprint, then testing the connection; editing
its parameters with each error on its field. HTTP only: tenancy for lookups, services for the
rest. The scanned key waits in the server-side session between the two steps, so the page
never carries key material and a tampered form cannot pin another key."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from gates import services
from gates.errors import ServiceError
from gates.models import Host, HostCleanup, Organization, Profile, Run
from gates.pages.detail import list_page
from gates.pages.hosts.forms import HostEditForm, PinForm, RegisterForm, ScanForm
from gates.tenancy import Viewer, get_visible_or_404, viewer_for_request, visible

RECENT_RUNS = 3
SCAN_SESSION_KEY = "tollgate_host_scan"
REPIN_SESSION_KEY = "tollgate_host_repin"


def _host_manager(request: HttpRequest) -> Viewer:
    viewer = viewer_for_request(request)
    if not viewer.can("host.manage"):
        raise PermissionDenied("hosts are managed by vendor staff")
    return viewer


def _hosts(viewer: Viewer):
    return visible(Host, viewer).select_related(
        "organization", "profile", "lease_run__gate__engagement"
    )


@login_required
@require_http_methods(["GET"])
def host_list(request: HttpRequest) -> HttpResponse:
    """A page of the hosts, narrowed to `?profile=` (a profile's name) when given; the last
    runs are read for that page's hosts only, so the page costs the same queries at any count."""
    hosts = _hosts(_host_manager(request))
    profile = request.GET.get("profile", "")
    if profile:
        hosts = hosts.filter(profile__name=profile)  # an unknown name lists none
    page = list_page(request, hosts)
    recent = recent_runs(list(page))
    rows = [(host, recent.get(host.pk, [])) for host in page]
    context = {
        "rows": rows,
        "page": page,
        "profile": profile,
        "profiles": Profile.objects.values_list("name", flat=True),
    }
    return render(request, "hosts/list.html", context)


def recent_runs(hosts: list[Host]) -> dict[int, list[Run]]:
    """The last few runs of each host, in one query (a window per host) whatever the count."""
    ranked = (
        Run.objects.filter(host__in=hosts)
        .annotate(
            rank=Window(RowNumber(), partition_by=F("host_id"), order_by=F("created_at").desc())
        )
        .filter(rank__lte=RECENT_RUNS)
        .select_related("gate__engagement")
        .order_by("host_id", "rank")
    )
    found: dict[int, list[Run]] = {}
    for run in ranked:
        found.setdefault(run.host_id, []).append(run)
    return found


@login_required
@require_http_methods(["GET", "POST"])
def host_add(request: HttpRequest) -> HttpResponse:
    """GET: the scan form. POST step=scan: read the key, show the fingerprint to confirm.
    POST step=register: pin the key just scanned and register the host."""
    viewer = _host_manager(request)
    step = request.POST.get("step") if request.method == "POST" else None
    if step == "register":
        return _register(request, viewer)
    scan_form = _scan_form(request.POST if step == "scan" else None, viewer)
    if step == "scan" and scan_form.is_valid():
        try:
            key_line, fingerprint = services.host_scan(
                viewer=viewer,
                address=scan_form.cleaned_data["address"],
                port=scan_form.cleaned_data["port"],
            )
        except ServiceError as error:
            field = error.field if error.field in scan_form.fields else None
            scan_form.add_error(field, error.detail)
        else:
            scanned = _remember_scan(request, scan_form.cleaned_data, key_line, fingerprint)
            form = RegisterForm(initial={"fingerprint": fingerprint, "profile": "vllm"})
            return _confirm_page(request, scanned, form)
    status = 400 if scan_form.errors else 200
    return render(request, "hosts/add.html", {"scan_form": scan_form}, status=status)


def _scan_form(data, viewer: Viewer) -> ScanForm:
    form = ScanForm(data)
    form.fields["organization"].queryset = visible(Organization, viewer).filter(
        kind=Organization.Kind.CUSTOMER
    )
    return form


def _remember_scan(request, where: dict, key_line: str, fingerprint: str) -> dict:
    scanned = {
        "organization": where["organization"].pk,
        "organization_name": where["organization"].name,
        "name": where["name"],
        "address": where["address"],
        "port": where["port"],
        "host_key": key_line,
        "fingerprint": fingerprint,
    }
    request.session[SCAN_SESSION_KEY] = scanned
    return scanned


def _confirm_page(request, scanned: dict, form: RegisterForm, status: int = 200) -> HttpResponse:
    shown = {k: v for k, v in scanned.items() if k != "host_key"}  # the fingerprint suffices
    return render(request, "hosts/confirm.html", {"scanned": shown, "form": form}, status=status)


def _register(request: HttpRequest, viewer: Viewer) -> HttpResponse:
    scanned = request.session.get(SCAN_SESSION_KEY)
    if not scanned:
        messages.error(request, "Scan the host first: its key is pinned from the scan.")
        return redirect("gates:host-add")
    form = RegisterForm(request.POST)
    if form.is_valid() and form.cleaned_data["fingerprint"] != scanned["fingerprint"]:
        form.add_error("fingerprint", "the host was scanned again since: confirm the new one")
    if form.is_valid():
        organization = get_visible_or_404(Organization, viewer, pk=scanned["organization"])
        login = form.cleaned_data
        try:
            host = services.host_create(
                actor=services.Actor.from_request(request),
                viewer=viewer,
                organization=organization,
                name=scanned["name"],
                address=scanned["address"],
                port=scanned["port"],
                host_key=scanned["host_key"],
                profile=login["profile"],
                username=login["username"],
                private_key=login["private_key"] or None,
                key_file_path=login["key_file_path"],
            )
        except ServiceError as error:
            form.add_error(error.field if error.field in form.fields else None, error.detail)
        else:
            del request.session[SCAN_SESSION_KEY]
            messages.info(request, f"Host {host.name} registered. Now test its connection.")
            return redirect("gates:host-detail", pk=host.pk)
    return _confirm_page(request, scanned, form, status=400)


@login_required
@require_http_methods(["GET", "POST"])
def host_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The host's facts, lease and last runs; POST saves the edit form."""
    viewer = _host_manager(request)
    host = get_visible_or_404(_hosts(viewer), viewer, pk=pk)
    form = HostEditForm.for_host(host, request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        changes = dict(form.cleaned_data)
        private_key = changes.pop("private_key") or None
        try:
            services.host_update(
                actor=services.Actor.from_request(request),
                viewer=viewer,
                host=host,
                private_key=private_key,
                **changes,
            )
        except ServiceError as error:
            host.refresh_from_db()  # the page shows what is stored, not the refused values
            form.add_error(_form_field(error, form), error.detail)
        else:
            messages.info(request, f"Host {host.name} saved.")
            return redirect("gates:host-detail", pk=host.pk)
    return _detail_page(request, host, form, status=400 if form.errors else 200)


def _form_field(error: ServiceError, form) -> str | None:
    field = (error.field or "").split(".")[0]
    return field if field in form.fields else None


@login_required
@require_POST
def host_check(request: HttpRequest, pk: int) -> HttpResponse:
    """Test the connection now: each check on its own line, in the order they ran."""
    viewer = _host_manager(request)
    host = get_visible_or_404(_hosts(viewer), viewer, pk=pk)
    try:
        report = services.host_connection_check(
            actor=services.Actor.from_request(request), viewer=viewer, host=host
        )
    except ServiceError as error:
        messages.error(request, f"{error.field}: {error.detail}" if error.field else error.detail)
        return redirect("gates:host-detail", pk=host.pk)
    return _detail_page(request, host, HostEditForm.for_host(host), report=report)


@login_required
@require_http_methods(["GET", "POST"])
def host_key(request: HttpRequest, pk: int) -> HttpResponse:
    """Re-pin a host's key after a legitimate re-install. GET: the pinned fingerprint and a
    scan button; POST step=scan: the new fingerprint beside the old; POST step=pin: pin it."""
    viewer = _host_manager(request)
    host = get_visible_or_404(_hosts(viewer), viewer, pk=pk)
    step = request.POST.get("step") if request.method == "POST" else None
    scanned = request.session.get(REPIN_SESSION_KEY)
    if scanned and scanned.get("host") != host.pk:
        scanned = None  # a scan made for another host's page
    form = PinForm(request.POST if step == "pin" else None)
    if step == "scan":
        try:
            key_line, fingerprint = services.host_scan(
                viewer=viewer, address=host.address, port=host.port
            )
        except ServiceError as error:
            messages.error(request, f"address: {error.detail}")
            return redirect("gates:host-key", pk=host.pk)
        scanned = {"host": host.pk, "host_key": key_line, "fingerprint": fingerprint}
        request.session[REPIN_SESSION_KEY] = scanned
        form = PinForm(initial={"fingerprint": fingerprint})
    elif step == "pin" and form.is_valid():
        if not scanned or form.cleaned_data["fingerprint"] != scanned["fingerprint"]:
            messages.error(request, "Scan the host again: the key to pin comes from the scan.")
            return redirect("gates:host-key", pk=host.pk)
        services.host_pin_key(
            actor=services.Actor.from_request(request),
            viewer=viewer,
            host=host,
            host_key=scanned["host_key"],
        )
        del request.session[REPIN_SESSION_KEY]
        messages.info(request, f"New host key pinned: {host.host_key_fingerprint}.")
        return redirect("gates:host-detail", pk=host.pk)
    shown = {k: v for k, v in (scanned or {}).items() if k != "host_key"} if step else None
    context = {"host": host, "scanned": shown, "form": form}
    return render(request, "hosts/key.html", context, status=400 if form.errors else 200)


def _detail_page(request, host: Host, form, *, report=None, status: int = 200) -> HttpResponse:
    context = {
        "host": host,
        "form": form,
        "report": report,
        "runs": recent_runs([host]).get(host.pk, []),
        "pending_cleanups": HostCleanup.objects.filter(host=host, done_at=None).count(),
    }
    return render(request, "hosts/detail.html", context, status=status)
