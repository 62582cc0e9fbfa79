"""A node's logs through the EKS node monitoring agent's `NodeDiagnostic`: no SSH, no SSM.

What the agent does, from aws/eks-node-monitoring-agent v1.7.0
(c399089dec78cb245306ca2a5f9806b7c32ca093):
- api/v1alpha1/nodediagnostic.go: `eks.amazonaws.com/v1alpha1` NodeDiagnostic, cluster-scoped,
  named after the node that captures (the agent on each node acts only on the object of its
  own name, pkg/controllers/nodediagnostic.go Register); `spec.logCapture.destination` is a
  URL the archive is PUT to (a presigned S3 PUT URL) or `node`; `categories` (Base, Device,
  Networking, Runtime, System, All; default All).
- api/v1alpha1/nodediagnostic_status.go and pkg/controllers/nodediagnostic.go handleLogCapture:
  `status.captureStatuses[]` holds `{type: Log, state: {running: {startedAt}}}` while it runs,
  then `state.completed` with `reason` Success, SuccessWithErrors or Failure and a `message`.
- Destination `node`: the archive is saved as /var/log/support/<node>-logs.tar.gz and removed
  after 600 s; kubelet serves /var/log under `/logs/`, so the API server's node proxy reads it
  at `/api/v1/nodes/<node>/proxy/logs/support/<node>-logs.tar.gz` (RBAC: get nodes/proxy).
- The archive (pkg/util/file/archive.go TarGzipDir; collectors in pkg/log_collector/collect)
  is a gzip'd tar of relative paths: kubelet/kubelet.log and containerd/containerd-log.txt
  (`journalctl -o short-iso-precise`), nodeadm/nodeadm-{config,run}.log, kernel/dmesg.* (with
  `dmesg --ctime` as dmesg.human.current), storage/mounts.txt, var_log/cloud-init*.log,
  gpu/nvidia-bug-report.log.gz (not on Bottlerocket), and log-capture-errors.log when a
  collector failed.

`NodeDiagnosticShell` is a `NodeShell` whose "script" is that capture: it creates the object
(labelled as mignurse's), follows its status under the node's deadline, fetches the archive
(node proxy, or S3 with `--bucket`), opens it within `collect.archives` limits, and writes a
tar stream in the collector's layout (`node/kubelet.log`, ...) that the bundle writer masks
and files under `nodes/<node>/` like every other node's, with the agent's whole archive beside
them as `nodediagnostic-logs.tar.gz`. The object (and the S3 object) is deleted after, on
failure and Ctrl-C too; one that could not be deleted is named with the command that does it.
"""

from __future__ import annotations

import io
import json
import secrets
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import IO, Any, BinaryIO

from mignurse.cluster.client import (
    ClusterClient,
    ClusterError,
    Conflict,
    Forbidden,
    NotFound,
    Resource,
)
from mignurse.collect import archives
from mignurse.evidence.system import parse_cgroup_mounts
from mignurse.inert import inert
from mignurse.nodeaccess.base import CANCELLED, CommandResult
from mignurse.untrusted import human_bytes

NODEDIAGNOSTICS = Resource("eks.amazonaws.com", "v1alpha1", "nodediagnostics", "NodeDiagnostic")
TRANSPORT = "nodediagnostic"
MANAGED_BY = ("app.kubernetes.io/managed-by", "mignurse")
CATEGORIES = ("All",)
POLL_SECONDS = 1.0
MAX_URL_SECONDS = 7 * 24 * 3600  # the longest a SigV4 presigned URL may be valid
# The agent keeps the archive in memory before writing or uploading it; a real one is tens of
# MiB. What it unpacks to is held to the node's budget (collect.archives) as it is read.
MAX_ARCHIVE_BYTES = 512 * 2**20
ARCHIVE_NAME = "nodediagnostic-logs.tar.gz"
CAPTURE_RECORD = "nodediagnostic.json"
ROLE_HINT = 'docs/commands.md, "Collecting through NodeDiagnostic"'
# The agent's files → the names mignurse's parsers read under nodes/<node>/ (nodeaccess/script.py
# writes the same names); several sources for one name are joined in this order.
MAPPED: dict[str, tuple[str, ...]] = {
    "kubelet.log": ("kubelet/kubelet.log",),
    "containerd.log": ("containerd/containerd-log.txt",),
    "nodeadm.log": (
        "nodeadm/nodeadm-boot-hook.log",
        "nodeadm/nodeadm-config.log",
        "nodeadm/nodeadm-run.log",
    ),
    "kernel.log": ("kernel/dmesg.human.current",),
    "cloud-init.log": ("var_log/cloud-init.log",),
    "cloud-init-output.log": ("var_log/cloud-init-output.log",),
    "nvidia-bug-report.log": ("gpu/nvidia-bug-report.log.gz",),
}
MOUNTS = "storage/mounts.txt"  # `mount` then `df`: cgroup-fs.txt is what /sys/fs/cgroup is
_WANTED = frozenset(source for sources in MAPPED.values() for source in sources) | {
    "log-capture-errors.log",
    MOUNTS,
}
Report = Callable[[str], None]
# The first comment of mignurse.nodeaccess.script's collector: the one script this stands in for.
COLLECTOR_MARK = "# mignurse node collector: read-only"


class CaptureFailed(Exception):
    """The capture cannot go on; str() is the one line for the node's outcome."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def proxy_path(node: str) -> str:
    """Where the API server's node proxy serves the archive the agent saved on the node."""
    return f"/api/v1/nodes/{node}/proxy/logs/support/{node}-logs.tar.gz"


def leftover_line(node: str) -> str:
    return f"NodeDiagnostic {node!r} was left behind: kubectl delete nodediagnostic {node}"


class BucketUpload:
    """`--bucket`: the agent PUTs the archive to a presigned URL; mignurse reads it back and
    deletes the object."""

    def __init__(self, s3_client: Any, bucket: str) -> None:
        self.s3 = s3_client
        self.bucket = bucket

    def key_for(self, node: str, now: datetime) -> str:
        return f"mignurse/nodediagnostic/{node}-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}.tar.gz"

    def put_url(self, key: str, seconds: float) -> str:
        url: str = self.s3.generate_presigned_url(
            "put_object",
            Params={"Bucket": self.bucket, "Key": key},
            # valid while the node's deadline runs, within SigV4's seven days
            ExpiresIn=min(MAX_URL_SECONDS, max(60, int(seconds) + 60)),
        )
        return url

    def fetch(self, key: str, sink: IO[bytes], cancel: threading.Event | None) -> int:
        import botocore.exceptions

        try:
            answer = self.s3.get_object(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            raise CaptureFailed(
                f"cannot read s3://{self.bucket}/{key} back: {error.get('Code', '?')} "
                f"{inert(str(error.get('Message', '')))[:200]}"
            ) from None
        except botocore.exceptions.BotoCoreError as exc:
            raise CaptureFailed(f"cannot read s3://{self.bucket}/{key} back: {exc}") from None
        size = int(answer.get("ContentLength") or 0)
        if size > MAX_ARCHIVE_BYTES:
            raise CaptureFailed(_too_large(size))
        body = answer["Body"]
        written = 0
        try:
            for piece in body.iter_chunks(256 * 1024):
                if cancel is not None and cancel.is_set():
                    raise CaptureFailed(CANCELLED)
                written += len(piece)
                if written > MAX_ARCHIVE_BYTES:
                    raise CaptureFailed(_too_large(written))
                sink.write(piece)
        finally:
            body.close()
        return written

    def delete(self, key: str) -> str:
        """Remove the archive from the bucket: "" once gone, else the line that names it."""
        try:
            self.s3.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:  # noqa: BLE001 - the evidence is in; say what stayed
            return f"s3://{self.bucket}/{key} was left behind ({type(exc).__name__})"
        return ""


def _too_large(size: int) -> str:
    return (
        f"the agent's archive is {human_bytes(size)}, over the {human_bytes(MAX_ARCHIVE_BYTES)} "
        "limit: refused"
    )


class NodeDiagnosticShell:
    """One node's logs captured by the agent on it (see the module's docstring)."""

    transport = TRANSPORT

    def __init__(
        self,
        client: ClusterClient,
        node: str,
        *,
        bucket: BucketUpload | None = None,
        categories: tuple[str, ...] = CATEGORIES,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.client = client
        self.node = node
        self.bucket = bucket
        self.categories = categories
        self.poll_seconds = poll_seconds
        self.report: Report = lambda state: None  # progress lines, set by the collector
        self.instead_of = ""  # why the usual way in failed, when this stands in for it

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        """The agent's capture stands in for the collector's `script` (the agent runs its
        own collectors); any other script is refused before anything is created."""
        started = time.monotonic()
        if COLLECTOR_MARK not in script:
            return CommandResult(
                self.node,
                self.transport,
                None,
                0.0,
                error="a NodeDiagnostic only captures the node's logs: it cannot run this "
                "command (use --transport ssm or ssh)",
            )
        deadline = started + timeout
        left: list[str] = []
        created: dict[str, Any] | None = None
        key = ""
        try:
            with tempfile.SpooledTemporaryFile(max_size=8 * 2**20) as spool:
                destination = "node"
                if self.bucket is not None:
                    key = self.bucket.key_for(self.node, datetime.now(UTC))
                    destination = self.bucket.put_url(key, timeout)
                created = self._create(destination)
                self.report("NodeDiagnostic created, waiting for the agent on the node")
                reason, message = self._follow(deadline, timeout, cancel)
                outcome = reason if not message else f"{reason} ({message})"
                self.report(f"capture {outcome}; fetching the archive")
                size = self._fetch(key, spool, deadline, cancel)
                self.report(f"archive of {human_bytes(size)} fetched; checking it")
                spool.seek(0)
                head = spool.read(8)
                if archives.sniff(head) != "gzip":
                    raise CaptureFailed(
                        f"what came back ({human_bytes(size)}, starting {inert(repr(head))}) is "
                        "not the agent's gzip'd tar: nothing to read"
                    )
                left += self._clean_up(created, key)
                created, key_read, key = None, key, ""
                spool.seek(0)
                capture = {
                    "nodeDiagnostic": self.node,
                    "destination": (
                        f"s3://{self.bucket.bucket}/{key_read}" if self.bucket else "node"
                    ),
                    "categories": list(self.categories),
                    "reason": reason,
                    "message": message,
                }
                if self.instead_of:
                    capture["insteadOf"] = self.instead_of
                    left.insert(0, f"reached through the agent because {self.instead_of}")
                written = write_node_tar(spool, stdout, capture, left)
        except CaptureFailed as exc:
            left += self._clean_up(created, key)
            error = str(exc) if not left else f"{exc}; {'; '.join(left)}"
            return CommandResult(
                self.node,
                self.transport,
                None,
                time.monotonic() - started,
                timed_out=exc.timed_out,
                error=error,
            )
        except BaseException:
            self._clean_up(created, key)
            raise
        return CommandResult(
            self.node, self.transport, 0, time.monotonic() - started, bytes_out=written
        )

    # -- the object ---------------------------------------------------------------------------

    def _create(self, destination: str) -> dict[str, Any]:
        body = {
            "apiVersion": f"{NODEDIAGNOSTICS.group}/{NODEDIAGNOSTICS.version}",
            "kind": NODEDIAGNOSTICS.kind,
            # the agent acts only on the object named after its node
            "metadata": {"name": self.node, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}},
            "spec": {
                "logCapture": {"destination": destination, "categories": list(self.categories)}
            },
        }
        try:
            try:
                return self.client.create(NODEDIAGNOSTICS, body)
            except Conflict:
                if not self._cleared_leftover():
                    raise CaptureFailed(self._taken()) from None
                return self.client.create(NODEDIAGNOSTICS, body)
        except Forbidden as exc:
            raise CaptureFailed(_forbidden(exc, "create")) from None
        except Conflict:
            raise CaptureFailed(self._taken()) from None
        except NotFound:
            raise CaptureFailed(self._absent()) from None
        except ClusterError as exc:
            raise CaptureFailed(f"cannot create NodeDiagnostic {self.node!r}: {exc}") from None

    def _absent(self) -> str:
        try:
            served = self.client.api_group_available(NODEDIAGNOSTICS.group, NODEDIAGNOSTICS.version)
        except ClusterError:
            served = False
        if served:
            return f"the API server has no NodeDiagnostic {self.node!r} to create (404)"
        return absent_line()

    def _cleared_leftover(self) -> bool:
        """An earlier mignurse run's object whose capture is over (a run killed before its
        clean-up) is deleted so this run can capture; anything else is left alone."""
        try:
            existing = self.client.get(NODEDIAGNOSTICS, self.node)
        except ClusterError:
            return False
        meta = existing.get("metadata") or {}
        ours = (meta.get("labels") or {}).get(MANAGED_BY[0]) == MANAGED_BY[1]
        if not ours or not isinstance(log_capture_state(existing).get("completed"), dict):
            return False
        try:
            self.client.delete(NODEDIAGNOSTICS, self.node, uid=meta.get("uid") or None)
        except NotFound:
            pass
        except ClusterError:
            return False
        self.report("an earlier mignurse run's finished NodeDiagnostic was still there: deleted")
        return True

    def _taken(self) -> str:
        try:
            existing = self.client.get(NODEDIAGNOSTICS, self.node)
        except ClusterError:
            existing = {}
        labels = (existing.get("metadata") or {}).get("labels") or {}
        whose = (
            "another mignurse run's, still capturing"
            if labels.get(MANAGED_BY[0]) == MANAGED_BY[1]
            else "not mignurse's: someone else's capture of this node may be running"
        )
        return (
            f"a NodeDiagnostic named {self.node!r} already exists ({whose}); the agent captures "
            f"once per object: when it is done, kubectl delete nodediagnostic {self.node}"
        )

    def _follow(
        self, deadline: float, timeout: float, cancel: threading.Event | None
    ) -> tuple[str, str]:
        """Poll the status until the Log capture completes: its reason (Success,
        SuccessWithErrors) and message."""
        said = ""
        while True:
            if cancel is not None and cancel.is_set():
                raise CaptureFailed(CANCELLED)
            try:
                current = self.client.get(NODEDIAGNOSTICS, self.node)
            except Forbidden as exc:
                raise CaptureFailed(_forbidden(exc, "get")) from None
            except NotFound:
                raise CaptureFailed(
                    f"NodeDiagnostic {self.node!r} was deleted before the capture finished"
                ) from None
            except ClusterError as exc:
                raise CaptureFailed(f"cannot follow NodeDiagnostic {self.node!r}: {exc}") from None
            state = log_capture_state(current)
            completed = state.get("completed")
            if isinstance(completed, dict):
                reason = str(completed.get("reason") or "")
                message = inert(str(completed.get("message") or ""))[:300]
                if reason in ("Success", "SuccessWithErrors"):
                    return reason, message
                raise CaptureFailed(
                    f"the agent's capture ended {inert(reason)[:40] or 'without a reason'}: "
                    f"{message or 'no message'}"
                )
            running = state.get("running")
            if isinstance(running, dict) and not said:
                said = f"capture running since {inert(str(running.get('startedAt') or '?'))[:40]}"
                self.report(said)
            wait = min(self.poll_seconds, deadline - time.monotonic())
            if wait <= 0:
                where = (
                    "the agent started but did not finish"
                    if said
                    else "the agent never took it up (is eks-node-monitoring-agent running on "
                    "the node?)"
                )
                raise CaptureFailed(
                    f"no capture within {timeout:g} s: {where}; --timeout allows more",
                    timed_out=True,
                )
            if cancel is not None:
                if cancel.wait(wait):
                    raise CaptureFailed(CANCELLED)
            else:
                time.sleep(wait)

    # -- the archive --------------------------------------------------------------------------

    def _fetch(
        self, key: str, spool: IO[bytes], deadline: float, cancel: threading.Event | None
    ) -> int:
        if self.bucket is not None:
            return self.bucket.fetch(key, spool, cancel)
        path = proxy_path(self.node)
        seconds = deadline - time.monotonic()
        if seconds <= 0:
            raise CaptureFailed(
                "no time left to fetch the archive; --timeout allows more", timed_out=True
            )
        try:
            return self.client.download(
                path, spool, limit=MAX_ARCHIVE_BYTES, seconds=seconds, cancel=cancel
            )
        except Forbidden:
            raise CaptureFailed(
                f"RBAC refused: cannot get nodes/proxy (the archive at {path}) as user "
                f"{self.client.info.user or '?'!r} in context {self.client.info.context!r}: "
                f"grant it ({ROLE_HINT}) or pass --bucket BUCKET to have the agent upload the "
                "archive to S3"
            ) from None
        except NotFound:
            raise CaptureFailed(
                f"the agent's archive is not behind the node proxy at {path} (404): the agent "
                "removes it 600 s after the capture"
            ) from None
        except ClusterError as exc:
            raise CaptureFailed(
                f"cannot fetch the agent's archive through the node proxy: {exc}; the proxy "
                "needs the node's kubelet: --bucket BUCKET has the agent upload it to S3"
            ) from None

    def _clean_up(self, created: dict[str, Any] | None, key: str) -> list[str]:
        """Delete what this run made; the lines that name what stayed."""
        left: list[str] = []
        if created is not None:
            uid = (created.get("metadata") or {}).get("uid") or None
            try:
                self.client.delete(NODEDIAGNOSTICS, self.node, uid=uid)
            except NotFound:
                pass
            except (ClusterError, OSError):
                left.append(leftover_line(self.node))
        if key and self.bucket is not None:
            gone = self.bucket.delete(key)
            if gone:
                left.append(gone)
        return left


def absent_line() -> str:
    return (
        "the NodeDiagnostic API (nodediagnostics.eks.amazonaws.com) is not served: install the "
        "EKS node monitoring agent (the eks-node-monitoring-agent add-on), which brings it"
    )


def _forbidden(exc: Forbidden, verb: str) -> str:
    """The client's line ("RBAC refused: cannot VERB nodediagnostics.eks.amazonaws.com as user
    ... (the server's message)") and where the role is."""
    said = str(exc) or f"RBAC refused: cannot {verb} nodediagnostics.eks.amazonaws.com"
    return f"{said}; the role it needs: {ROLE_HINT}"


def log_capture_state(obj: dict[str, Any]) -> dict[str, Any]:
    """The Log capture's `state` from an object's status ({} before the agent wrote one)."""
    statuses = (obj.get("status") or {}).get("captureStatuses") if isinstance(obj, dict) else None
    for entry in statuses if isinstance(statuses, list) else ():
        if isinstance(entry, dict) and entry.get("type") == "Log":
            state = entry.get("state")
            return state if isinstance(state, dict) else {}
    return {}


# -- the agent's archive → the collector's layout ---------------------------------------------


def write_node_tar(
    archive: IO[bytes], out: BinaryIO, capture: dict[str, Any], left: list[str]
) -> int:
    """Write the collector's tar stream (`node/<file>`) from the agent's archive: the files the
    parsers read under their names, the archive itself, `nodediagnostic.json` (the capture:
    object, destination, outcome) and, when anything went wrong, errors.txt (the agent's own
    log-capture-errors.log included). Returns the bytes written."""
    problems: list[str] = []
    found = read_agent_archive(archive, problems)
    archive.seek(0, io.SEEK_END)
    size = archive.tell()
    archive.seek(0)
    counter = _Counting(out)
    with tarfile.open(fileobj=counter, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, sources in MAPPED.items():
            pieces = [found[s] for s in sources if s in found]
            if not pieces:
                continue
            data = b"".join(p if p.endswith(b"\n") or not p else p + b"\n" for p in pieces)
            _add(tar, name, data)
        if MOUNTS in found:
            cgroup = parse_cgroup_mounts(found[MOUNTS].decode("utf-8", "replace"))
            if cgroup.fs_type:
                _add(tar, "cgroup-fs.txt", f"{cgroup.fs_type}\n".encode())
        if size <= archives.MAX_MEMBER_BYTES:
            _add_stream(tar, ARCHIVE_NAME, archive, size)
        else:
            problems.append(
                f"{ARCHIVE_NAME}: {human_bytes(size)}, over the "
                f"{archives.MAX_MEMBER_BYTES // 2**20} MiB limit per file: only the files "
                "mignurse reads were kept"
            )
        errors = [f"NodeDiagnostic: {p}" for p in problems + left]
        agent_errors = found.get("log-capture-errors.log", b"").decode("utf-8", "replace")
        errors += [
            f"agent log-capture-errors.log: {line.strip()}"
            for line in agent_errors.splitlines()
            if line.strip() and not line.startswith("---")
        ]
        record = {**capture, "archiveBytes": size, "read": sorted(found), "problems": errors}
        _add(tar, CAPTURE_RECORD, (json.dumps(record, indent=1) + "\n").encode())
        if errors:
            _add(tar, "errors.txt", ("\n".join(errors) + "\n").encode())
    return counter.count


def read_agent_archive(archive: IO[bytes], problems: list[str]) -> dict[str, bytes]:
    """The files mignurse reads from the agent's archive, by their path in it, within the
    limits every node archive is held to; what is refused is said in `problems`."""
    found: dict[str, bytes] = {}
    budget = archives.Budget()
    head = archive.read(8)
    archive.seek(0)
    if archives.sniff(head) != "gzip":
        problems.append("the agent's archive is not a gzip'd tar: nothing read from it")
        return found
    try:
        stream = archives.Unpacked(archive, budget)
        with tarfile.open(fileobj=stream, mode="r|", bufsize=256 * 1024) as tar:
            for count, member in enumerate(tar, 1):
                if count > archives.MAX_MEMBERS:
                    problems.append(
                        f"the agent's archive holds more than {archives.MAX_MEMBERS} entries: "
                        "the rest were not read"
                    )
                    break
                name = _clean_name(member.name)
                if name not in _WANTED:
                    continue
                if not member.isfile():
                    problems.append(
                        f"{inert(member.name)[:200]!r} ({archives.entry_kind(member)}) not read: "
                        "not a regular file"
                    )
                    continue
                if member.size > archives.MAX_MEMBER_BYTES:
                    problems.append(
                        f"{name}: {human_bytes(member.size)}, over the "
                        f"{archives.MAX_MEMBER_BYTES // 2**20} MiB limit per file: not read"
                    )
                    continue
                handle = tar.extractfile(member)
                if handle is None:
                    continue
                data = handle.read()
                if name.endswith(".gz"):
                    unpacked = _gunzip(name, data, budget, problems)
                    if unpacked is None:
                        continue
                    data = unpacked
                if name in found:
                    problems.append(f"{name} is in the agent's archive twice: the first was read")
                    continue
                found[name] = data
    except archives.LimitExceeded as exc:
        problems.append(str(exc))
    except archives.ERRORS as exc:
        problems.append(f"the agent's archive is damaged or cut short: {inert(str(exc))[:200]}")
    return found


def _clean_name(name: str) -> str:
    """A member's path as the agent writes it (relative, no `./`); "" for an unsafe one."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        return ""
    return "/".join(parts)


def _gunzip(name: str, data: bytes, budget: archives.Budget, problems: list[str]) -> bytes | None:
    stream = archives.Unpacked(data, budget)
    try:
        inner = stream.read(archives.MAX_MEMBER_BYTES + 1)
    except archives.ERRORS as exc:
        problems.append(f"{name}: unreadable ({inert(str(exc))[:200]})")
        return None
    if len(inner) > archives.MAX_MEMBER_BYTES:
        problems.append(
            f"{name} unpacks to more than {archives.MAX_MEMBER_BYTES // 2**20} MiB: not read"
        )
        return None
    return inner


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(f"node/{name}")
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))


def _add_stream(tar: tarfile.TarFile, name: str, source: IO[bytes], size: int) -> None:
    info = tarfile.TarInfo(f"node/{name}")
    info.size = size
    info.mtime = int(time.time())
    info.mode = 0o600
    tar.addfile(info, source)


class _Counting(io.RawIOBase):
    def __init__(self, out: BinaryIO) -> None:
        super().__init__()
        self.out = out
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = len(data)
        self.out.write(bytes(data))
        self.count += n
        return n


class WhenUnreachable:
    """`--transport auto`: the node's usual way in (SSM, SSH, the simulator's sandbox) first,
    and the agent's capture where that could not even start (no SSH or SSM reach, as on EKS
    Auto Mode nodes). A script that ran and failed is reported as it is."""

    def __init__(self, primary: Any, fallback: NodeDiagnosticShell) -> None:
        self.primary = primary
        self.fallback = fallback
        self.node = primary.node
        self.transport = primary.transport

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        first = self.primary.run(script, timeout=timeout, stdout=stdout, cancel=cancel)
        if first.rc is not None or first.bytes_out or not first.error or first.error == CANCELLED:
            return first
        if cancel is not None and cancel.is_set():
            return first
        self.fallback.report(f"{first.transport} cannot reach it ({first.error[:120]})")
        # kept with the evidence: a refused or changed host key must not go unseen
        self.fallback.instead_of = f"{first.transport} could not: {first.error}"
        second = self.fallback.run(
            script, timeout=max(1.0, timeout - first.seconds), stdout=stdout, cancel=cancel
        )
        if second.ok:
            return second
        why = second.error or f"exit {second.rc}"
        return replace(second, error=f"{first.error}; then over {second.transport}: {why}")


def wire_reports(shell: Any, report: Report) -> None:
    """Give every NodeDiagnostic capture in `shell` (alone or behind fallbacks) the
    collector's progress line."""
    if isinstance(shell, NodeDiagnosticShell):
        shell.report = report
        return
    for part in ("primary", "fallback"):
        inner = getattr(shell, part, None)
        if inner is not None:
            wire_reports(inner, report)
