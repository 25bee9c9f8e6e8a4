"""Errors the services raise for refused requests; the API turns them into JSON errors."""

from __future__ import annotations


class ServiceError(Exception):
    """A request that breaks a rule. `code` is stable for API clients; `field` names the input."""

    code = "invalid"
    status = 400

    def __init__(self, detail: str, *, field: str | None = None, code: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        if code:
            self.code = code


class NotAllowedError(ServiceError):
    code = "forbidden"
    status = 403


class NotFoundError(ServiceError):
    """The request names an object (in its body) that does not exist or is not visible."""

    code = "not_found"
    status = 404


class DuplicateError(ServiceError):
    """The name is taken (a unique constraint), also when two requests raced for it."""

    code = "duplicate"
    status = 409


class IllegalTransitionError(ServiceError):
    code = "illegal_transition"
    status = 409


class SpecInvalidError(ServiceError):
    code = "invalid_spec"

    def __init__(self, errors: list) -> None:
        self.errors = errors
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{first.field}: {first.message}{more}", field=first.field)


class FrozenSpecError(ServiceError):
    code = "spec_frozen"
    status = 409


class HostBusyError(ServiceError):
    code = "host_busy"
    status = 409


class LeaseLostError(ServiceError):
    """The run no longer holds its host's lease (a newer holder has a higher fencing token)."""

    code = "lease_lost"
    status = 409
