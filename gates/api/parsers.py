"""The API's JSON parser: DRF's, within the limits of runners.adapters.json_limits (nesting
depth, strings PostgreSQL can store, no NaN), so hostile JSON is a 400 naming the field path
before any view, serializer or the database sees it.
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.parsers import JSONParser, get_encoding

from runners.adapters import json_limits


class JsonInputError(exceptions.ParseError):
    """A body that breaks a JSON limit; `field` is the path of the offending value."""

    def __init__(self, detail: str, *, field: str | None = None):
        super().__init__(detail)
        self.field = field


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        # DRF's lookup refuses bytes-to-bytes codecs (bz2_codec would inflate a small body).
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError as error:
            raise JsonInputError(f"the body is not {encoding} text ({error.reason})") from error
        try:
            return json_limits.load(text)
        except json_limits.JsonLimitError as error:
            raise JsonInputError(error.problem, field=error.path or None) from error
        except ValueError as error:
            raise JsonInputError(f"JSON parse error - {error}") from error
