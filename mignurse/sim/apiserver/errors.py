"""The API server's errors: `ApiError` and the `Status` body it is answered with, and the
messages of the refusals the real server words in one way (NotFound, MethodNotAllowed,
Conflict, Invalid, a resourceVersion too large or too old).
"""

from __future__ import annotations

from mignurse.sim import schema
from mignurse.sim.resources import JsonDict, ResourceType

# k8s.io/apiserver v0.32 pkg/storage/etcd3/errors.go
LIST_TOO_OLD = "The resourceVersion for the provided list is too old."
CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)
NOT_FOUND = "the server could not find the requested resource"
# handlers/get.go ListResource: errors.NewInvalid of the ListOptions kind
LIST_OPTIONS_INVALID = 'ListOptions.meta.k8s.io "" is invalid: '


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JsonDict | None = None,
        list_meta: JsonDict | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta
        self.retry_after = retry_after  # the Retry-After header, in seconds


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    """errors.NewAlreadyExists: `poddisruptionbudgets.policy "x" already exists`."""
    details: JsonDict = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(409, "AlreadyExists", f'{rtype.qualified} "{name}" already exists', details)


def status_body(
    code: int,
    reason: str,
    message: str,
    details: JsonDict | None = None,
    list_meta: JsonDict | None = None,
) -> JsonDict:
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": list_meta or {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def not_found(rtype: ResourceType, name: str) -> ApiError:
    details: JsonDict = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(404, "NotFound", f'{rtype.qualified} "{name}" not found', details)


def too_large(wanted: int, current: int) -> ApiError:
    """storage.NewTooLargeResourceVersionError."""
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {wanted}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def conflict(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        {"name": name, "kind": rtype.plural, **({"group": rtype.group} if rtype.group else {})},
    )


def invalid(rtype: ResourceType, name: str, errors: list[schema.FieldError]) -> ApiError:
    """errors.NewInvalid: `Kind.group "name" is invalid: <error>` or `[<e1>, <e2>]`."""
    qualified = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    text = (
        errors[0].message if len(errors) == 1 else "[" + ", ".join(e.message for e in errors) + "]"
    )
    details: JsonDict = {"name": name, "kind": rtype.kind, "causes": [e.cause() for e in errors]}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def not_allowed(rtype: ResourceType) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {"kind": rtype.plural},
    )
