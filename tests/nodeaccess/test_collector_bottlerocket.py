"""The collector on Bottlerocket, from wherever it lands: the control container (SSM), the admin
container (SSH), or the host itself. What it cannot reach is in the node manifest as skipped,
with the reason; it never enables the admin container."""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mignurse.nodeaccess.local import LocalShell
from mignurse.nodeaccess.script import BOTTLEROCKET_ADMIN_DISABLED, collector_script
from mignurse.sim.nodes import NodeSandbox

OS_RELEASE = (
    "NAME=Bottlerocket\nID=bottlerocket\n"
    'PRETTY_NAME="Bottlerocket OS 1.51.0 (aws-k8s-1.34-nvidia)"\n'
)
SETTINGS = {
    "settings": {
        "kubelet-device-plugins": {
            "nvidia": {
                "device-partitioning-strategy": "mig",
                "mig": {"profile": {"rtxpro6000.96gb": "1g.24gb"}},
            }
        }
    }
}
HOST_SOURCES = ("kubelet.log", "containerd.log", "kernel.log", "nvidia-smi-L.txt", "mig-lgi.txt")
CHROOT = ("apiclient", "exec", "-T", "admin", "sudo", "-n", "chroot", "/.bottlerocket/rootfs")


def _apiclient(sandbox: NodeSandbox, *, admin: bool, host_root: Path) -> None:
    """apiclient as the control container has it: `get` answers from the API; `exec -T admin
    sudo -n chroot /.bottlerocket/rootfs CMD` runs CMD as on the host (files under host_root)."""
    enabled = json.dumps({"host-containers": {"admin": {"enabled": admin}}})
    sandbox.stub(
        "apiclient",
        f"""case "$1 $2" in
  "get host-containers.admin.enabled") echo '{enabled}' ;;
  "get settings.kubelet-device-plugins") echo '{json.dumps(SETTINGS)}' ;;
  "exec -T")
    [ "$3 $4 $5 $6 $7" = "admin sudo -n chroot /.bottlerocket/rootfs" ] || exit 2
    shift 7
    if [ "$1" = cat ]; then exec cat "{host_root}$2"; fi
    exec "$@" ;;
  *) echo "apiclient: refused $*" >&2; exit 1 ;;
esac
""",
    )


def _logdog(sandbox: NodeSandbox, writes_to: Path) -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        data = b"-- Journal begins --\n"
        info = tarfile.TarInfo("bottlerocket-logs/journalctl.log")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    source = sandbox.root / "logdog.tar.gz"
    source.write_bytes(archive.getvalue())
    sandbox.stub(
        "logdog",
        f'mkdir -p "{writes_to.parent}" && cp "{source}" "{writes_to}"\n'
        f'echo "logs are at: {writes_to}"\n',
    )


def _collect(sandbox: NodeSandbox, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    runner = LocalShell(sandbox.node, env=sandbox.env, path_prefix=sandbox.path_prefix)
    sink = io.BytesIO()
    result = runner.run(collector_script(), timeout=30, stdout=sink)
    assert result.ok, result.stderr_tail
    with tarfile.open(fileobj=io.BytesIO(sink.getvalue())) as tar:
        tar.extractall(tmp_path / "out", filter="data")
    node_dir = tmp_path / "out" / "node"
    manifest: dict[str, Any] = json.loads((node_dir / "manifest.json").read_text())
    return node_dir, manifest


def _sources(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["file"]: s for s in manifest["sources"]}


def _bottlerocket_skips(sources: dict[str, dict[str, Any]]) -> None:
    assert sources["cloud-init-status.json"]["skipped"] == "Bottlerocket has no cloud-init"
    assert sources["cloud-init.log"]["skipped"] == "Bottlerocket has no cloud-init"
    assert sources["nodeadm.log"]["skipped"] == "Bottlerocket has no nodeadm"
    assert sources["mig-parted-export.yaml"]["skipped"] == "Bottlerocket has no nvidia-mig-parted"


def test_control_container_without_admin_says_what_it_could_not_read(tmp_path: Path) -> None:
    # SSM lands in the control container: its own os-release (not Bottlerocket's), /.bottlerocket
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    (sandbox.fs / ".bottlerocket/support").mkdir(parents=True)
    _apiclient(sandbox, admin=False, host_root=tmp_path / "host")

    node_dir, manifest = _collect(sandbox, tmp_path)

    assert manifest["os_id"] == "bottlerocket"
    assert manifest["host_access"] == "Bottlerocket control container; admin container disabled"
    sources = _sources(manifest)
    for name in (*HOST_SOURCES, "os-release", "nvidia-migmanager.log", "bottlerocket-logs.tar.gz"):
        assert sources[name]["skipped"] == "admin container disabled", name
        assert not (node_dir / name).exists()
    _bottlerocket_skips(sources)
    assert (node_dir / "errors.txt").read_text().count(BOTTLEROCKET_ADMIN_DISABLED) == 1
    # what the API answers is still collected: the MIG settings
    assert json.loads((node_dir / "bottlerocket-settings.json").read_text()) == SETTINGS
    called = {c.command for c in sandbox.calls()}
    assert called <= {"apiclient", "stat"}, called  # no journalctl, nvidia-smi, logdog here
    assert not [c for c in sandbox.calls() if c.command == "apiclient" and c.args[0] != "get"]


def test_control_container_reads_the_host_through_the_admin_container(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    (sandbox.fs / ".bottlerocket/support").mkdir(parents=True)
    host = tmp_path / "host"
    (host / "etc").mkdir(parents=True)
    (host / "etc/os-release").write_text(OS_RELEASE)
    _apiclient(sandbox, admin=True, host_root=host)
    _logdog(sandbox, sandbox.fs / ".bottlerocket/support/bottlerocket-logs.tar.gz")

    node_dir, manifest = _collect(sandbox, tmp_path)

    assert manifest["host_access"].startswith("Bottlerocket control container: apiclient exec")
    sources = _sources(manifest)
    for name in (*HOST_SOURCES, "os-release", "nvidia-migmanager.log", "logdog.txt"):
        assert tuple(sources[name]["argv"][: len(CHROOT)]) == CHROOT, name
        assert "skipped" not in sources[name], name
    assert sources["nvidia-migmanager.log"]["argv"][len(CHROOT) :][-4:] == [
        "-u", "nvidia-migmanager", "-b", "0"
    ]  # fmt: skip
    assert (node_dir / "os-release").read_text() == OS_RELEASE
    assert (node_dir / "kubelet.log").stat().st_size > 0
    with tarfile.open(node_dir / "bottlerocket-logs.tar.gz") as tar:
        assert "bottlerocket-logs/journalctl.log" in tar.getnames()
    _bottlerocket_skips(sources)
    assert BOTTLEROCKET_ADMIN_DISABLED not in (node_dir / "errors.txt").read_text()


def test_admin_container_reads_the_host_root_with_chroot(tmp_path: Path) -> None:
    # SSH lands in the admin container: the host's root at /.bottlerocket/rootfs
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    rootfs = sandbox.fs / ".bottlerocket/rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc/os-release").write_text(OS_RELEASE)
    sandbox.stub("sudo", '[ "$1" = -n ] && shift; exec "$@"\n')
    sandbox.stub("chroot", 'shift; exec "$@"\n')  # the sandbox's stubs are the host's tools
    _apiclient(sandbox, admin=True, host_root=rootfs)
    _logdog(sandbox, sandbox.fs / ".bottlerocket/support/bottlerocket-logs.tar.gz")

    node_dir, manifest = _collect(sandbox, tmp_path)

    assert manifest["host_access"].startswith("Bottlerocket admin container")
    sources = _sources(manifest)
    argv = sources["kubelet.log"]["argv"]
    chroot_at = argv.index("chroot")
    assert argv[chroot_at + 1] == f"{sandbox.fs}/.bottlerocket/rootfs"
    assert argv[chroot_at + 2] == "journalctl"
    assert (node_dir / "os-release").read_text() == OS_RELEASE
    assert json.loads((node_dir / "bottlerocket-settings.json").read_text()) == SETTINGS
    assert (node_dir / "bottlerocket-logs.tar.gz").exists()
    _bottlerocket_skips(sources)


def test_on_the_host_itself_sources_run_directly(tmp_path: Path) -> None:
    sandbox = NodeSandbox(tmp_path / "sb", node="n1", scenario_facts={"story": "healthy"})
    (sandbox.fs / "etc/os-release").write_text(OS_RELEASE)
    _apiclient(sandbox, admin=False, host_root=sandbox.fs)
    _logdog(sandbox, sandbox.fs / "var/log/support/bottlerocket-logs.tar.gz")

    node_dir, manifest = _collect(sandbox, tmp_path)

    assert manifest["host_access"] == "Bottlerocket host (root shell)"
    sources = _sources(manifest)
    assert sources["kubelet.log"]["argv"][0] == "journalctl"
    assert sources["logdog.txt"]["argv"] == ["logdog"]
    assert (node_dir / "bottlerocket-logs.tar.gz").exists()
    _bottlerocket_skips(sources)
    assert not [c for c in sandbox.calls() if c.command == "cloud-init"]


@pytest.mark.parametrize("word", ["sheltie", "apiclient set", "enable-admin-container"])
def test_the_script_never_enables_the_admin_container_nor_uses_sheltie(word: str) -> None:
    # the advice line says how a person enables it; nothing in the script runs that
    script = collector_script().replace(shlex.quote(BOTTLEROCKET_ADMIN_DISABLED), "")
    assert word not in script
