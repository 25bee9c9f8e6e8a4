"""drf-spectacular's settings: how the OpenAPI schema at /api/schema/ is built and served."""

OPENAPI_SETTINGS = {
    "TITLE": "Tollgate API",
    "DESCRIPTION": (
        "Gates, runs, verdicts and evidence of KV-offload joint tests. Every error is JSON "
        "(the Error schema). Request bodies are JSON of at most 64 levels of nesting whose "
        "strings hold neither U+0000 nor a lone surrogate."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Choice sets whose field names collide across components ("source", "state") named once.
    "ENUM_NAME_OVERRIDES": {
        "RunSourceEnum": "gates.models.runs.Run.Source",
        "RunStateEnum": "gates.models.runs.Run.State",
        "EvidenceKeySourceEnum": "gates.models.evidence.EvidenceKey.Source",
    },
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI served from our own static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Without deep links each operation's path is text, not a link inside its summary button
    # (axe: nested-interactive). The page's contrast fixes are static/gates/swagger-ui.css.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False, "persistAuthorization": False},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "gates.api.rest.schema.document_error_responses",
    ],
}
