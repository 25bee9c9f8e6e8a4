"""`Idempotency-Key` on every API POST that creates something: put `@idempotent` on the handler.

The same key with the same request gets the first response again (nothing is created twice);
the same key with another request is a 422. The key is claimed in the request's transaction, so
it is stored exactly when what the request created is. HTTP only: gates.services writes the rows.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from gates.errors import ServiceError
from gates.services.idempotency import (
    HEADER,
    idempotency_claim,
    idempotency_fingerprint,
    idempotency_purge_expired,
    idempotency_store,
)

MAX_KEY_LENGTH = 255
# The schema states the visible-ASCII form (no spaces: HTTP strips them at the ends), so a
# client generated from it never sends a key the server refuses.
PARAMETER = OpenApiParameter(
    HEADER,
    {"type": "string", "pattern": f"^[!-~]{{1,{MAX_KEY_LENGTH}}}$"},
    OpenApiParameter.HEADER,
    description="Retry-safe: the same key and body within 24 h return the first response.",
)


class _NotStored(Exception):
    """A handler's non-2xx response: roll back with it and keep no key, so a retry runs again."""

    def __init__(self, response: Response) -> None:
        self.response = response


def idempotent(handler=None, *, sealed: bool = False):
    """Decorate an APIView's post(); `sealed=True` stores the response encrypted (a secret)."""

    def decorate(handler):
        @functools.wraps(handler)
        def wrapper(view, request, *args, **kwargs):
            key = request.headers.get(HEADER)
            if key is None:
                return handler(view, request, *args, **kwargs)
            return _run_once(handler, view, request, args, kwargs, _valid(key), sealed)

        wrapper.idempotent = True
        return extend_schema(parameters=[PARAMETER])(wrapper)

    return decorate(handler) if handler is not None else decorate


def _run_once(handler, view, request, args, kwargs, key: str, sealed: bool) -> Response:
    owner = _owner(request)
    fingerprint = idempotency_fingerprint(
        method=request.method, path=request.path, body=_canonical_body(request)
    )
    idempotency_purge_expired()
    try:
        with transaction.atomic():
            stored = idempotency_claim(owner=owner, key=key, fingerprint=fingerprint)
            if stored is not None:
                return Response(
                    stored.body, status=stored.status_code, headers={"Idempotent-Replayed": "true"}
                )
            response = handler(view, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                raise _NotStored(response)
            # Stored as the client received it (DRF's JSON: dates and decimals as strings).
            body = json.loads(JSONRenderer().render(response.data))
            idempotency_store(
                owner=owner, key=key, status_code=response.status_code, body=body, sealed=sealed
            )
            return response
    except _NotStored as refused:
        return refused.response


def _valid(key: str) -> str:
    if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise ServiceError(
            f"give 1 to {MAX_KEY_LENGTH} printable ASCII characters (a UUID, say)", field=HEADER
        )
    return key


def _owner(request) -> str:
    token = getattr(request, "auth", None)
    token_id = getattr(token, "pk", None)
    return f"token:{token_id}" if token_id is not None else f"user:{request.user.pk}"


def _canonical_body(request) -> Any:
    data = request.data
    if not hasattr(data, "lists"):
        return data
    # A form or multipart body: every value of every field, files by their content.
    return {name: [_canonical_value(value) for value in values] for name, values in data.lists()}


def _canonical_value(value: Any) -> Any:
    if not isinstance(value, UploadedFile):
        return value
    digest = hashlib.sha256()
    for chunk in value.chunks():
        digest.update(chunk)
    value.seek(0)
    return {"file": value.name, "sha256": digest.hexdigest()}
