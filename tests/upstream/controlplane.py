"""etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, as `make upstream` built them.

The same start-up as scripts/upstream-smoke.sh (docs/upstream.md): a throw-away CA made with
openssl, the API server's serving certificate, an admin client certificate (system:masters) and
the service-account keys; etcd and the API server on free ports; the controller manager with
the node lifecycle controller's grace periods lengthened. Every process runs under `nice -n 19`
and is stopped (its whole process group) when the plane stops.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cache_folder() -> Path:
    """Where scripts/upstream-build.sh writes the binaries."""
    if root := os.environ.get("MIGNURSE_UPSTREAM_CACHE"):
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mignurse-upstream"


def required_version(component: str, module: str) -> str | None:
    """The version of `module` that upstream/<component>/go.mod requires."""
    gomod = REPO / "upstream" / component / "go.mod"
    if not gomod.exists():
        return None
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod.read_text(), re.M)
    return found.group(1) if found else None


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    etcd: Path


def find_binaries() -> tuple[Binaries | None, str]:
    """The built binaries, or None and the one line that says what is missing."""
    k8s = required_version("kubernetes", "k8s.io/kubernetes")
    etcd = required_version("etcd", "go.etcd.io/etcd/server/v3")
    if k8s is None or etcd is None:
        return None, "upstream/kubernetes/go.mod or upstream/etcd/go.mod names no version"
    cache = cache_folder()
    bins = Binaries(
        kube_apiserver=cache / f"kubernetes-{k8s}" / "bin" / "kube-apiserver",
        kube_controller_manager=cache / f"kubernetes-{k8s}" / "bin" / "kube-controller-manager",
        etcd=cache / f"etcd-{etcd}" / "bin" / "etcd",
    )
    missing = [p for p in (bins.kube_apiserver, bins.kube_controller_manager, bins.etcd)]
    missing = [p for p in missing if not os.access(p, os.X_OK)]
    if missing:
        names = ", ".join(str(p) for p in missing)
        return None, f"the real control plane is not built ({names}): run `make upstream` first"
    if subprocess.run(["openssl", "version"], capture_output=True, check=False).returncode:
        return None, "openssl is not installed (it makes the control plane's certificates)"
    return bins, ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(work: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=work, capture_output=True, check=True)


def _certificates(work: Path) -> None:
    _openssl(
        work,
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt"),
        *("-days", "1", "-subj", "/CN=mignurse-upstream-tier-ca"),
    )

    def sign(name: str, subject: str, extensions: str) -> None:
        _openssl(
            work,
            *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key"),
            *("-out", f"{name}.csr", "-subj", subject),
        )
        (work / f"{name}.ext").write_text(extensions + "\n")
        _openssl(
            work,
            *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
            *("-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext"),
        )

    sign(
        "apiserver",
        "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth",
    )
    sign("admin", "/O=system:masters/CN=mignurse-upstream-admin", "extendedKeyUsage=clientAuth")
    _openssl(work, "genrsa", "-out", "sa.key", "2048")
    _openssl(work, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


@dataclass
class ControlPlane:
    """The running processes; `url`, `ssl_context()` for a client with the admin certificate."""

    work: Path
    bins: Binaries
    api_port: int = 0
    etcd_url: str = ""
    # How long the node lifecycle controller waits for a Node's heartbeat: long for the
    # differential checks' copied Nodes, which never heartbeat; short where kwok heartbeats.
    node_grace: str = "30m"
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.work / "ca.crt"))
        context.load_cert_chain(self.work / "admin.crt", self.work / "admin.key")
        return context

    def start_process(
        self, name: str, *argv: str | Path, env: dict[str, str] | None = None
    ) -> None:
        log = (self.work / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            ["nice", "-n", "19", *map(str, argv)],
            cwd=self.work,
            env={**os.environ, **env} if env else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() leaves no orphan
        )
        log.close()

    def wait_ready(
        self, name: str, url: str, seconds: float, context: ssl.SSLContext | None
    ) -> None:
        deadline = time.monotonic() + seconds
        while True:
            process = self.processes[name]
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}): see {self.log(name)}")
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{name} did not answer {url} in {seconds:.0f} s: {self.log(name)}"
                )
            time.sleep(0.5)

    def compact(self, revision: int) -> None:
        """Compact etcd's history below `revision`, as the API server does every 5 minutes
        (--etcd-compaction-interval), through etcd's JSON gateway (/v3/kv/compaction)."""
        body = json.dumps({"revision": str(revision), "physical": True}).encode()
        request = urllib.request.Request(
            f"{self.etcd_url}/v3/kv/compaction", data=body, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def start(self) -> ControlPlane:
        _certificates(self.work)
        etcd_port, peer_port, self.api_port = free_port(), free_port(), free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        self.etcd_url = etcd_url
        self.start_process(
            "etcd",
            self.bins.etcd,
            *("--name", "tier", "--data-dir", self.work / "etcd"),
            *("--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url),
            *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
            *("--initial-cluster", f"tier={peer_url}", "--log-level", "warn"),
        )
        self.wait_ready("etcd", f"{etcd_url}/health", 60, None)
        self.start_process(
            "kube-apiserver",
            self.bins.kube_apiserver,
            *("--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1"),
            *("--secure-port", str(self.api_port), "--etcd-servers", etcd_url),
            *("--tls-cert-file", "apiserver.crt", "--tls-private-key-file", "apiserver.key"),
            *("--client-ca-file", "ca.crt", "--service-account-key-file", "sa.pub"),
            *("--service-account-signing-key-file", "sa.key"),
            *("--service-account-issuer", "https://kubernetes.default.svc.cluster.local"),
            *("--service-cluster-ip-range", "10.96.0.0/16", "--authorization-mode", "Node,RBAC"),
            *("--allow-privileged", "--cert-dir", self.work / "apiserver-certs"),
        )
        self.wait_ready("kube-apiserver", f"{self.url}/readyz", 240, self.ssl_context())
        kubeconfig = self.work / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: tier\n  cluster:\n"
            f"    server: {self.url}\n    certificate-authority: {self.work / 'ca.crt'}\n"
            "users:\n- name: admin\n  user:\n"
            f"    client-certificate: {self.work / 'admin.crt'}\n"
            f"    client-key: {self.work / 'admin.key'}\n"
            "contexts:\n- name: tier\n  context: {cluster: tier, user: admin}\n"
            "current-context: tier\n"
        )
        kcm_port = free_port()
        self.start_process(
            "kube-controller-manager",
            self.bins.kube_controller_manager,
            *("--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig),
            *("--authorization-kubeconfig", kubeconfig, "--bind-address", "127.0.0.1"),
            *("--secure-port", str(kcm_port), "--leader-elect=false"),
            *("--service-account-private-key-file", "sa.key", "--root-ca-file", "ca.crt"),
            *("--cluster-signing-cert-file", "ca.crt", "--cluster-signing-key-file", "ca.key"),
            *("--use-service-account-credentials", "--controllers", "*"),
            # The nodes copied from the simulator never heartbeat: a grace period longer than
            # the tier keeps them Ready, as their kubelets would (`node_grace`).
            *("--node-monitor-period", "2s", "--node-monitor-grace-period", self.node_grace),
            f"--node-startup-grace-period={self.node_grace}",
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self.wait_ready(
            "kube-controller-manager", f"https://127.0.0.1:{kcm_port}/healthz", 90, insecure
        )
        return self

    def stop_process(self, name: str) -> None:
        """Stop one process (its whole group): SIGTERM, SIGKILL after 10 s."""
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop(self) -> None:
        """The newest first: the controller manager, the API server, etcd last."""
        for name in reversed(list(self.processes)):
            self.stop_process(name)
