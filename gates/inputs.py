"""Page inputs read strictly: an id is ASCII digits within PostgreSQL's bigint, text holds
nothing PostgreSQL cannot store. A bad input is a 400 naming the field (the 400 handler shows
the message) or, where a view catches it, a form error; never an exception deeper down.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, QueryDict

from runners import jsonlimits

MAX_ID = 2**63 - 1  # PostgreSQL's bigint, the widest primary key here
# ASCII only: str.isdigit() also takes '²' and '٣', which int() then refuses or reads as 3.
# Nineteen digits bound the work int() does (it refuses 4,300 with a ValueError).
_ID_TEXT = re.compile(r"[0-9]{1,19}")


class PageInputError(BadRequest):
    """A page input its field does not take; `detail` names the field (as ServiceError's)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.detail = f"{field}: {problem}"
        super().__init__(self.detail)


def whole_number(text: str | None) -> int | None:
    """`text` as an id (ASCII digits, 1 to MAX_ID), else None."""
    if text is None or not _ID_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if 1 <= value <= MAX_ID else None


def id_input(data: QueryDict, field: str) -> int | None:
    """The id in `data[field]`: None when absent or empty, a PageInputError when not an id."""
    text = data.get(field)
    if not text:
        return None
    value = whole_number(text)
    if value is None:
        raise PageInputError(field, f"must be a whole number from 1 to {MAX_ID}")
    return value


def unstorable_input(data: QueryDict) -> PageInputError | None:
    """The first field (name or value) holding U+0000 or a lone surrogate, which PostgreSQL
    cannot store (and a form field may not check), as an error naming it."""
    for field, values in data.lists():
        for text in (field, *values):
            for _, problem in jsonlimits.storable_problems(text):
                return PageInputError(jsonlimits.format_path((field,)), problem)
    return None


class StorableInputMiddleware:
    """Refuses a page request whose query or form holds text PostgreSQL cannot store, before
    any view runs. The API is left to its JSON parser (gates.api.rest.parsers)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/api/"):
            form = request.POST if request.method == "POST" else QueryDict()
            error = unstorable_input(request.GET) or unstorable_input(form)
            if error is not None:
                raise error
        return self.get_response(request)
