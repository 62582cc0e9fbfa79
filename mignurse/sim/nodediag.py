"""The EKS node monitoring agent's NodeDiagnostic side, as the simulator plays it.

From aws/eks-node-monitoring-agent v1.7.0 (c399089dec78cb245306ca2a5f9806b7c32ca093):
- the CRD is api/crds/eks.amazonaws.com_nodediagnostics.yaml, packed as
  nodediagnostics-crd.json (its schema prunes, defaults and validates creates);
- pkg/controllers/nodediagnostic.go handleLogCapture: the agent on the node named like the
  object patches `status.captureStatuses` to `{type: Log, state: {running: {startedAt}}}`,
  collects, then writes `state.completed` {reason Success | SuccessWithErrors | Failure,
  message, startedAt, finishedAt}; destination `node` saves /var/log/support/<node>-logs.tar.gz
  (removed 600 s later), any other destination is an HTTP PUT of the archive to that URL;
- pkg/util/file/archive.go TarGzipDir: a gzip'd tar of the collectors' relative paths
  (pkg/log_collector/collect: kubelet/kubelet.log, containerd/containerd-log.txt,
  nodeadm/nodeadm-*.log, kernel/dmesg.human.current, storage/mounts.txt,
  var_log/cloud-init*.log).

The agent runs beside the API server on its own threads (a real agent is another process on
the node), so a capture completes whatever the simulated clock's speed. The archive is made
from the node's sandbox (mignurse.sim.nodes), so the journals are the ones `--transport sim`
would collect. Tests steer it through `failing`, `silent` and `archive_for`.
"""

from __future__ import annotations

import copy
import http.client
import io
import json
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mignurse.sim.objects import stable_uuid, ts

if TYPE_CHECKING:
    from mignurse.sim.simcluster import SimCluster

JsonDict = dict[str, Any]
PLURAL = "nodediagnostics"
SAVED_SECONDS = 600.0  # the agent removes the node's archive after 10 minutes
START_SECONDS = 0.05  # wall seconds before the agent's reconcile marks the capture running
CAPTURE_SECONDS = 0.3  # wall seconds the collectors take
ERRORS_LOG = "log-capture-errors.log"


@cache
def _packed() -> JsonDict:
    data = resources.files("mignurse.sim").joinpath("nodediagnostics-crd.json").read_text()
    packed: JsonDict = json.loads(data)
    return packed


def schema() -> JsonDict:
    """The v1alpha1 openAPIV3Schema of the published CRD."""
    version = _packed()["crd"]["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"])


def served_crd(created: str) -> JsonDict:
    """The CRD as the add-on installs it and `kubectl get crd -o yaml` shows it."""
    doc = copy.deepcopy(_packed()["crd"])
    doc.pop("apiVersion", None)
    doc.pop("kind", None)
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    spec.setdefault("conversion", {"strategy": "None"})
    return {
        "metadata": {
            **doc["metadata"],
            "uid": stable_uuid("crd", name),
            "resourceVersion": "0",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {
            "acceptedNames": dict(spec["names"]),
            "conditions": [
                {
                    "type": "Established",
                    "status": "True",
                    "lastTransitionTime": created,
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                }
            ],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
        },
    }


def saved_path(node: str) -> str:
    """Where the agent saves a `node` destination's archive, under kubelet's /logs/."""
    return f"support/{node}-logs.tar.gz"


class NodeDiagnosticAgent:
    """Every node's agent, as far as NodeDiagnostic goes."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.saved: dict[str, tuple[float, bytes]] = {}  # node → (when, archive) on the node
        self.failing: dict[str, str] = {}  # node → the collector error its capture ends with
        self.silent: set[str] = set()  # nodes whose agent never takes a capture up
        self.archive_for: Callable[[str], bytes] | None = None  # a test's archive instead
        self.capture_seconds = CAPTURE_SECONDS
        self._lock = threading.Lock()

    def created(self, name: str) -> None:
        """A NodeDiagnostic was created: the agent on the node of that name reconciles it."""
        threading.Thread(
            target=self._reconcile, args=(name,), name=f"sim-nma-{name}", daemon=True
        ).start()

    def served_file(self, node: str, path: str) -> bytes | None:
        """What kubelet's /logs/ handler serves at `path` on `node`, if anything."""
        with self._lock:
            saved = self.saved.get(node)
            if saved is None or path != saved_path(node):
                return None
            if time.monotonic() - saved[0] > SAVED_SECONDS:
                del self.saved[node]
                return None
            return saved[1]

    # -- the controller -----------------------------------------------------------------------

    def _reconcile(self, name: str) -> None:
        machine = self.sim.loops.machines.get(name)
        if machine is None or machine.removed or not machine.nma_running or name in self.silent:
            return  # no agent on such a node: nothing ever writes a status
        time.sleep(START_SECONDS)
        current = self.sim.store.get(PLURAL, "", name) or {}
        spec = (current.get("spec") or {}).get("logCapture")
        if not isinstance(spec, dict):
            return  # Reconcile: no logCapture (a packet capture only) is not a log capture
        destination = str(spec.get("destination") or "")
        started = ts(self.sim.loops.now)
        # CaptureState's pointers carry no omitempty: the other one is written as null
        if self._status(name, {"running": {"startedAt": started}, "completed": None}) is None:
            return
        archive = self.archive_for(name) if self.archive_for else self.build_archive(name)
        time.sleep(self.capture_seconds)
        reason, message = self._deliver(name, destination, archive)
        self._status(
            name,
            {
                "running": None,
                "completed": {
                    "reason": reason,
                    "message": message,
                    "startedAt": started,
                    "finishedAt": ts(self.sim.loops.now),
                },
            },
        )

    def _deliver(self, name: str, destination: str, archive: bytes) -> tuple[str, str]:
        fault = self.failing.get(name)
        if fault is not None:
            return "Failure", f"fatal error during log collection process{fault}"
        # the agent writes log-capture-errors.log exactly when a collector failed, and then
        # reports SuccessWithErrors
        partial = ERRORS_LOG in _member_names(archive)
        if destination == "node":
            path = f"/var/log/{saved_path(name)}"
            with self._lock:
                self.saved[name] = (time.monotonic(), archive)
            if partial:
                return "SuccessWithErrors", f"successfully saved logs to {path} with some errors"
            return "Success", f"successfully saved logs to {path}"
        try:
            status = _put(destination, archive)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            return "Failure", f"fatal error during log upload process{exc}"
        if not 200 <= status < 300:  # pkg/util/net DoRequest: a non-2xx answer is an error
            return "Failure", f"fatal error during log upload processstatus code {status}"
        if partial:
            return "SuccessWithErrors", "successfully uploaded logs with some errors"
        return "Success", "successfully uploaded logs with no errors"

    def _status(self, name: str, state: JsonDict) -> JsonDict | None:
        """Set the Log capture's state as the agent's status patch does; None once deleted."""
        store = self.sim.store
        with store.lock:
            obj = store.get(PLURAL, "", name)
            if obj is None:
                return None
            status = obj.setdefault("status", {})
            statuses = [s for s in status.get("captureStatuses") or [] if s.get("type") != "Log"]
            status["captureStatuses"] = [*statuses, {"type": "Log", "state": state}]
            store.put(PLURAL, obj)
        return obj

    # -- the archive --------------------------------------------------------------------------

    def build_archive(self, name: str) -> bytes:
        """The agent's archive for the node: its sandbox's journals and cloud-init logs under
        the collectors' names."""
        from mignurse.sim.nodes import NodeSandbox, story_for

        node = self.sim.store.get("nodes", "", name) or {"metadata": {"name": name}}
        with tempfile.TemporaryDirectory(prefix="mignurse-nma-") as root:
            sandbox = NodeSandbox.for_node(Path(root), node, story=story_for(node))
            data = sandbox.data
            files = {
                "kubelet/kubelet.log": (data / "kubelet.log").read_bytes(),
                "containerd/containerd-log.txt": (data / "containerd.log").read_bytes(),
                "nodeadm/nodeadm-run.log": (data / "nodeadm.log").read_bytes(),
                "kernel/dmesg.human.current": _ctime_dmesg((data / "kernel.log").read_text()),
                "storage/mounts.txt": _mounts(sandbox.cgroup),
                "var_log/cloud-init.log": (sandbox.fs / "var/log/cloud-init.log").read_bytes(),
                "var_log/cloud-init-output.log": (
                    sandbox.fs / "var/log/cloud-init-output.log"
                ).read_bytes(),
            }
        return tar_gz(files)


def _member_names(archive: bytes) -> list[str]:
    """The archive's member names; [] for one that does not open (a test's hostile one)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            return tar.getnames()
    except (tarfile.TarError, OSError, EOFError, ValueError):
        return []


def _put(url: str, body: bytes) -> int:
    """An HTTP PUT of `body` as Go's http.NewRequest sends it: no Content-Type, its length."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"unsupported protocol scheme in {url[:60]!r}")
    connection_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_type(parts.hostname, parts.port, timeout=30)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Length": str(len(body))}
        connection.request("PUT", target or "/", body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def _mounts(cgroup_fs: str) -> bytes:
    """`mount` then `df --human-readable`, as the Disk collector appends them."""
    cgroup = (
        "cgroup2 on /sys/fs/cgroup type cgroup2 (rw,nosuid,nodev,noexec,relatime,nsdelegate,"
        "memory_recursiveprot)"
        if cgroup_fs == "cgroup2fs"
        else "tmpfs on /sys/fs/cgroup type tmpfs (ro,nosuid,nodev,noexec,mode=755)"
    )
    return (
        "/dev/nvme0n1p1 on / type xfs (rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,noquota)\n"
        f"{cgroup}\n"
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "/dev/nvme0n1p1  100G   12G   89G  12% /\n"
    ).encode()


def _ctime_dmesg(journal: str) -> bytes:
    """`dmesg --ctime` lines ("[Sat Dec  5 22:40:01 2026] text") from journal lines."""
    out = []
    for line in journal.splitlines():
        stamp, _, rest = line.partition(" ")
        try:
            when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(UTC)
        except ValueError:
            continue
        text = rest.split(": ", 1)[1] if ": " in rest else rest
        out.append(f"[{when:%a %b} {when.day:2d} {when:%H:%M:%S %Y}] {text}")
    return ("\n".join(out) + "\n").encode()


def tar_gz(files: dict[str, bytes]) -> bytes:
    """A gzip'd tar of relative paths, as TarGzipDir writes it (files only, no folders)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, content in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(content)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
