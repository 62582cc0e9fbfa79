"""An AWS call that fails under a replace-instance step is one line that says whether trying
again can help (mignurse/runner/steps/awserror.py): throttling and a 5xx pass on their own, so
the engine retries them; a refusal (AccessDenied, a missing instance) answers the same next
time, so the step fails at once. The error's code and message are botocore's
(botocore/exceptions.py ClientError: `response["Error"]`, `response["ResponseMetadata"]`)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from mignurse.runner.step import StepContext, StepFailed, StepPlan
from mignurse.runner.steps.instance import TerminateAsgInstance

NODE = "ip-10-0-7-21.us-west-2.compute.internal"
INSTANCE = "i-0b2c4d6e8f0a1b2c3"


def aws_error(code: str, message: str, status: int, operation: str) -> ClientError:
    """What botocore raises for an error answer (botocore/client.py _make_api_call)."""
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


class Ec2:
    """EC2 as the step meets it: DescribeInstances fails with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def describe_instances(self, **_kwargs: Any) -> dict[str, Any]:
        raise self.error


def terminate(error: Exception) -> StepFailed:
    """terminate-asg-instance's apply, its first read of the instance failing with `error`."""
    ec2 = Ec2(error)
    ctx = StepContext(client=None, params={"node": NODE}, aws=lambda _service: ec2)  # type: ignore[arg-type]
    plan = StepPlan(data={"instance": INSTANCE, "group": {"name": "eks-ng-gpu", "desired": 2}})
    with pytest.raises(StepFailed) as failed:
        TerminateAsgInstance().apply(ctx, plan)
    return failed.value


def test_throttled_by_ec2_the_step_says_so_and_is_tried_again() -> None:
    failed = terminate(aws_error("RequestLimitExceeded", "Request limit exceeded.", 503, "Op"))
    assert str(failed) == (
        f"cannot describe instance {INSTANCE}: RequestLimitExceeded: Request limit exceeded."
    )
    assert failed.retryable
    throttled = terminate(aws_error("ThrottlingException", "Rate exceeded", 400, "Op"))
    assert throttled.retryable, "a 400 Throttling passes on its own"


def test_an_ec2_500_is_tried_again() -> None:
    failed = terminate(aws_error("InternalError", "An internal error has occurred", 500, "Op"))
    assert failed.retryable
    assert str(failed).endswith(": InternalError: An internal error has occurred")


def test_access_denied_fails_at_once_naming_the_code() -> None:
    failed = terminate(
        aws_error(
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
            403,
            "DescribeInstances",
        )
    )
    assert not failed.retryable, "403 answers the same next time"
    assert str(failed) == (
        f"cannot describe instance {INSTANCE}: UnauthorizedOperation: You are not authorized "
        "to perform this operation."
    )


def test_an_error_without_a_message_ends_at_its_code() -> None:
    failed = terminate(aws_error("InvalidInstanceID.NotFound", "", 400, "DescribeInstances"))
    assert str(failed) == f"cannot describe instance {INSTANCE}: InvalidInstanceID.NotFound"
    assert not failed.retryable


def test_no_answer_from_ec2_at_all_is_one_line_and_tried_again() -> None:
    failed = terminate(EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/"))
    assert str(failed) == (
        f"cannot describe instance {INSTANCE}: Could not connect to the endpoint URL: "
        '"https://ec2.us-west-2.amazonaws.com/"'
    )
    assert failed.retryable


def test_an_answer_without_an_error_body_is_still_one_line() -> None:
    bare = ClientError({"ResponseMetadata": {"HTTPStatusCode": 400}}, "DescribeInstances")
    failed = terminate(bare)
    assert str(failed) == (
        f"cannot describe instance {INSTANCE}: An error occurred (Unknown) when calling the "
        "DescribeInstances operation: Unknown"
    )
    assert failed.retryable
