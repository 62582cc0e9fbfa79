"""A way into each kwok node: the real SSH transport to a real OpenSSH sshd on 127.0.0.1,
whose login for that node is the simulator's NodeSandbox built from the Node object.

A kwok node is a Node object with no machine behind it, so `collect` and the MIG runbook had
nothing to run their scripts on. Here each node the test adds gets:

- a NodeSandbox (`mignurse.sim.nodes`) built from the Node as the API server has it
  (`NodeSandbox.for_node`: its name, creation time, its 8 GPUs, H100 by default): its files
  under `fs/`, stub journalctl, nvidia-smi, nvidia-mig-parted and a systemctl that records
  every call and refuses all but read-only questions;
- its own client key, whose `authorized_keys` entry forces the login (`command="…"`, sshd(8)
  AUTHORIZED_KEYS FILE FORMAT) into a script that puts the sandbox's environment and stub
  `bin/` first on PATH and then runs what the client asked for (`SSH_ORIGINAL_COMMAND`), so
  the product's `sh -s` reads its script from the channel as on a real node;
- a `Host <node>` block in the CLI's `~/.ssh/config` (HostName 127.0.0.1, Port, User,
  IdentityFile, IdentitiesOnly), which `mignurse.nodeaccess.ssh` already honours, as it does
  for an engineer's bastion; and the server's host key in `~/.ssh/known_hosts` under
  `[127.0.0.1]:PORT`, the name OpenSSH and paramiko look a non-22 port up by.

The product is unchanged: `--transport ssh` connects to the node's name, and the config maps
it. Nodes without a block fall to `Host *`, a closed port of 127.0.0.1: no way in.

`MigDevicePlugin` stands in for the one piece of a GPU node no sandbox has: the NVIDIA device
plugin, which reads the GPUs from NVML and has kubelet advertise them, and which the GPU
operator starts again once mig-manager's state is `success`. It reads them from the sandbox's
GPUs (what its nvidia-smi reports) and patches the Node's status as kubelet would.
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controlplane import free_port
from nodeaccess.sshd import Sshd

from mignurse.sim.nodes import NodeSandbox, story_for


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


@dataclass
class NodeShells:
    """The sandboxes behind `server` and the CLI's ssh config and known_hosts in `home`."""

    server: Sshd
    home: Path
    work: Path
    closed_port: int = field(default_factory=free_port)  # bound, then closed: nothing listens
    sandboxes: dict[str, NodeSandbox] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ssh = self.home / ".ssh"
        ssh.mkdir(mode=0o700, exist_ok=True)
        (ssh / "known_hosts").write_text(
            f"[{self.server.host}]:{self.server.port} {self.server.host_key_pub}\n"
        )
        self._write_config()

    def add(self, node: dict[str, Any]) -> NodeSandbox:
        """Give the Node (its JSON as read from the API server) a way in; its sandbox."""
        name = str(node["metadata"]["name"])
        folder = self.work / name
        folder.mkdir(parents=True, exist_ok=True)
        # A kwok Node's capacity holds only what its NodeClaim requested (one GPU of eight:
        # docs/simulator-fidelity.md); the machine has every GPU its allocatable shows.
        machine = copy.deepcopy(node)
        status = machine.setdefault("status", {})
        gpus = (status.get("allocatable") or {}).get("nvidia.com/gpu")
        if gpus:
            status.setdefault("capacity", {})["nvidia.com/gpu"] = gpus
        sandbox = NodeSandbox.for_node(folder / "sandbox", machine, story=story_for(node))
        key = folder / "id_ed25519"
        _keygen(key)
        login = folder / "login"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(sandbox.env.items()))
        login.write_text(
            "#!/bin/sh\n"
            f"# the login of node {name}: its sandbox's environment, its stub tools first\n"
            + exports
            + f'PATH={shlex.quote(":".join(sandbox.path_prefix))}:"$PATH"\nexport PATH\n'
            'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
        )
        login.chmod(0o755)
        public = " ".join(Path(f"{key}.pub").read_text().split()[:2])
        with (self.server.tmp / "authorized_keys").open("a") as keys:
            keys.write(f'command="{login}",no-port-forwarding,no-pty {public} {name}\n')
        self.sandboxes[name] = sandbox
        self._write_config()
        return sandbox

    def _write_config(self) -> None:
        # ssh_config takes each option's first value: the node's block comes before `Host *`.
        blocks = [
            f"Host {name}\n  HostName {self.server.host}\n  Port {self.server.port}\n"
            f"  User {self.server.user}\n  IdentityFile {self.work / name / 'id_ed25519'}\n"
            "  IdentitiesOnly yes\n"
            for name in self.sandboxes
        ]
        blocks.append(f"Host *\n  HostName 127.0.0.1\n  Port {self.closed_port}\n")
        (self.home / ".ssh" / "config").write_text("\n".join(blocks))


def advertised(sandbox: NodeSandbox) -> dict[str, int]:
    """What the NVIDIA device plugin advertises for the sandbox's GPUs with the mixed MIG
    strategy (NVIDIA/k8s-device-plugin README "MIG support"): `nvidia.com/gpu` the GPUs
    with MIG off, `nvidia.com/mig-<profile>` the MIG devices of those with it on."""
    counts: dict[str, int] = {"nvidia.com/gpu": 0}
    for gpu in sandbox.mig_state()["gpus"]:
        if gpu["current"] != "Enabled":
            counts["nvidia.com/gpu"] += 1
            continue
        for instance in gpu["instances"]:
            resource = f"nvidia.com/mig-{instance['profile']}"
            counts[resource] = counts.get(resource, 0) + 1
    return counts


class MigDevicePlugin:
    """The device plugin's part on one Node, from its sandbox's GPUs, patched into the Node's
    status capacity and allocatable as kubelet reports them: at start, the GPUs as they are
    (a kwok Node's capacity holds only what its NodeClaim asked for, one GPU of eight:
    docs/simulator-fidelity.md); then, once its `nvidia.com/mig.config.state` turns `success`
    (the runbook resumed the operands, as mig-manager does and after which the GPU operator
    starts the plugin again), the MIG devices. A resource no longer offered stays at 0: kubelet
    keeps it (kubernetes/kubernetes v1.34.4 pkg/kubelet/cm/devicemanager/manager.go
    GetCapacity)."""

    def __init__(
        self,
        node: str,
        sandbox: NodeSandbox,
        get: Callable[[], dict[str, Any] | None],
        patch_status: Callable[[str], object],
    ) -> None:
        self.node = node
        self.sandbox = sandbox
        self._get = get
        self._patch = patch_status
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.advertised: dict[str, int] = {}
        self.restarted = False

    def __enter__(self) -> MigDevicePlugin:
        self._advertise()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _advertise(self) -> None:
        devices = advertised(self.sandbox)
        resources = {r: str(n) for r, n in devices.items()}
        self._patch(json.dumps({"status": {"capacity": resources, "allocatable": resources}}))
        self.advertised = devices

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            seen = self._get()
            if seen is None:
                return
            labels = seen["metadata"].get("labels") or {}
            if labels.get("nvidia.com/mig.config.state") == "success" and not self.restarted:
                self._advertise()
                self.restarted = True
