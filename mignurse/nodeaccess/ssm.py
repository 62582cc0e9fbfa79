"""Run the collection script on nodes through SSM Run Command; the output comes back via S3.

SSM's `StandardOutputContent` holds at most 24,000 characters, so the data never travels
there. We send a wrapper (`AWS-RunShellScript`) that writes the script to a temp file with a
quoted heredoc (Run Command has no stdin for `sh -s`), runs it with stdout into another temp
file, and uploads that file with `curl` as a browser-style POST under a presigned S3 POST
policy, so the node's role needs no S3 permission. The wrapper's own stdout is two short
lines: `mignurse-key=<the object it wrote>` and `mignurse-rc=<N>` (the script's exit status).

Fleet runs use SSM's own rate control, not a home-made fan-out: one SendCommand
per batch of at most 50 instances with `MaxConcurrency` (how many run at once) and
`MaxErrors`. One POST policy serves the whole run: it allows any key under the run's
prefix, and each node picks its own key (its name plus random bytes) and prints it, since
one command carries the same text to every instance. Collection is read-only and every
node's evidence stands alone, so `MaxErrors` defaults to 100%: one failed node must not stop
SSM from reaching the other 49. Progress is polled per command with `ListCommandInvocations`
(one call per 50 nodes, with backoff), tolerating the empty lists right after SendCommand;
each finished node's fields come from `GetCommandInvocation` (tolerating
`InvocationDoesNotExist`), and its archive is streamed from S3 and deleted.

`upload="output-bucket"` is the other way out, where a cluster has an output bucket: SendCommand
names `OutputS3BucketName`/`OutputS3KeyPrefix`, and the SSM agent itself uploads the wrapper's whole
stdout there with the **instance role**, so the node role needs `s3:PutObject` on the bucket, and
the node needs no curl (only `base64`, or
`openssl base64`). The wrapper runs the script into a temp file, prints `mignurse-rc=<N>` as
its first line, then the file base64-encoded (SSM stores text, and the 24,000-character cap
applies only to `StandardOutputContent`). mignurse reads the rc from that first line, finds the
object from `StandardOutputUrl` (else the agent's documented layout), streams it down,
decodes it chunk by chunk into the sink, and deletes the stdout and stderr objects. The node
needs room for the output twice over and a third more (our temp file, then the agent's copy
of the encoded stdout under its orchestration folder).

Every failure becomes a `CommandResult` with a one-line `error`; nothing here raises.
Clients are the caller's job: create both with
`botocore.config.Config(retries={"mode": "adaptive", "max_attempts": 5})` so SSM throttling
(`ThrottlingException`) is retried with client-side rate limiting rather than surfacing here.
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import contextlib
import math
import posixpath
import re
import secrets
import shlex
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from mignurse.nodeaccess.base import CANCELLED, CommandResult

DOCUMENT = "AWS-RunShellScript"
MAX_IDS_PER_CALL = 50  # SendCommand InstanceIds limit (and DescribeInstanceInformation's page)
CHUNK = 64 * 1024
UPLOAD_FAILED_RC = 86  # the wrapper's exit status when curl (or base64) could not hand it over
NO_ENCODER_RC = 87  # output-bucket: neither base64 nor openssl on the node
UPLOADS = ("presigned", "output-bucket")  # how the node's output reaches S3
# Where the agent puts an AWS-RunShellScript invocation's output under OutputS3KeyPrefix:
# path.Join(prefix, CommandId, InstanceId) (aws/amazon-ssm-agent agent/runcommand/utils.go),
# then the plugin name and the step id "0.aws:runShellScript" with colons removed
# (agent/framework/runpluginutil/runpluginutil.go `output.Init(pluginName, stepName)`,
# agent/fileutil BuildS3Path), then stdout / stderr; an empty stream makes no object.
PLUGIN_OUTPUT_DIR = "awsrunShellScript/0.awsrunShellScript"
OUTPUT_GRACE = 2.0  # seconds a missing output object is waited for after the final status
MAX_UPLOAD_BYTES = 5 * 2**30  # one POST, like one PUT, takes at most 5 GB
BACKOFF = 1.5
MIN_EXECUTION_TIMEOUT = 5  # the agent clamps executionTimeout up to this
DOWNLOADERS = 4  # archives fetched from S3 at once while polling goes on
_RC_LINE = re.compile(r"^mignurse-rc=(\d+)\s*$", re.MULTILINE)
_KEY_LINE = re.compile(r"^mignurse-key=(\S+)\s*$", re.MULTILINE)
_TERMINAL = {"Success", "Failed", "TimedOut", "Cancelled"}
_NOT_MANAGED = "is not managed by SSM"


def batches(ids: Sequence[str], size: int = MAX_IDS_PER_CALL) -> Iterator[list[str]]:
    """Instance ids in groups SendCommand accepts (≤ 50 per call)."""
    if not 1 <= size <= MAX_IDS_PER_CALL:
        raise ValueError(f"batch size must be within 1..{MAX_IDS_PER_CALL}")
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


def _save_and_run(script: str, *, checks: str = "") -> str:
    """sh that saves `script` in a temp folder with a quoted heredoc, runs `checks`, then runs
    the script with its stdout into "$d/out" and its exit status in `rc`."""
    marker = "MIGNURSE_EOF_" + secrets.token_hex(8)
    if marker in script:  # astronomically unlikely; a clash would end the heredoc early
        raise ValueError("heredoc marker clash; try again")
    body = script if script.endswith("\n") else script + "\n"
    return (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/mignurse.XXXXXX") || '
        "{ echo 'mignurse: mktemp failed' >&2; exit 85; }\n"
        "trap 'rm -rf \"$d\"' EXIT\n"
        "trap 'exit 143' TERM INT\n"  # so the EXIT trap cleans up when SSM kills us
        f"{checks}"
        f"cat >\"$d/script.sh\" <<'{marker}'\n"
        f"{body}"
        f"{marker}\n"
        'sh "$d/script.sh" </dev/null >"$d/out"\n'
        "rc=$?\n"
    )


def wrapper_script(script: str, post_url: str, fields: dict[str, str], prefix: str) -> str:
    """The sh text SSM runs: save `script`, run it into a file, POST the file, print its rc.

    `fields` are the presigned POST form fields except `key`, which the node makes from its
    own name (one command carries the same text to every instance) under `prefix`."""
    form = " ".join(
        f"--form-string {shlex.quote(f'{name}={value}')}"
        for name, value in fields.items()
        if name != "key"
    )
    return _save_and_run(script) + (
        "host=$(uname -n | tr -c 'A-Za-z0-9.\\n-' _ | tr -d '\\n')\n"
        "rand=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \\n')\n"
        f'key={shlex.quote(prefix)}"${{host:-node}}-$rand.out"\n'
        f'if ! curl --fail --silent --show-error --form-string "key=$key" {form} '
        f'-F "file=@$d/out" {shlex.quote(post_url)} >/dev/null; then\n'
        '  echo "mignurse: uploading the output to S3 failed (script rc $rc)" >&2\n'
        f"  exit {UPLOAD_FAILED_RC}\n"
        "fi\n"
        'echo "mignurse-key=$key"\n'
        'echo "mignurse-rc=$rc"\n'
    )


def output_bucket_script(script: str) -> str:
    """The sh text SSM runs when the agent uploads stdout to the command's output bucket:
    `mignurse-rc=<N>` first, then the script's stdout base64-encoded (the agent stores text).
    The encoder is found before the script runs, so a node without one fails at once."""
    checks = (
        "if command -v base64 >/dev/null 2>&1; then encode=base64\n"
        "elif command -v openssl >/dev/null 2>&1; then encode='openssl base64'\n"
        "else\n"
        "  echo 'mignurse: neither base64 nor openssl is on the node to encode the output "
        "for the SSM output bucket' >&2\n"
        f"  exit {NO_ENCODER_RC}\n"
        "fi\n"
    )
    return _save_and_run(script, checks=checks) + (
        'echo "mignurse-rc=$rc"\n'
        'if ! $encode <"$d/out"; then\n'  # unquoted on purpose: "openssl base64" is two words
        '  echo "mignurse: base64-encoding the output failed (script rc $rc)" >&2\n'
        f"  exit {UPLOAD_FAILED_RC}\n"
        "fi\n"
    )


def agent_output_key(prefix: str, command_id: str, instance_id: str, stream: str) -> str:
    """The key the SSM agent writes an AWS-RunShellScript stream ("stdout" or "stderr") to,
    joined and cleaned like Go's path.Join (no doubled or trailing slashes)."""
    parts = [prefix, command_id, instance_id, PLUGIN_OUTPUT_DIR, stream]
    joined = posixpath.normpath("/".join(part for part in parts if part))
    return "/" + joined.lstrip("/") if joined.startswith("/") else joined


def key_from_output_url(url: str, bucket: str) -> str:
    """The object key in a `StandardOutputUrl`/`StandardErrorUrl`, path-style
    (`https://s3.REGION.amazonaws.com/BUCKET/KEY`) or virtual-hosted
    (`https://BUCKET.s3.REGION.amazonaws.com/KEY`); "" when empty or another bucket's."""
    if not url:
        return ""
    parsed = urllib.parse.urlsplit(url)
    host = (parsed.hostname or "").lower()
    path = urllib.parse.unquote(parsed.path).lstrip("/")
    if host.startswith(bucket.lower() + "."):
        return path
    if path.startswith(bucket + "/"):
        return path[len(bucket) + 1 :]
    return ""


class Base64Stream:
    """Decodes base64 text that arrives in chunks of any size: line breaks and other
    whitespace are dropped, and an incomplete 4-character group is carried to the next
    chunk, so no more than 3 characters are ever held back."""

    _WHITESPACE = b" \t\r\n\v\f"

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._carry + chunk.translate(None, self._WHITESPACE)
        whole = len(data) - len(data) % 4
        self._carry = data[whole:]
        try:
            return base64.b64decode(data[:whole], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from None

    def close(self) -> None:
        if self._carry:
            raise ValueError(f"base64 ends mid-group ({len(self._carry)} characters left over)")


class WrapperOutput:
    """The output-bucket wrapper's stdout, fed in chunks: `first_line` (the rc line, as text)
    once its line break has arrived, and the decoded bytes of the base64 after it."""

    MAX_FIRST_LINE = 4096

    def __init__(self) -> None:
        self.first_line: str | None = None
        self._head = b""
        self._decoder = Base64Stream()

    def feed(self, chunk: bytes) -> bytes:
        if self.first_line is None:
            self._head += chunk
            cut = self._head.find(b"\n")
            if cut < 0:
                if len(self._head) > self.MAX_FIRST_LINE:
                    raise ValueError(f"no line break in the first {self.MAX_FIRST_LINE} bytes")
                return b""
            self.first_line = self._head[:cut].decode("utf-8", "replace")
            chunk, self._head = self._head[cut + 1 :], b""
        return self._decoder.feed(chunk)

    def close(self) -> None:
        if self.first_line is None:
            raise ValueError("it ends before the first line does")
        self._decoder.close()


@dataclass
class _Pending:
    node: str
    instance_id: str
    command_id: str
    started: float
    deadline: float
    execution_timeout: int
    output_prefix: str = ""  # output-bucket: the command's OutputS3KeyPrefix
    done: bool = False


@dataclass
class _Command:
    command_id: str
    members: dict[str, _Pending] = field(default_factory=dict)  # instance id → pending
    delay: float = 0.0
    next_poll: float = 0.0
    seen: dict[str, str] = field(default_factory=dict)  # instance id → the last status listed


class SSMFleet:
    """Runs one script on many instances through SSM, in batches of ≤ 50 with SSM's rate control.

    `poll` is (first delay, longest delay) between polls of one command, growing ×1.5.
    `delivery_timeout` is SendCommand's TimeoutSeconds (≥ 30): how long the agent may take to
    pick the command up. `race` is how long a missing invocation is tolerated after send.
    `max_concurrency` and `max_errors` are SendCommand's MaxConcurrency and MaxErrors.
    `upload` is how the output reaches `bucket`: "presigned" (the node POSTs it with curl;
    its role needs no S3 permission) or "output-bucket" (the SSM agent uploads the encoded
    stdout with the instance role, which needs s3:PutObject on `bucket`; no curl needed).
    """

    transport = "ssm"

    def __init__(
        self,
        *,
        ssm_client: Any,
        s3_client: Any,
        bucket: str,
        key_prefix: str = "mignurse/",
        poll: tuple[float, float] = (0.5, 5.0),
        delivery_timeout: int = 60,
        race: float = 10.0,
        max_concurrency: int = 10,
        max_errors: str = "100%",
        upload: str = "presigned",
    ) -> None:
        if upload not in UPLOADS:
            raise ValueError(f"upload must be one of {', '.join(UPLOADS)}, not {upload!r}")
        self.upload = upload
        self._ssm = ssm_client
        self._s3 = s3_client
        self.bucket = bucket
        self.key_prefix = key_prefix
        self.poll = poll
        self.delivery_timeout = max(30, int(delivery_timeout))
        self.race = race
        self.max_concurrency = max(1, max_concurrency)
        self.max_errors = max_errors

    def run(
        self,
        targets: Sequence[tuple[str, str]],
        script: str,
        *,
        timeout: float,
        sink_for: Callable[[str], BinaryIO],
        done: Callable[[CommandResult], None],
        cancel: threading.Event | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        """Run `script` on every (node, instance id); call `done` once per node, from this
        thread or a download thread, with its stdout already written to `sink_for(node)`.
        A node SSM does not manage ends with an error containing "is not managed by SSM"
        (the caller may fall back to SSH). `cancel` stops polling and cancels what runs;
        `max_concurrency` overrides the fleet's MaxConcurrency for this run."""
        cancel = cancel or threading.Event()
        concurrency = max(1, max_concurrency or self.max_concurrency)
        started = time.monotonic()
        reported: set[str] = set()
        lock = threading.Lock()

        def finish(node: str, **kw: Any) -> None:
            with lock:  # download threads finish nodes too
                if node in reported:
                    return
                reported.add(node)
            rc = kw.pop("rc", None)
            done(CommandResult(node, self.transport, rc, time.monotonic() - started, **kw))

        by_id = {iid: node for node, iid in targets}
        reasons = self._check_agents(list(by_id))
        online = [iid for iid in by_id if not reasons.get(iid)]
        for iid, why in reasons.items():
            if why:
                finish(by_id[iid], error=why)
        if not online:
            return

        execution_timeout = max(MIN_EXECUTION_TIMEOUT, math.ceil(timeout))
        # later waves start when earlier ones end: the deadline grows with them
        waves = math.ceil(min(len(online), MAX_IDS_PER_CALL) / concurrency)
        budget = self.delivery_timeout + execution_timeout * waves + 30
        run_prefix = f"{self.key_prefix}{uuid.uuid4().hex}"
        output: dict[str, str] = {}  # SendCommand's output-bucket arguments
        if self.upload == "output-bucket":
            output = {"OutputS3BucketName": self.bucket, "OutputS3KeyPrefix": run_prefix}
            try:
                commands = output_bucket_script(script).split("\n")
            except ValueError as exc:
                for iid in online:
                    finish(by_id[iid], error=f"cannot build the SSM command: {exc}")
                return
        else:
            # the policy must outlive delivery, every wave and the uploads; S3: ≤ 7 days
            expires = min(604_800, budget * math.ceil(len(online) / MAX_IDS_PER_CALL) + 600)
            presigned = self._presigned_commands(script, run_prefix + "/", expires)
            if isinstance(presigned, str):
                for iid in online:
                    finish(by_id[iid], error=presigned)
                return
            commands = presigned

        live: list[_Command] = []
        for batch in batches(online):
            try:
                sent = self._ssm.send_command(
                    InstanceIds=batch,
                    DocumentName=DOCUMENT,
                    Comment=f"mignurse collect ({len(batch)} nodes)",
                    Parameters={"commands": commands, "executionTimeout": [str(execution_timeout)]},
                    TimeoutSeconds=self.delivery_timeout,
                    MaxConcurrency=str(concurrency),
                    MaxErrors=self.max_errors,
                    **output,
                )
            except (ClientError, BotoCoreError) as exc:
                for iid in batch:
                    finish(by_id[iid], error=f"SSM refused the command for {iid}: {_why(exc)}")
                continue
            command = _Command(str(sent["Command"]["CommandId"]), delay=self.poll[0])
            now = time.monotonic()
            command.next_poll = now + command.delay
            for iid in batch:
                command.members[iid] = _Pending(
                    by_id[iid],
                    iid,
                    command.command_id,
                    started,
                    now + budget,
                    execution_timeout,
                    output_prefix=output.get("OutputS3KeyPrefix", ""),
                )
            live.append(command)

        with concurrent.futures.ThreadPoolExecutor(DOWNLOADERS) as fetchers:
            try:
                self._poll(live, sink_for, finish, fetchers, cancel)
            finally:
                for command in live:
                    left = [iid for iid, p in command.members.items() if not p.done]
                    if left:
                        self._cancel(command.command_id, left)
                        for iid in left:
                            finish(by_id[iid], error=CANCELLED)

    # -- steps -------------------------------------------------------------------------------

    def _presigned_commands(self, script: str, prefix: str, expires: int) -> list[str] | str:
        """The wrapper's lines under one presigned POST policy for keys under `prefix`, or why
        it cannot be presigned."""
        try:
            post = self._s3.generate_presigned_post(
                self.bucket,
                prefix + "${filename}",
                Fields=None,
                Conditions=[
                    ["starts-with", "$key", prefix],
                    ["content-length-range", 0, MAX_UPLOAD_BYTES],
                ],
                ExpiresIn=expires,
            )
            fields = {k: str(v) for k, v in post["fields"].items()}
            return wrapper_script(script, post["url"], fields, prefix).split("\n")
        except (ClientError, BotoCoreError, ValueError) as exc:
            return f"cannot presign the S3 upload: {_why(exc)}"

    def _check_agents(self, ids: list[str]) -> dict[str, str]:
        """Instance id → '' when managed and Online, else why not (one line)."""
        reasons: dict[str, str] = {}
        for batch in batches(ids):
            found: dict[str, dict[str, Any]] = {}
            token: str | None = None
            try:
                while True:
                    kwargs: dict[str, Any] = {"Filters": [{"Key": "InstanceIds", "Values": batch}]}
                    if token:
                        kwargs["NextToken"] = token
                    answer = self._ssm.describe_instance_information(**kwargs)
                    for info in answer.get("InstanceInformationList", []):
                        found[str(info.get("InstanceId"))] = info
                    token = answer.get("NextToken")
                    if not token:
                        break
            except (ClientError, BotoCoreError) as exc:
                for iid in batch:
                    reasons[iid] = f"cannot ask SSM about {iid}: {_why(exc)}"
                continue
            for iid in batch:
                info = found.get(iid)
                if info is None:
                    reasons[iid] = (
                        f"{iid} {_NOT_MANAGED} (no SSM agent or no "
                        "AmazonSSMManagedInstanceCore on its role): use SSH"
                    )
                elif str(info.get("PingStatus", "")) != "Online":
                    ping = str(info.get("PingStatus", "")) or "unknown"
                    reasons[iid] = (
                        f"SSM agent on {iid} is {ping} since {_when(info.get('LastPingDateTime'))}"
                    )
                else:
                    reasons[iid] = ""
        return reasons

    def _poll(
        self,
        live: list[_Command],
        sink_for: Callable[[str], BinaryIO],
        finish: Callable[..., None],
        fetchers: concurrent.futures.ThreadPoolExecutor,
        cancel: threading.Event,
    ) -> None:
        longest = self.poll[1]
        while any(not p.done for c in live for p in c.members.values()):
            now = time.monotonic()
            due = min(c.next_poll for c in live if any(not p.done for p in c.members.values()))
            if cancel.wait(max(0.0, due - now)):
                return
            now = time.monotonic()
            for command in live:
                open_members = {i: p for i, p in command.members.items() if not p.done}
                if not open_members or command.next_poll > now:
                    continue
                command.delay = min(command.delay * BACKOFF, longest)
                command.next_poll = now + command.delay
                statuses = self._statuses(command.command_id)
                if isinstance(statuses, str):
                    if statuses == "throttled":
                        command.delay = longest  # botocore's retries gave up; back right off
                        continue
                    for p in open_members.values():
                        p.done = True
                        finish(p.node, error=statuses)
                    continue
                for iid, p in open_members.items():
                    status = statuses.get(iid)
                    if status is None and iid in command.seen:
                        # listed before, gone now: SSM lost it (the instance was terminated
                        # or deregistered mid-run); waiting for the deadline would tell nothing
                        p.done = True
                        finish(
                            p.node,
                            error=f"SSM lost the command on {iid}: it was "
                            f"{command.seen[iid]} and is no longer listed (is the instance "
                            "still running and registered?)",
                        )
                        continue
                    if status is not None:
                        command.seen[iid] = status
                    if status in _TERMINAL:
                        p.done = True
                        fetchers.submit(self._finish_one, p, sink_for, finish)
                    elif now > p.deadline:
                        p.done = True
                        self._cancel(p.command_id, [iid])
                        finish(
                            p.node,
                            timed_out=True,
                            error=f"no final status from SSM for {iid} in time; cancelled",
                        )

    def _statuses(self, command_id: str) -> dict[str, str] | str:
        """Instance id → status for one command (missing ones not visible yet), or an error."""
        statuses: dict[str, str] = {}
        token: str | None = None
        try:
            while True:
                kwargs: dict[str, Any] = {"CommandId": command_id, "MaxResults": 50}
                if token:
                    kwargs["NextToken"] = token
                page = self._ssm.list_command_invocations(**kwargs)
                for row in page.get("CommandInvocations", []):
                    statuses[str(row.get("InstanceId"))] = str(row.get("Status", ""))
                token = page.get("NextToken")
                if not token:
                    return statuses
        except ClientError as exc:
            code = _code(exc)
            if code in ("ThrottlingException", "TooManyRequestsException"):
                return "throttled"
            return f"cannot read the SSM command {command_id}: {_why(exc)}"
        except BotoCoreError as exc:
            return f"cannot read the SSM command {command_id}: {_why(exc)}"

    def _invocation(self, p: _Pending) -> dict[str, Any] | str:
        delay = self.poll[0]
        give_up = time.monotonic() + self.race
        while True:
            try:
                found: dict[str, Any] = self._ssm.get_command_invocation(
                    CommandId=p.command_id, InstanceId=p.instance_id
                )
                return found
            except ClientError as exc:
                code = _code(exc)
                retry = code in ("InvocationDoesNotExist", "ThrottlingException")
                if not retry or time.monotonic() > give_up:
                    return f"cannot read the SSM command on {p.instance_id}: {_why(exc)}"
            except BotoCoreError as exc:
                return f"cannot read the SSM command on {p.instance_id}: {_why(exc)}"
            time.sleep(delay)
            delay = min(delay * BACKOFF, self.poll[1])

    def _finish_one(
        self,
        p: _Pending,
        sink_for: Callable[[str], BinaryIO],
        finish: Callable[..., None],
    ) -> None:
        invocation = self._invocation(p)
        if isinstance(invocation, str):
            finish(p.node, error=invocation)
            return
        iid = p.instance_id
        status = str(invocation.get("Status", ""))
        details = str(invocation.get("StatusDetails", "")).replace(" ", "")
        stdout_text = str(invocation.get("StandardOutputContent", ""))
        stderr_tail = str(invocation.get("StandardErrorContent", ""))
        response_code = invocation.get("ResponseCode")
        if self.upload == "output-bucket":
            # whatever ran may have left objects, a timed-out or failed run included
            leftovers = [self._output_key(p, invocation, s) for s in ("stdout", "stderr")]
        else:
            keys = _KEY_LINE.findall(stdout_text)
            leftovers = keys[-1:]
        if status == "Success":
            if self.upload == "output-bucket":
                rc, copied, error = self._fetch_output_object(p, invocation, stdout_text, sink_for)
            else:
                rc, copied, error = self._fetch_upload(p, stdout_text, sink_for)
            self._cleanup(*leftovers)
            finish(p.node, rc=rc, bytes_out=copied, error=error, stderr_tail=stderr_tail)
            return
        self._cleanup(*leftovers)
        if status == "TimedOut" and details == "DeliveryTimedOut":
            error = (
                f"SSM could not deliver the command to {iid} within "
                f"{self.delivery_timeout} s (DeliveryTimedOut): is its agent online?"
            )
            finish(p.node, error=error, stderr_tail=stderr_tail)
        elif status == "TimedOut":
            finish(
                p.node,
                timed_out=True,
                error=f"timed out after {p.execution_timeout} s (SSM executionTimeout)",
                stderr_tail=stderr_tail,
            )
        elif status == "Cancelled":
            finish(p.node, error=f"the command on {iid} was cancelled ({details})")
        else:
            last = stderr_tail.strip().splitlines()[-1:] or [""]
            if response_code in (UPLOAD_FAILED_RC, NO_ENCODER_RC):
                error = f"{iid} could not upload its output: {last[0]}"
            else:
                error = f"SSM command failed on {iid} ({details}, rc {response_code})"
                if last[0]:
                    error += f": {last[0]}"
            finish(p.node, error=error, stderr_tail=stderr_tail)

    def _fetch_upload(
        self, p: _Pending, stdout_text: str, sink_for: Callable[[str], BinaryIO]
    ) -> tuple[int | None, int, str]:
        """Presigned: (rc, bytes, error) for the object the wrapper says it POSTed."""
        iid = p.instance_id
        keys = _KEY_LINE.findall(stdout_text)
        key = keys[-1] if keys else ""
        if not key.startswith(self.key_prefix):
            return None, 0, f"the wrapper on {iid} named no upload under {self.key_prefix}"
        match = _RC_LINE.findall(stdout_text)
        rc = int(match[-1]) if match else None
        copied, error = self._download(iid, key, sink_for(p.node))
        if not error and rc is None:
            error = f"the wrapper on {iid} printed no exit status"
        return rc, copied, error

    def _fetch_output_object(
        self,
        p: _Pending,
        invocation: dict[str, Any],
        stdout_text: str,
        sink_for: Callable[[str], BinaryIO],
    ) -> tuple[int | None, int, str]:
        """Output bucket: (rc, bytes, error), the rc from the first line SSM returns inline,
        the bytes decoded from the stdout object the agent uploaded."""
        iid = p.instance_id
        first = _RC_LINE.match(stdout_text.split("\n", 1)[0])
        if first is None:
            return None, 0, f"the wrapper on {iid} printed no exit status first"
        key = self._output_key(p, invocation, "stdout")
        copied, error = self._download(iid, key, sink_for(p.node), encoded=True)
        return int(first.group(1)), copied, error

    def _output_key(self, p: _Pending, invocation: dict[str, Any], stream: str) -> str:
        """The agent's object for `stream`: from the URL SSM returns, else the layout."""
        url = str(
            invocation.get("StandardOutputUrl" if stream == "stdout" else "StandardErrorUrl") or ""
        )
        return key_from_output_url(url, self.bucket) or agent_output_key(
            p.output_prefix, p.command_id, p.instance_id, stream
        )

    def _download(
        self, iid: str, key: str, sink: BinaryIO, *, encoded: bool = False
    ) -> tuple[int, str]:
        """Stream `key` into `sink`; `encoded`: the output-bucket wrapper's stdout, whose rc
        line is checked and whose base64 is decoded on the way."""
        copied = 0
        try:
            body = self._get_object(key, wait=encoded)
        except ClientError as exc:
            if encoded:
                return 0, self._not_in_bucket(iid, key, exc)
            return 0, f"cannot fetch the output of {iid} from S3: {_why(exc)}"
        except BotoCoreError as exc:
            return 0, f"cannot fetch the output of {iid} from S3: {_why(exc)}"
        wrapper = WrapperOutput() if encoded else None
        try:
            for chunk in body.iter_chunks(chunk_size=CHUNK):
                if wrapper is not None:
                    try:
                        chunk = wrapper.feed(chunk)
                    except ValueError as exc:
                        return copied, self._not_wrapper_output(iid, key, str(exc))
                try:
                    sink.write(chunk)
                except OSError as exc:
                    return copied, f"cannot write the output: {exc}"
                copied += len(chunk)
        except (ClientError, BotoCoreError, OSError) as exc:
            return copied, f"the download from S3 broke off: {_why(exc)}"
        finally:
            body.close()
        if wrapper is not None:
            try:
                wrapper.close()
            except ValueError as exc:
                return copied, self._not_wrapper_output(iid, key, str(exc))
            if not _RC_LINE.match(wrapper.first_line or ""):
                return copied, self._not_wrapper_output(iid, key, "no mignurse-rc line first")
        try:
            sink.flush()
        except (OSError, ValueError) as exc:
            return copied, f"cannot write the output: {exc}"
        return copied, ""

    def _get_object(self, key: str, *, wait: bool) -> Any:
        """The object's body; `wait`: give a missing object OUTPUT_GRACE seconds to appear, in
        case the agent's upload lags its final status (unverified; the wait is cheap)."""
        give_up = time.monotonic() + (OUTPUT_GRACE if wait else 0.0)
        delay = self.poll[0]
        while True:
            try:
                return self._s3.get_object(Bucket=self.bucket, Key=key)["Body"]
            except ClientError as exc:
                left = give_up - time.monotonic()
                if _code(exc) not in ("NoSuchKey", "404") or left <= 0:
                    raise
            time.sleep(min(delay, left))
            delay = delay * BACKOFF

    def _not_in_bucket(self, iid: str, key: str, exc: ClientError) -> str:
        bucket = self.bucket
        code = _code(exc)
        if code == "NoSuchBucket":
            hint = (
                f"does the bucket {bucket} exist, and does the node role allow s3:PutObject on it?"
            )
        elif code in ("AccessDenied", "403"):
            hint = f"does the node role allow s3:PutObject on {bucket}, and we s3:GetObject?"
        else:
            hint = f"does the node role allow s3:PutObject on {bucket}?"
        return f"the SSM output of {iid} is not in s3://{bucket}/{key}: {_why(exc)}: {hint}"

    def _not_wrapper_output(self, iid: str, key: str, why: str) -> str:
        return f"the SSM output of {iid} in s3://{self.bucket}/{key} is not the wrapper's: {why}"

    def _cleanup(self, *keys: str) -> None:
        # a leftover object is harmless; a bucket lifecycle rule catches it
        for key in keys:
            if not key.startswith(self.key_prefix):
                continue  # never someone else's object, whatever a script printed
            with contextlib.suppress(ClientError, BotoCoreError):
                self._s3.delete_object(Bucket=self.bucket, Key=key)

    def _cancel(self, command_id: str, instance_ids: list[str]) -> None:
        # best effort: the agent's executionTimeout ends it anyway
        with contextlib.suppress(ClientError, BotoCoreError):
            self._ssm.cancel_command(CommandId=command_id, InstanceIds=instance_ids)


class SSMShell:
    """A NodeShell over SSM Run Command for one EC2 instance (a fleet of one).

    Collecting many nodes goes through `fleet` (see `mignurse.collect.run.collect`), which
    sends one command per 50 instances instead of one per node."""

    transport = "ssm"

    def __init__(self, node: str, instance_id: str, *, fleet: SSMFleet) -> None:
        self.node = node
        self.instance_id = instance_id
        self.fleet = fleet

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        results: list[CommandResult] = []
        self.fleet.run(
            [(self.node, self.instance_id)],
            script,
            timeout=timeout,
            sink_for=lambda node: stdout,
            done=results.append,
            cancel=cancel,
        )
        return results[0]


def _why(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code, message = err.get("Code", ""), err.get("Message", "")
        return f"{code}: {message}".strip(": ") if message else str(code or exc)
    return " ".join(str(exc).split()) or type(exc).__name__


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "an unknown time"
