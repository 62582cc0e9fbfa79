"""Hostile and broken inputs, generated (no committed blobs), and the real `mignurse` entry
point run on them as a user runs it, in a process of its own (forked with the CLI imported:
tests/cliserver.py): exit code and stderr are what the tests judge."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path

import cliserver

MiB = 2**20
GiB = 2**30


def mignurse(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`mignurse ARGS` in a clean environment: no kubeconfig, AWS profile or debug flag of
    this machine's leaks in."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
    }
    clean.update(env or {})
    return cliserver.run(list(args), env=clean, cwd=os.getcwd(), timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single `mignurse: error:` line a user error ends in, checked; its text."""
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    err = result.stderr
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    assert err.count("\n") == 1 and err.startswith("mignurse: error: "), err[-2000:]
    return err.strip()


# -- bundles --------------------------------------------------------------------------------

NODE = "ip-10-0-7-21.us-west-2.compute.internal"
COLLECTED_AT = "2026-11-29T03:05:00Z"


def node_object(name: str = NODE) -> dict[str, object]:
    """A GPU Node as `kubectl get nodes -o json` lists it, Ready at the collection time."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "3f1c2a4e-0000-4000-8000-000000000001",
            "creationTimestamp": "2026-11-29T01:00:00Z",
            "labels": {
                "karpenter.sh/nodepool": "gpu",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "nvidia.com/gpu.present": "true",
            },
        },
        "spec": {"providerID": "aws:///us-west-2a/i-0a1b2c3d4e5f60718"},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-11-29T03:04:30Z",
                    "lastTransitionTime": "2026-11-29T01:02:00Z",
                }
            ],
        },
    }


def kubectl_list(items: Iterable[object]) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}).encode()


def snapshot_files(node: str = NODE) -> dict[str, bytes]:
    """The smallest mignurse bundle: the cluster's Nodes, a manifest, one node file."""
    return {
        "cluster/nodes.json": kubectl_list([node_object(node)]),
        "manifest.json": json.dumps({"collected_at": COLLECTED_AT, "context": "prod"}).encode(),
        f"nodes/{node}/cgroup-fs.txt": b"cgroup2fs\n",
    }


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def member(name: str, data: bytes = b"", *, size: int | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data) if size is None else size
    info.mtime = 1_795_000_000
    return info


def write_tarball(
    path: Path, members: Iterable[tuple[str, bytes]], *, top: str = "mignurse-bundle-prod"
) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            tar.addfile(member(f"{top}/{name}" if top else name, data), io.BytesIO(data))
    return path


def gzip_of_header(path: Path, name: str, size: int, kind: bytes = tarfile.REGTYPE) -> Path:
    """A .tar.gz whose one member says it is `size` bytes long, cut right after its header:
    what a reader meets at the start of a bundle holding a 10 GB file (or, with `kind`
    XHDTYPE, a pax header that tarfile would read into memory whole)."""
    info = member(name, size=size)
    info.type = kind
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    packer = zlib.compressobj(wbits=31)
    path.write_bytes(packer.compress(header) + packer.flush())
    return path


# -- YAML -----------------------------------------------------------------------------------


def billion_laughs(top_key: str = "lol9") -> str:
    """Nine levels of ten aliases each: 10^9 strings once expanded."""
    lines = ['lol0: &lol0 "lol"']
    for level in range(1, 10):
        refs = ", ".join(f"*lol{level - 1}" for _ in range(10))
        lines.append(f"lol{level}: &lol{level} [{refs}]")
    lines.append(f"{top_key}: *lol9")
    return "\n".join(lines) + "\n"


def deep_json(depth: int) -> bytes:
    return b'{"items": ' + b"[" * depth + b"]" * depth + b"}"
