"""Run the collection script on a node through SSM Run Command; its output comes back via S3.

SSM's `StandardOutputContent` holds at most 24,000 characters, so the data never travels
there. We send a wrapper (`AWS-RunShellScript`) that writes the script to a temp file with a
quoted heredoc (Run Command has no stdin for `sh -s`), runs it with stdout into another temp
file, and uploads that file with `curl --upload-file` to a presigned PUT URL, so the node's
role needs no S3 permission. The wrapper's own stdout is one line, `mignurse-rc=<N>`: the
script's exit status. We poll `get_command_invocation` with backoff, tolerating the
`InvocationDoesNotExist` race right after SendCommand, then stream the object into the sink
and delete it. Every failure becomes a `RunResult` with a one-line `error`; nothing here raises.

Clients are the caller's job: create both with
`botocore.config.Config(retries={"mode": "adaptive", "max_attempts": 5})` so SSM throttling
(`ThrottlingException`) is retried with client-side rate limiting rather than surfacing here.
"""

from __future__ import annotations

import contextlib
import math
import re
import secrets
import shlex
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from mignurse.nodeaccess.base import RunResult

DOCUMENT = "AWS-RunShellScript"
MAX_IDS_PER_CALL = 50  # SendCommand InstanceIds limit
CHUNK = 64 * 1024
UPLOAD_FAILED_RC = 86  # the wrapper's exit status when curl could not upload the output
BACKOFF = 1.5
MIN_EXECUTION_TIMEOUT = 5  # the agent clamps executionTimeout up to this
_RC_LINE = re.compile(r"^mignurse-rc=(\d+)\s*$", re.MULTILINE)
_TERMINAL = {"Success", "Failed", "TimedOut", "Cancelled"}


def batches(ids: Sequence[str], size: int = MAX_IDS_PER_CALL) -> Iterator[list[str]]:
    """Instance ids in groups SendCommand accepts (≤ 50 per call)."""
    if not 1 <= size <= MAX_IDS_PER_CALL:
        raise ValueError(f"batch size must be within 1..{MAX_IDS_PER_CALL}")
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


def wrapper_script(script: str, upload_url: str) -> str:
    """The sh text SSM runs: save `script`, run it into a file, PUT the file, print its rc."""
    marker = "MIGNURSE_EOF_" + secrets.token_hex(8)
    if marker in script:  # astronomically unlikely; a clash would end the heredoc early
        raise ValueError("heredoc marker clash; try again")
    body = script if script.endswith("\n") else script + "\n"
    return (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/mignurse.XXXXXX") || '
        "{ echo 'mignurse: mktemp failed' >&2; exit 85; }\n"
        "trap 'rm -rf \"$d\"' EXIT\n"
        "trap 'exit 143' TERM INT\n"  # so the EXIT trap cleans up when SSM kills us
        f"cat >\"$d/script.sh\" <<'{marker}'\n"
        f"{body}"
        f"{marker}\n"
        'sh "$d/script.sh" </dev/null >"$d/out"\n'
        "rc=$?\n"
        f'if ! curl --fail --silent --show-error --upload-file "$d/out" {shlex.quote(upload_url)}'
        "; then\n"
        '  echo "mignurse: uploading the output to S3 failed (script rc $rc)" >&2\n'
        f"  exit {UPLOAD_FAILED_RC}\n"
        "fi\n"
        'echo "mignurse-rc=$rc"\n'
    )


class SSMShell:
    """A NodeShell over SSM Run Command for one EC2 instance.

    `poll` is (first delay, longest delay) between GetCommandInvocation calls, growing ×1.5.
    `delivery_timeout` is SendCommand's TimeoutSeconds (≥ 30): how long the agent may take to
    pick the command up. `race` is how long InvocationDoesNotExist is tolerated after send.
    """

    transport = "ssm"

    def __init__(
        self,
        node: str,
        instance_id: str,
        *,
        ssm_client: Any,
        s3_client: Any,
        bucket: str,
        key_prefix: str = "mignurse/",
        poll: tuple[float, float] = (0.5, 5.0),
        delivery_timeout: int = 60,
        race: float = 10.0,
    ) -> None:
        self.node = node
        self.instance_id = instance_id
        self._ssm = ssm_client
        self._s3 = s3_client
        self.bucket = bucket
        self.key_prefix = key_prefix
        self.poll = poll
        self.delivery_timeout = max(30, int(delivery_timeout))
        self.race = race

    # -- NodeShell ---------------------------------------------------------------------------

    def run(self, script: str, *, timeout: float, stdout: BinaryIO) -> RunResult:
        started = time.monotonic()

        def result(rc: int | None = None, **kw: Any) -> RunResult:
            return RunResult(self.node, self.transport, rc, time.monotonic() - started, **kw)

        unreachable = self._check_agent()
        if unreachable:
            return result(error=unreachable)

        execution_timeout = max(MIN_EXECUTION_TIMEOUT, math.ceil(timeout))
        # the URL must outlive delivery, the run and the upload; S3 allows at most 7 days
        expires = min(604_800, self.delivery_timeout + execution_timeout + 600)
        key = f"{self.key_prefix}{self.instance_id}/{uuid.uuid4().hex}.out"
        try:
            url = self._s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key},
                ExpiresIn=expires,
            )
            commands = wrapper_script(script, url).split("\n")
            sent = self._ssm.send_command(
                InstanceIds=[self.instance_id],
                DocumentName=DOCUMENT,
                Comment=f"mignurse collect {self.node}"[:100],
                Parameters={"commands": commands, "executionTimeout": [str(execution_timeout)]},
                TimeoutSeconds=self.delivery_timeout,
            )
        except (ClientError, BotoCoreError, ValueError) as exc:
            return result(error=f"SSM refused the command for {self.instance_id}: {_why(exc)}")
        command_id = str(sent["Command"]["CommandId"])

        # slack past the agent's own limits, so its TimedOut normally reaches us first
        deadline = time.monotonic() + self.delivery_timeout + execution_timeout + 30
        invocation = self._wait(command_id, deadline)
        if isinstance(invocation, str):
            self._cleanup(key)
            if invocation == "deadline":
                self._cancel(command_id)
                return result(
                    timed_out=True,
                    error=f"no final status from SSM for {self.instance_id} in time; cancelled",
                )
            return result(error=invocation)

        status = str(invocation.get("Status", ""))
        details = str(invocation.get("StatusDetails", "")).replace(" ", "")
        stderr_tail = str(invocation.get("StandardErrorContent", ""))
        response_code = invocation.get("ResponseCode")
        if status == "Success":
            match = list(_RC_LINE.finditer(str(invocation.get("StandardOutputContent", ""))))
            rc = int(match[-1].group(1)) if match else None
            copied, sink_error = self._download(key, stdout)
            self._cleanup(key)
            error = sink_error
            if not error and rc is None:
                error = f"the wrapper on {self.instance_id} printed no exit status"
            return result(rc, bytes_out=copied, error=error, stderr_tail=stderr_tail)
        self._cleanup(key)
        if status == "TimedOut" and details == "DeliveryTimedOut":
            error = (
                f"SSM could not deliver the command to {self.instance_id} within "
                f"{self.delivery_timeout} s (DeliveryTimedOut): is its agent online?"
            )
            return result(error=error, stderr_tail=stderr_tail)
        if status == "TimedOut":
            return result(
                timed_out=True,
                error=f"timed out after {execution_timeout} s (SSM executionTimeout)",
                stderr_tail=stderr_tail,
            )
        if status == "Cancelled":
            return result(error=f"the command on {self.instance_id} was cancelled ({details})")
        last = stderr_tail.strip().splitlines()[-1:] or [""]
        if response_code == UPLOAD_FAILED_RC:
            error = f"{self.instance_id} could not upload its output: {last[0]}"
        else:
            error = f"SSM command failed on {self.instance_id} ({details}, rc {response_code})"
            if last[0]:
                error += f": {last[0]}"
        return result(error=error, stderr_tail=stderr_tail)

    # -- steps -------------------------------------------------------------------------------

    def _check_agent(self) -> str:
        """'' when the instance is managed and Online, else why not (one line)."""
        try:
            answer = self._ssm.describe_instance_information(
                Filters=[{"Key": "InstanceIds", "Values": [self.instance_id]}]
            )
        except (ClientError, BotoCoreError) as exc:
            return f"cannot ask SSM about {self.instance_id}: {_why(exc)}"
        found = [
            i
            for i in answer.get("InstanceInformationList", [])
            if i.get("InstanceId") == self.instance_id
        ]
        if not found:
            return (
                f"{self.instance_id} is not managed by SSM (no SSM agent or no "
                "AmazonSSMManagedInstanceCore on its role): use SSH"
            )
        ping = str(found[0].get("PingStatus", ""))
        if ping != "Online":
            since = _when(found[0].get("LastPingDateTime"))
            return f"SSM agent on {self.instance_id} is {ping or 'unknown'} since {since}"
        return ""

    def _wait(self, command_id: str, deadline: float) -> dict[str, Any] | str:
        """The finished invocation, or a one-line error, or 'deadline'."""
        sent_at = time.monotonic()
        delay, longest = self.poll
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "deadline"
            time.sleep(min(delay, left))
            delay = min(delay * BACKOFF, longest)
            try:
                invocation: dict[str, Any] = self._ssm.get_command_invocation(
                    CommandId=command_id, InstanceId=self.instance_id
                )
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code == "InvocationDoesNotExist" and time.monotonic() - sent_at < self.race:
                    continue  # SSM has not made the invocation visible yet
                if code in ("ThrottlingException", "TooManyRequestsException"):
                    delay = longest  # botocore's retries gave up; back right off
                    continue
                return f"cannot read the SSM command on {self.instance_id}: {_why(exc)}"
            except BotoCoreError as exc:
                return f"cannot read the SSM command on {self.instance_id}: {_why(exc)}"
            if invocation.get("Status") in _TERMINAL:
                return invocation

    def _download(self, key: str, sink: BinaryIO) -> tuple[int, str]:
        copied = 0
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        except (ClientError, BotoCoreError) as exc:
            return 0, f"cannot fetch the output of {self.instance_id} from S3: {_why(exc)}"
        try:
            for chunk in body.iter_chunks(chunk_size=CHUNK):
                try:
                    sink.write(chunk)
                except OSError as exc:
                    return copied, f"cannot write the output: {exc}"
                copied += len(chunk)
        except (ClientError, BotoCoreError, OSError) as exc:
            return copied, f"the download from S3 broke off: {_why(exc)}"
        finally:
            body.close()
        try:
            sink.flush()
        except (OSError, ValueError) as exc:
            return copied, f"cannot write the output: {exc}"
        return copied, ""

    def _cleanup(self, key: str) -> None:
        # a leftover object is harmless; a bucket lifecycle rule catches it
        with contextlib.suppress(ClientError, BotoCoreError):
            self._s3.delete_object(Bucket=self.bucket, Key=key)

    def _cancel(self, command_id: str) -> None:
        # best effort: the agent's executionTimeout ends it anyway
        with contextlib.suppress(ClientError, BotoCoreError):
            self._ssm.cancel_command(CommandId=command_id, InstanceIds=[self.instance_id])


def _why(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code, message = err.get("Code", ""), err.get("Message", "")
        return f"{code}: {message}".strip(": ") if message else str(code or exc)
    return " ".join(str(exc).split()) or type(exc).__name__


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "an unknown time"
