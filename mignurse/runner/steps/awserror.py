"""How a failed AWS call becomes a step's one-line failure, for every step that calls AWS
(the node group repair backend, the instance replacement steps): the error code and
message botocore carries, retryable when AWS says it may pass (a 5xx, throttling)."""

from __future__ import annotations

from mignurse.runner.step import StepFailed


def aws_step_failed(what: str, exc: Exception) -> StepFailed:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response["Error"]
        code = str(err.get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        return StepFailed(
            f"{what}: {code}: {err.get('Message') or ''}".rstrip(": "),
            retryable=status >= 500 or "Throttl" in code,
        )
    return StepFailed(f"{what}: {' '.join(str(exc).split())}", retryable=True)
