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

import concurrent.futures
import contextlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from mignurse import joins
from mignurse.nodeaccess.base import CANCELLED, CommandResult
from mignurse.nodeaccess.ssmwrapper import (
    KEY_LINE,
    NO_ENCODER_RC,
    RC_LINE,
    UPLOAD_FAILED_RC,
    WrapperOutput,
    agent_output_key,
    key_from_output_url,
    output_bucket_script,
    wrapper_script,
)

DOCUMENT = "AWS-RunShellScript"
MAX_IDS_PER_CALL = 50  # SendCommand InstanceIds limit (and DescribeInstanceInformation's page)
CHUNK = 64 * 1024
UPLOADS = ("presigned", "output-bucket")  # how the node's output reaches S3
OUTPUT_GRACE = 2.0  # seconds a missing output object is waited for after the final status
MAX_UPLOAD_BYTES = 5 * 2**30  # one POST, like one PUT, takes at most 5 GB
BACKOFF = 1.5
MIN_EXECUTION_TIMEOUT = 5  # the agent clamps executionTimeout up to this
DOWNLOADERS = 4  # archives fetched from S3 at once while polling goes on
_TERMINAL = {"Success", "Failed", "TimedOut", "Cancelled"}
_NOT_MANAGED = "is not managed by SSM"


def batches(ids: Sequence[str], size: int = MAX_IDS_PER_CALL) -> Iterator[list[str]]:
    """Instance ids in groups SendCommand accepts (≤ 50 per call)."""
    if not 1 <= size <= MAX_IDS_PER_CALL:
        raise ValueError(f"batch size must be within 1..{MAX_IDS_PER_CALL}")
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


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


@dataclass(frozen=True)
class _Plan:
    """One fleet run's settings, the same for every batch: when it started, the agent's
    executionTimeout, SendCommand's MaxConcurrency, how long a node may take in all (delivery
    and every wave), and the S3 prefix its outputs go under."""

    started: float
    execution_timeout: int
    concurrency: int
    budget: int
    prefix: str


@dataclass
class _Command:
    command_id: str
    members: dict[str, _Pending] = field(default_factory=dict)  # instance id → pending
    delay: float = 0.0
    next_poll: float = 0.0
    seen: dict[str, str] = field(default_factory=dict)  # instance id → the last status listed


class SSMFleet:
    """Runs one script on many instances through SSM, in batches of ≤ 50 with SSM's rate control.

    `poll` is (first delay, longest delay) between polls of one command, growing ×1.5. From
    0.1 s a short command is seen sooner (one ending at 0.75 s at 0.81 s, not 1.25 s), a long
    one as before, for four more ListCommandInvocations calls per command (per 50 nodes) in
    its first five seconds.
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
        poll: tuple[float, float] = (0.1, 5.0),
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
        online = self._online(by_id, finish)
        if not online:
            return
        concurrency = max(1, max_concurrency or self.max_concurrency)
        execution_timeout = max(MIN_EXECUTION_TIMEOUT, math.ceil(timeout))
        # later waves start when earlier ones end: the deadline grows with them
        waves = math.ceil(min(len(online), MAX_IDS_PER_CALL) / concurrency)
        plan = _Plan(
            started=started,
            execution_timeout=execution_timeout,
            concurrency=concurrency,
            budget=self.delivery_timeout + execution_timeout * waves + 30,
            prefix=f"{self.key_prefix}{uuid.uuid4().hex}",
        )
        commands = self._commands(script, plan, len(online))
        if isinstance(commands, str):
            for iid in online:
                finish(by_id[iid], error=commands)
            return
        live = self._send(online, by_id, commands, plan, finish)
        self._follow(live, sink_for, finish, cancel)

    # -- steps: which agents answer, what is sent, following it, and the calls they make

    def _online(self, by_id: dict[str, str], finish: Callable[..., None]) -> list[str]:
        """The instances whose SSM agent is Online; every other one is finished with why not."""
        reasons = self._check_agents(list(by_id))
        online = [iid for iid in by_id if not reasons.get(iid)]
        for iid, why in reasons.items():
            if why:
                finish(by_id[iid], error=why)
        return online

    def _commands(self, script: str, plan: _Plan, nodes: int) -> list[str] | str:
        """The wrapper's lines for this run's way out, or why it cannot be built."""
        if self.upload == "output-bucket":
            try:
                return output_bucket_script(script).split("\n")
            except ValueError as exc:
                return f"cannot build the SSM command: {exc}"
        # the policy must outlive delivery, every wave and the uploads; S3: ≤ 7 days
        expires = min(604_800, plan.budget * math.ceil(nodes / MAX_IDS_PER_CALL) + 600)
        return self._presigned_commands(script, plan.prefix + "/", expires)

    def _send(
        self,
        online: list[str],
        by_id: dict[str, str],
        commands: list[str],
        plan: _Plan,
        finish: Callable[..., None],
    ) -> list[_Command]:
        """One SendCommand per batch of ≤ 50 instances; the commands SSM took, each with the
        nodes it runs on. A batch SSM refuses finishes its nodes with why."""
        output: dict[str, str] = {}  # SendCommand's output-bucket arguments
        if self.upload == "output-bucket":
            output = {"OutputS3BucketName": self.bucket, "OutputS3KeyPrefix": plan.prefix}
        live: list[_Command] = []
        for batch in batches(online):
            try:
                sent = self._ssm.send_command(
                    InstanceIds=batch,
                    DocumentName=DOCUMENT,
                    Comment=f"mignurse collect ({len(batch)} nodes)",
                    Parameters={
                        "commands": commands,
                        "executionTimeout": [str(plan.execution_timeout)],
                    },
                    TimeoutSeconds=self.delivery_timeout,
                    MaxConcurrency=str(plan.concurrency),
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
                    plan.started,
                    now + plan.budget,
                    plan.execution_timeout,
                    output_prefix=output.get("OutputS3KeyPrefix", ""),
                )
            live.append(command)
        return live

    def _follow(
        self,
        live: list[_Command],
        sink_for: Callable[[str], BinaryIO],
        finish: Callable[..., None],
        cancel: threading.Event,
    ) -> None:
        """Poll until every node is finished, fetching outputs in `DOWNLOADERS` threads; on
        the way out (`cancel`, or an error) cancel what still runs."""
        with joins.ctrl_c_kept(), concurrent.futures.ThreadPoolExecutor(DOWNLOADERS) as fetchers:
            try:
                self._poll(live, sink_for, finish, fetchers, cancel)
            finally:
                for command in live:
                    left = [iid for iid, p in command.members.items() if not p.done]
                    if left:
                        self._cancel(command.command_id, left)
                        for iid in left:
                            finish(command.members[iid].node, error=CANCELLED)

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
            keys = KEY_LINE.findall(stdout_text)
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
        keys = KEY_LINE.findall(stdout_text)
        key = keys[-1] if keys else ""
        if not key.startswith(self.key_prefix):
            return None, 0, f"the wrapper on {iid} named no upload under {self.key_prefix}"
        match = RC_LINE.findall(stdout_text)
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
        first = RC_LINE.match(stdout_text.split("\n", 1)[0])
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
            if not RC_LINE.match(wrapper.first_line or ""):
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
