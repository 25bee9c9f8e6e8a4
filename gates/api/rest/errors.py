"""Every API error is JSON: {"error": CODE, "detail": TEXT, "field": NAME?}."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from gates.errors import ServiceError


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        return _error(exc.code, exc.detail, exc.status, exc.field)
    if isinstance(exc, Http404):
        return _error("not_found", "not found", status.HTTP_404_NOT_FOUND)
    if isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, RequestDataTooBig):  # a multipart form field past Django's limit
        return _error("too_large", str(exc), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        field, detail = _first_field_error(exc.detail)
        response.data = {"error": "invalid", "detail": detail, "field": field}
    else:
        code = getattr(exc, "default_code", "error")
        response.data = {"error": code, "detail": str(getattr(exc, "detail", exc))}
        if getattr(exc, "field", None):
            response.data["field"] = exc.field
    return response


def _error(code: str, detail: str, http_status: int, field: str | None = None) -> Response:
    body = {"error": code, "detail": detail}
    if field:
        body["field"] = field
    return Response(body, status=http_status)


def _first_field_error(detail, prefix: str = "") -> tuple[str | None, str]:
    """The dotted name and message of the first error in DRF's nested error structure."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = prefix if key == "non_field_errors" else f"{prefix}.{key}".lstrip(".")
            return _first_field_error(value, name)
    if isinstance(detail, list) and detail:
        if all(not isinstance(item, (dict, list)) for item in detail):
            return prefix or None, str(detail[0])
        for index, item in enumerate(detail):
            if item:
                return _first_field_error(item, f"{prefix}[{index}]")
    return prefix or None, str(detail)


def not_found(request, exception=None):
    """Django's 404 handler: JSON under /api/ (no route matched), the HTML page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not_found", "detail": "not found"}, status=404)
    return page_not_found(request, exception)


def bad_request(request, exception=None):
    """Django's 400 handler. A body past DATA_UPLOAD_MAX_MEMORY_SIZE (a page's form, or a form
    field the API did not read itself) is a 413 that says the limit; a BadRequest (a page
    input its field does not take: gates.inputs) a 400 that says what; JSON under
    /api/. Any other 400 is Django's page."""
    if isinstance(exception, RequestDataTooBig):
        return _too_large(request)
    if not isinstance(exception, BadRequest):
        return django_bad_request(request, exception)
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "invalid", "detail": str(exception)}, status=400)
    return render(request, "400.html", {"detail": str(exception)}, status=400)


def _too_large(request):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if request.path.startswith("/api/"):
        detail = f"a form body is at most {limit} bytes"
        return JsonResponse({"error": "too_large", "detail": detail}, status=413)
    context = {"limit_mib": limit / 2**20, "api_mib": settings.TOLLGATE_MAX_JSON_BODY_BYTES / 2**20}
    return render(request, "413.html", context, status=413)
