"""The OpenAPI description drf-spectacular cannot infer: the bearer-token scheme, and the JSON
error every operation may answer with (gates.api.rest.errors), under each status it is sent with."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "A stable code, e.g. invalid, not_found."},
        "detail": {"type": "string"},
        "field": {
            "type": "string",
            "nullable": True,
            "description": "The input the error is about (a dotted path), when there is one.",
        },
    },
    "required": ["error", "detail"],
}
ERROR_DESCRIPTIONS = {
    400: "The input is invalid; `field` names it.",
    401: "No valid credentials.",
    403: "The credentials may not do this (role or token scope).",
    404: "No such object visible to these credentials.",
    406: "The Accept header asks for a type the API cannot answer with.",
    409: "The request conflicts with the object's state (busy host, frozen spec, taken name).",
    413: "The body is larger than the API accepts.",
    415: "The body's media type is not accepted here.",
    422: "The Idempotency-Key was used with another request in the last 24 h.",
    429: "Too many requests (or failed logins); retry after the Retry-After header.",
}
WRITE_METHODS = ("post", "put", "patch")
# Bodies given as a raw schema (drf-spectacular cannot tell they are required).
REQUIRED_BODIES = {("/api/v1/gates/{id}/runs/", "post")}
# Writes that change no state a request could conflict with.
CONFLICT_FREE = {"/api/v1/planner/", "/api/v1/hosts/scan/", "/api/v1/hosts/{id}/check/"}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "gates.api.rest.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "tg_<prefix>_<secret>"}


def error_statuses(path: str, method: str, operation: dict) -> list[int]:
    """The error statuses the server can answer this operation with."""
    statuses = [401, 403, 406, 429]
    if "{" in path or method in WRITE_METHODS:  # a body may name an object (organization)
        statuses.append(404)
    if method in WRITE_METHODS:
        statuses += [400, 413, 415] + ([] if path in CONFLICT_FREE else [409])
    elif any(p.get("in") == "query" for p in operation.get("parameters", [])):
        statuses.append(400)
    # Idempotency keys are the caller's across endpoints: one reused on another request is a 422.
    if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
        statuses.append(422)
    return sorted(statuses)


def _bound_path_ids(operation: dict) -> None:
    # Django's <int:pk> matches digits only and the ids are PostgreSQL bigints.
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "path" and parameter["schema"].get("type") == "integer":
            parameter["schema"].update(minimum=0, maximum=2**63 - 1)


def document_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: the Error component under every error status."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"$ref": "#/components/schemas/Error"}
    for path, methods in result.get("paths", {}).items():
        for method, operation in methods.items():
            _bound_path_ids(operation)
            if (path, method) in REQUIRED_BODIES:
                operation["requestBody"]["required"] = True
            responses = operation["responses"]
            for status in error_statuses(path, method, operation):
                # One error shape everywhere, even where a view described its own.
                description = responses.get(str(status), {}).get("description")
                responses[str(status)] = {
                    "description": description or ERROR_DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": reference}},
                }
    return result
