"""Every REST list answers one page with its count: `{"count", "next", "previous", "results"}`,
`?limit=` (default 100, at most 1,000) and `?offset=`, plus the list's own filters, checked
like any input (a bad value is a 400 naming the parameter). HTTP only."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class CountedPage(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT


def page_response(
    request: Request,
    view: APIView,
    rows: QuerySet,
    serializer: type[serializers.Serializer] | None = None,
    *,
    render: Callable[[list], list] | None = None,
) -> Response:
    """One page of `rows` (already filtered and ordered) with the count of them all, each row
    given by `serializer`, or the page by `render`."""
    pager = CountedPage()
    page = pager.paginate_queryset(rows, request, view) or []
    if render is None:
        assert serializer is not None
        data = serializer(page, many=True).data
    else:
        data = render(page)
    return pager.get_paginated_response(data)


def page_schema(name: str, serializer: type[serializers.Serializer]) -> serializers.Serializer:
    """The documented shape of a page of `serializer` rows."""
    return inline_serializer(
        name=name,
        fields={
            "count": serializers.IntegerField(help_text="How many rows match, on every page."),
            "next": serializers.URLField(allow_null=True, help_text="The next page, if any."),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer(many=True),
        },
    )


PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1},
        description=f"Rows per page (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}).",
    ),
    OpenApiParameter("offset", {"type": "integer", "minimum": 0}, description="Rows to skip."),
]


def slug_filter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "string", "pattern": r"^[-a-zA-Z0-9_]+$"}, description=description
    )


def choice_filter(name: str, choices: Sequence[str], description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.STR, enum=list(choices), description=description)


def filters_of(request: Request, filters: type[serializers.Serializer]) -> dict:
    """The list filters given in the query string, checked (a 400 naming a bad one); those
    left out are not in the answer."""
    checked = filters(data=request.query_params)
    checked.is_valid(raise_exception=True)
    return {name: value for name, value in checked.validated_data.items() if value is not None}
