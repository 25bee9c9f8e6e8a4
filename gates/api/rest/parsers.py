"""The API's JSON parser: DRF's, within the limits of runners.jsonlimits (nesting
depth, strings PostgreSQL can store, no NaN) and a size cap, so hostile JSON is a 400 naming
the field path (or a 413) before any view, serializer or the database sees it.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import exceptions, renderers, status
from rest_framework.parsers import BaseParser, get_encoding

from runners import jsonlimits


class JsonInputError(exceptions.ParseError):
    """A body that breaks a JSON limit; `field` is the path of the offending value."""

    def __init__(self, detail: str, *, field: str | None = None):
        super().__init__(detail)
        self.field = field


class BodyTooLargeError(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class LimitedJSONParser(BaseParser):
    """Not a JSONParser subclass on purpose: DRF reads a JSONParser's body through Django's
    `request.body`, which refuses anything over DATA_UPLOAD_MAX_MEMORY_SIZE (the pages' 2.5 MiB)
    with an HTML 400; any other parser is handed the stream, read here up to the API's limit."""

    media_type = "application/json"
    renderer_class = renderers.JSONRenderer

    def parse(self, stream, media_type=None, parser_context=None):
        # DRF's lookup refuses bytes-to-bytes codecs (bz2_codec would inflate a small body).
        encoding = get_encoding(parser_context or {})
        limit = settings.TOLLGATE_MAX_JSON_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise BodyTooLargeError(f"a JSON body is at most {limit} bytes")
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as error:
            raise JsonInputError(f"the body is not {encoding} text ({error.reason})") from error
        try:
            return jsonlimits.load(text)
        except jsonlimits.JsonLimitError as error:
            raise JsonInputError(error.problem, field=error.path or None) from error
        except ValueError as error:
            raise JsonInputError(f"JSON parse error - {error}") from error
