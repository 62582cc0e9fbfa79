"""The pods the cluster itself runs: DaemonSet pods on each node and the pools' Deployments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.sim import dra, hardware, node_objects, objects
from mignurse.sim.controllers.base import (
    LABEL_GPU_DEPLOY,
    OPERAND_DAEMONSETS,
    Machine,
)
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.scenario_spec import PluginCrashSpec, PoolSpec

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class Pods:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    # ------------------------------------------------------------------ pods

    def daemonsets_for(
        self, pool: PoolSpec
    ) -> list[tuple[str, str, str, dict[str, str], str, bool]]:
        """(namespace, daemonset, container image, labels, priority class, hostNetwork) of
        the DaemonSets that run on the pool's nodes."""
        ecr = node_objects.ECR.format(region=self.loops.scenario.region)
        sets = _eks_daemonsets(ecr, pool) + _gpu_daemonsets(pool)
        out = []
        for ns, ds, image, labels, host_net in sets:
            prio = "system-node-critical"
            out.append((ns, ds, image, labels, prio, host_net))
        return out

    def create_daemon_pods(self, machine: Machine, only: str | None = None) -> None:
        for ns, ds, image, labels, prio, host_net in self.daemonsets_for(machine.pool):
            if only is not None and ds != only:
                continue
            self._create_daemon_pod(machine, ns, ds, image, labels, prio, host_net)

    def _create_daemon_pod(
        self,
        machine: Machine,
        ns: str,
        ds: str,
        image: str,
        labels: dict[str, str],
        prio: str,
        host_net: bool,
    ) -> None:
        name = f"{ds}-{self.loops.suffix()}"
        pod_labels = {
            **labels,
            "controller-revision-hash": objects.stable_hex("rev", ds, length=10),
            "pod-template-generation": "1",
        }
        obj = objects.build_pod(
            name=name,
            namespace=ns,
            uid=self.loops.uid(),
            created=self.loops.t,
            node_name=machine.node,
            labels=pod_labels,
            owner={
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": ds,
                "uid": objects.stable_uuid("ds", ns, ds),
                "controller": True,
                "blockOwnerDeletion": True,
            },
            containers=[
                objects.container(
                    ds.removesuffix("-daemonset"), image, {"cpu": "25m", "memory": "64Mi"}
                )
            ],
            tolerations=[{"operator": "Exists"}],
            priority_class=prio,
            host_ip=machine.ip,
            pod_ip=machine.ip if host_net else self.pod_ip(machine),
            running_since=self.loops.t + 2,
            host_network=host_net,
        )
        if ds == dra.DAEMONSET and machine.pool.dra_feature_gates:
            # the chart renders `featureGates` as the plugin's FEATURE_GATES env
            obj["spec"]["containers"][0]["env"] = [
                {"name": "FEATURE_GATES", "value": machine.pool.dra_feature_gates}
            ]
        self.loops.tx.put("pods", obj)
        machine.daemon_pods.append((ns, name))
        self.loops.workloads.register_daemon_pod(machine, ns, name, ds)
        if ds == dra.DAEMONSET:
            self.loops.dra.plugin_pod_running(machine)

    def crash_gpu_plugin(self, machine: Machine, crash: PluginCrashSpec) -> None:
        """The node's GPU plugin pod crash-loops: its container status as kubelet writes it
        while it backs off (kubernetes v1.34 pkg/kubelet/kuberuntime/kuberuntime_manager.go
        doBackOff: waiting CrashLoopBackOff, "back-off <d> restarting failed container=<c>
        pod=<name>_<namespace>(<uid>)"; lastState.terminated from the last run, reason Error
        for a non-zero exit: pkg/kubelet/kuberuntime/kuberuntime_container.go), the pod and
        its containers not Ready. The device plugin's GPUs stop being allocatable; the DRA
        plugin's slices are wiped and not published again."""
        ds = dra.DAEMONSET if machine.pool.dra else OPERAND_DAEMONSETS["device-plugin"]
        entry = next(
            ((ns, name) for ns, name in machine.daemon_pods if name.rsplit("-", 1)[0] == ds),
            None,
        )
        pod = self.loops.tx.get("pods", *entry) if entry is not None else None
        if pod is None:
            return
        now = self.loops.t
        meta, status = pod["metadata"], pod.setdefault("status", {})
        names = " ".join(str(c.get("name")) for c in status.get("containerStatuses") or ())
        for cond in status.get("conditions") or ():
            if cond.get("type") in ("Ready", "ContainersReady"):
                cond.update(status="False", reason="ContainersNotReady",
                            lastTransitionTime=ts(now - 60),
                            message=f"containers with unready status: [{names}]")  # fmt: skip
        back_off = min(10 * 2 ** (crash.restarts - 1), 300)  # kubelet: 10 s doubling to 5 min
        waited = f"{back_off // 60}m{back_off % 60}s" if back_off >= 60 else f"{back_off}s"
        for ctr in status.get("containerStatuses") or ():
            who = f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
            ctr.update(
                ready=False,
                started=False,
                restartCount=crash.restarts,
                state={"waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {waited} restarting failed container={ctr['name']} {who}",
                }},
                lastState={"terminated": {
                    "exitCode": crash.exit_code,
                    "reason": "Error",
                    **({"message": crash.message} if crash.message else {}),
                    "startedAt": ts(now - 2),
                    "finishedAt": ts(now),
                    "containerID": ctr.get("containerID", ""),
                }},
            )  # fmt: skip
        self.loops.tx.put("pods", pod)
        machine.gpu_plugin_crashed = True
        if machine.pool.dra:
            self.loops.dra.plugin_crashed(machine)
        else:
            self.loops.gpu_operator.plugin_crashed(machine)

    def pod_ip(self, machine: Machine) -> str:
        a, b, c, _ = machine.ip.split(".")
        return f"{a}.{b}.{c}.{self.loops.rng.randrange(4, 255)}"

    def create_workload(self, pool: PoolSpec) -> None:
        w = pool.workload
        assert w is not None
        template = self._workload_template(pool)
        replicas = w.replicas if w.replicas is not None else pool.nodes * w.pods_per_node
        deploy = objects.build_deployment(
            name=w.name,
            namespace=w.namespace,
            uid=self.loops.uid(),
            created=self.loops.begin - 86400 * 14,
            replicas=replicas,
            labels={"app": w.name, "app.kubernetes.io/name": w.name},
            annotations={},
            selector={"app": w.name},
            template=template,
        )
        request = dra.request_for(pool)
        if request is not None:
            self.loops.tx.put(
                "resourceclaimtemplates",
                dra.claim_template(
                    dra.template_name(pool),
                    w.namespace,
                    self.loops.uid(),
                    self.loops.begin - 86400 * 14,
                    request,
                ),
            )
        has_pdb = w.pdb_min_available is not None or w.pdb_max_unavailable is not None
        self.loops.workloads.create(deploy, pool, pdb=has_pdb)
        if has_pdb:
            pdb = objects.build_pdb(
                name=w.name,
                namespace=w.namespace,
                uid=self.loops.uid(),
                created=self.loops.begin - 86400 * 14,
                selector={"app": w.name},
                min_available=w.pdb_min_available,
                max_unavailable=w.pdb_max_unavailable,
            )
            self.loops.tx.put("poddisruptionbudgets", pdb)

    def _workload_template(self, pool: PoolSpec) -> JsonDict:
        w = pool.workload
        assert w is not None
        request = dra.request_for(pool)
        limits = {w.resource: str(w.per_pod)} if w.resource and request is None else None
        # 4 CPUs and 16 GiB each, less on a type where podsPerNode of those would not fit:
        # at most three quarters of the CPUs and 70 % of the memory, shared by the pods.
        it = hardware.instance_type(pool.instance_type)
        cpu_m = max(100, min(4000, int(it.cpu * 750 / w.pods_per_node) // 100 * 100))
        memory_gi = max(1, min(16, int(it.memory_mib / 1024 * 0.7 / w.pods_per_node)))
        cpu = f"{cpu_m // 1000}" if cpu_m % 1000 == 0 else f"{cpu_m}m"
        requests = {"cpu": cpu, "memory": f"{memory_gi}Gi", **(limits or {})}
        tolerations = [
            {"key": t.key, "operator": "Exists", "effect": t.effect} for t in pool.taints
        ]
        ctr = objects.container(w.name, w.image, requests, limits)
        spec: JsonDict = {
            "containers": [ctr],
            "nodeSelector": {
                "karpenter.sh/nodepool"
                if pool.kind == "nodepool"
                else "eks.amazonaws.com/nodegroup": pool.name
            },
            "tolerations": tolerations,
        }
        if request is not None:
            # kubernetes v1.34 core/v1 PodResourceClaim and ResourceClaim (container)
            ctr["resources"]["claims"] = [{"name": dra.POD_CLAIM}]
            spec["resourceClaims"] = [
                {"name": dra.POD_CLAIM, "resourceClaimTemplateName": dra.template_name(pool)}
            ]
        return {
            "metadata": {"labels": {"app": w.name, "app.kubernetes.io/name": w.name}},
            "spec": spec,
        }

    def recreate_daemon_pod(self, machine: Machine, ds: str) -> None:
        if machine.removed:
            return
        key = next((k for k, name in OPERAND_DAEMONSETS.items() if name == ds), None)
        if key is not None and self.loops.gpu_operator.label(
            machine, LABEL_GPU_DEPLOY + key
        ) not in (
            None,
            "true",
        ):
            return  # the operand's nodeSelector no longer matches this node
        self.create_daemon_pods(machine, only=ds)
        if ds == "eks-node-monitoring-agent" and machine.nma_running:
            self.loops.nma.start(machine)


_DaemonSet = tuple[str, str, str, dict[str, str], bool]


def _eks_daemonsets(ecr: str, pool: PoolSpec) -> list[_DaemonSet]:
    """The EKS add-ons on every node (VPC CNI, kube-proxy, EBS CSI) and the node monitoring
    agent where the pool runs it: (namespace, daemonset, image, labels, hostNetwork)."""
    sets: list[_DaemonSet] = [
        (
            "kube-system",
            "aws-node",
            f"{ecr}/amazon-k8s-cni:v1.19.2-eksbuild.1",
            {"k8s-app": "aws-node"},
            True,
        ),
        (
            "kube-system",
            "kube-proxy",
            f"{ecr}/eks/kube-proxy:v1.32.0-minimal-eksbuild.2",
            {"k8s-app": "kube-proxy"},
            True,
        ),
        (
            "kube-system",
            "ebs-csi-node",
            f"{ecr}/eks/aws-ebs-csi-driver:v1.40.0",
            {"app": "ebs-csi-node", "app.kubernetes.io/name": "aws-ebs-csi-driver"},
            False,
        ),
    ]
    if pool.node_monitoring_agent:
        sets.append(
            (
                "kube-system",
                "eks-node-monitoring-agent",
                f"{ecr}/eks/eks-node-monitoring-agent:v1.2.0-eksbuild.1",
                {
                    "app.kubernetes.io/name": "eks-node-monitoring-agent",
                    "app.kubernetes.io/instance": "eks-node-monitoring-agent",
                },
                True,
            )
        )
    return sets


def _gpu_daemonsets(pool: PoolSpec) -> list[_DaemonSet]:
    """The GPU Operator's operands on a GPU node (the NVIDIA DRA driver's plugin in place of
    the device plugin on a DRA pool; mig-manager where it applies the MIG layout)."""
    it = hardware.instance_type(pool.instance_type)
    if it.gpu is None:
        return []
    sets: list[_DaemonSet] = []
    if pool.dra:
        # the operator with devicePlugin.enabled=false; the DRA driver's chart instead
        labels = dict(dra.POD_LABELS)
        if pool.dra_selector_labels is not None:
            # the chart's selectorLabelsOverride replaces its component label (_helpers.tpl)
            labels.pop(dra.COMPONENT_LABEL, None)
            labels.update(pool.dra_selector_labels)
        sets.append((dra.NAMESPACE, dra.DAEMONSET, dra.IMAGE, labels, False))
    else:
        sets.append(
            (
                "gpu-operator",
                "nvidia-device-plugin-daemonset",
                "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                {"app": "nvidia-device-plugin-daemonset"},
                False,
            )
        )
    sets += [
        (
            "gpu-operator",
            "gpu-feature-discovery",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"},
            False,
        ),
        (
            "gpu-operator",
            "nvidia-dcgm-exporter",
            "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
            {"app": "nvidia-dcgm-exporter"},
            False,
        ),
        (
            "gpu-operator",
            "nvidia-container-toolkit-daemonset",
            "nvcr.io/nvidia/k8s/container-toolkit:v1.17.4-ubuntu20.04",
            {"app": "nvidia-container-toolkit-daemonset"},
            False,
        ),
        (
            "gpu-operator",
            "nvidia-operator-validator",
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.2",
            {"app": "nvidia-operator-validator"},
            False,
        ),
    ]
    if it.gpu.mig_capable and pool.mig_config and pool.mig_applied_by == "mig-manager":
        sets.append(
            (
                "gpu-operator",
                "nvidia-mig-manager",
                "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.10.0-ubuntu20.04",
                {"app": "nvidia-mig-manager"},
                True,
            )
        )
    return sets
