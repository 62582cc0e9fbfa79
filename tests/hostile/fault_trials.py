"""The runbook fault trials: every shipped runbook (both backends where it has two) run for real
against the simulator while a fault lands, then followed the way an on-call engineer follows
it, and judged by what it said against what the target shows (tests/hostile/faultclass.py).

One trial:
1. builds the cluster (a scenario; moto's EKS, EC2 and Auto Scaling on 127.0.0.1 for the node
   group and Auto Scaling backends) and what the runbook needs first (a pause before a resume);
2. runs `mignurse run RUNBOOK --node N … --yes` (a process forked from tests/cliserver.py)
   with one fault:
   - a signal (SIGINT, SIGTERM, SIGKILL, SIGHUP, two SIGINTs) as a step starts, mid-step (a
     drain held by a PodDisruptionBudget, the wait for the replacement, the MIG apply, a
     rollout) or after the last step;
   - an API fault as a step starts: another client's write between the step's read and its
     write (409), 429 with a long Retry-After, 5xx, an outage of some seconds, an API server
     restart (connections dropped, watches ended);
   - a controller fault: Karpenter deleting the node or its NodeClaim mid-drain, a PDB holding
     the drain past its timeout, a replacement that never becomes Ready, no capacity left for
     one, one Ready for 20 s then NotReady for good, a node no pod needs replaced;
   - a lock fault: two runs on one target at once, the stale lock of a dead run, a run
     SIGSTOPped past its lock's expiry while another run takes the target (then SIGCONT);
3. makes the operator's move: `--resume ID`, `--undo ID`, or the same command again;
4. while the target is not where it should be, runs a command the last report printed
   (`mignurse run --resume ID`, `--undo ID`, `mignurse unlock NODE`, another `mignurse run`;
   with `--yes`, as stdin is no terminal), preferring the kind of the operator's move, each at
   most twice, MAX_HOPS in all;
5. after every command reads the target back (the cluster through the API after a settle
   time where a replacement's health matters, the node sandboxes, moto, the locks) and judges
   the chain.

What runs (the cases, the faults, the matrix) is in tests/hostile/faultcases.py. The simulated
clocks run fast (speed 30 to 40: Karpenter's two-minute launch is four seconds) and the step
timeouts, which are wall-clock seconds, are short params, so a trial takes seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cliserver

from mignurse.cluster.client import (
    DEPLOYMENTS,
    NAMESPACES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PDBS,
    PODS,
    ClusterClient,
    ClusterError,
    NotFound,
)
from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner.lock import DEFAULT_TTL, LOCK_ANNOTATION
from mignurse.runner.state import this_host
from mignurse.runner.steps.kube import CORDONED_BY
from mignurse.sim import SimCluster
from mignurse.sim.nodes import NodeSandbox, story_for

from .faultcases import (
    CASES,
    NODEGROUP,
    NODEPOOL,
    TrialSpec,
    step_ids,
    trial_node,
    trial_params,
    trial_scenario,
    trial_speed,
)
from .faultclass import Found, Instruction, Said, Verdict, instructions, judge
from .runbook_faults import send_signal

START = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
MAX_HOPS = 4
DEPLOY = "nvidia.com/gpu.deploy."
MIG_LABELS = ("nvidia.com/mig.config", LABEL_MIG_CONFIG_STATE)
REPAIR_TAG = "mignurse.io/node-repair-paused"
REGION = "us-west-2"
SETTLE = 60.0  # sim seconds a replacement must stay Ready after the run said it was


# -- what a trial ends with --------------------------------------------------------------------


@dataclass
class Outcome:
    spec: TrialSpec
    verdict: Verdict
    chain: list[tuple[Said, Found]]
    log: list[str]
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        return {
            "id": self.spec.id,
            "case": self.spec.case,
            "fault": self.spec.fault.label,
            "family": self.spec.fault.family,
            "then": self.spec.then,
            "class": self.verdict.cls,
            "why": list(self.verdict.why),
            "commands": [f"mignurse {s.text} → {s.code}" for s, _ in self.chain],
            "seconds": round(self.seconds, 1),
            "log": self.log[-LOG_LINES:],
        }

    def __str__(self) -> str:
        return (
            f"{self.spec.id}: {self.verdict.cls}\n  "
            + "\n  ".join(self.verdict.why)
            + f"\n--- log (last {LOG_LINES} lines)\n"
            + "\n".join(self.log[-LOG_LINES:])
        )


LOG_LINES = 80


class TrialError(AssertionError):
    """The trial could not be run as specified (its moment never came): not a verdict."""


def run_trial(spec: TrialSpec, tmp: Path) -> Outcome:
    """Run one trial and judge it."""
    started = time.monotonic()
    trial = Trial(spec, tmp)
    try:
        chain = trial.play()
    finally:
        trial.close()
    return Outcome(spec, judge(chain), chain, trial.log, time.monotonic() - started)


# -- moto, one per test process ----------------------------------------------------------------

_moto: dict[str, Any] = {}
_moto_lock = threading.Lock()


def moto_endpoint() -> str:
    """moto's server on 127.0.0.1 for EKS, EC2 and Auto Scaling (started once per process)."""
    with _moto_lock:
        if "url" not in _moto:
            import atexit

            from moto.server import ThreadedMotoServer

            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            _moto["url"] = f"http://{host}:{port}"
            atexit.register(server.stop)
        return str(_moto["url"])


def _boto(service: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=moto_endpoint(),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# -- one trial ---------------------------------------------------------------------------------


class Trial:
    def __init__(self, spec: TrialSpec, tmp: Path) -> None:
        self.spec = spec
        self.fault = spec.fault
        self.case = CASES[spec.case]
        self.tmp = tmp
        self.state = tmp / "state"
        self.sandboxes = tmp / "sandboxes"
        self.log: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.sim = SimCluster(trial_scenario(spec), speed=trial_speed(spec), start=START).start()
        self.kubeconfig = self.sim.write_kubeconfig(tmp / "kubeconfig")
        self.client = ClusterClient.connect(str(self.kubeconfig))
        self.node = trial_node(spec, self.sim)
        self.params = trial_params(spec)
        self.eks_cluster = ""
        self.instance = ""
        if self.case.book == "cordon-and-collect":
            self.params["out"] = str(tmp / "bundle.tar.gz")
        if self.case.aws == "eks":
            self._node_group()
        if self.case.aws == "asg":
            self._auto_scaling_group()
        if self.case.book == "reapply-mig-no-hooks":
            raw = self.client.get(NODES, self.node)
            NodeSandbox.for_node(self.sandboxes / self.node, raw, story=story_for(raw))
        self.pool_label = NODEGROUP if NODEGROUP in self._node_labels() else NODEPOOL
        self.pool = self._node_labels().get(self.pool_label, "")
        self.pool_before = self._pool_nodes()
        self.origin: dict[str, Any] = {}
        self.before: dict[str, Any] = {}

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self.client.close()
        self.sim.stop()

    def say(self, line: str) -> None:
        self.log.append(line)

    def _background(self, target: Callable[[], None], name: str = "fault") -> None:
        """A thread of the trial's own: "fault" ones end before the run is judged."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # -- AWS stand-ins

    def _node_group(self) -> None:
        eks = _boto("eks")
        self.eks_cluster = f"ml-prod-{uuid.uuid4().hex[:8]}"
        eks.create_cluster(
            name=self.eks_cluster,
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
        eks.create_nodegroup(
            clusterName=self.eks_cluster,
            nodegroupName=self._node_labels()[NODEGROUP],
            nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-1"],
        )
        eks.update_nodegroup_config(
            clusterName=self.eks_cluster,
            nodegroupName=self._node_labels()[NODEGROUP],
            nodeRepairConfig={"enabled": True, "maxUnhealthyNodeThresholdCount": 2},
        )
        self.params["cluster"] = self.eks_cluster

    def _auto_scaling_group(self) -> None:
        """The node's instance in an Auto Scaling group of two (moto), and the cloud node
        lifecycle controller: once that instance shuts down its Node is deleted, and the
        simulated node group launches the replacement."""
        ec2, autoscaling = _boto("ec2"), _boto("autoscaling")
        name = f"eks-ng-gpu-l4-{uuid.uuid4().hex[:8]}"
        template = ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g6.xlarge"},
        )["LaunchTemplate"]["LaunchTemplateId"]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
            MinSize=2,
            MaxSize=3,
            DesiredCapacity=2,
            AvailabilityZones=[f"{REGION}a"],
        )
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        members = group["AutoScalingGroups"][0]["Instances"]
        self.instance = sorted(i["InstanceId"] for i in members)[0]
        self.client.patch(
            NODES, self.node, {"spec": {"providerID": f"aws:///{REGION}a/{self.instance}"}}
        )
        self._background(self._cloud_node_lifecycle, "cloud")

    def _cloud_node_lifecycle(self) -> None:
        ec2 = _boto("ec2")
        while not self._stop.wait(0.3):
            try:
                found = ec2.describe_instances(InstanceIds=[self.instance])["Reservations"]
            except Exception:  # noqa: BLE001 - moto busy: look again
                continue
            state = found[0]["Instances"][0]["State"]["Name"] if found else "terminated"
            if state in ("shutting-down", "terminated"):
                self.say(f"[cloud] instance {self.instance} {state}: node {self.node} deleted")
                with _quiet():
                    self.client.delete(NODES, self.node)
                return

    # -- processes

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
        }
        env["XDG_STATE_HOME"] = str(self.state)
        env["HOME"] = str(self.state)  # no ~/.aws
        if self.case.aws:
            env.update(
                AWS_ENDPOINT_URL=moto_endpoint(),
                AWS_ACCESS_KEY_ID="testing",
                AWS_SECRET_ACCESS_KEY="testing",
                AWS_DEFAULT_REGION=REGION,
                AWS_REGION=REGION,
            )
        return env

    def full_argv(self, words: tuple[str, ...]) -> list[str]:
        """What follows `python -m mignurse` for a command's words (those after `mignurse`)."""
        argv = ["--kubeconfig", str(self.kubeconfig), *words]
        if words[:1] == ("run",):
            argv += ["--sandboxes", str(self.sandboxes)]
        if "--yes" not in words:
            argv.append("--yes")  # stdin is no terminal: as a script runs it
        return argv

    def run_words(self, book: str = "") -> tuple[str, ...]:
        words = ["run", book or self.case.book, "--node", self.node]
        for key, value in self.params.items():
            if book and key == "out":
                continue
            words += ["--param", f"{key}={value}"]
        return tuple(words)

    def command(
        self,
        words: tuple[str, ...],
        *,
        on_line: Callable[[str, cliserver.Child], None] | None = None,
        followed: Instruction | None = None,
    ) -> Said:
        """Run one mignurse command to its end; `on_line` sees each progress line (stderr)."""
        child = cliserver.Child(self.full_argv(words), env=self.env(), cwd=str(self.tmp))
        err: list[str] = []
        self.say(f"$ mignurse {' '.join(words)}")

        def watch() -> None:
            assert child.stderr is not None
            for line in child.stderr:
                err.append(line)
                self.say(line.rstrip("\n"))
                if on_line is not None:
                    on_line(line.rstrip("\n"), child)

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        assert child.stdout is not None
        out = child.stdout.read()
        code = child.wait(timeout=300)
        reader.join(timeout=30)
        self.say(f"→ exit {code}")
        self.log.extend(out.splitlines())
        return Said(
            words,
            code,
            out,
            "".join(err),
            followed=followed is not None,
            promise=followed.promise if followed else "",
        )

    def runs(self) -> set[str]:
        return {p.stem for p in (self.state / "mignurse" / "runs").glob("*.json")}

    # -- reading the target back

    def _read(self, call: Callable[[], Any]) -> Any:
        """A read that rides out an outage or a restart the trial caused."""
        for attempt in range(40):
            try:
                return call()
            except NotFound:
                raise
            except ClusterError:
                if attempt == 39:
                    raise
                time.sleep(0.5)
        return None

    def _node_raw(self) -> dict[str, Any] | None:
        try:
            raw: dict[str, Any] = self._read(lambda: self.client.get(NODES, self.node))
        except NotFound:
            return None
        return raw

    def _node_labels(self) -> dict[str, str]:
        raw = self._node_raw() or {}
        return dict((raw.get("metadata") or {}).get("labels") or {})

    def _pool_nodes(self) -> dict[str, str]:
        """The replaced node's pool, node → Ready or NotReady (empty for other runbooks)."""
        if self.case.book != "replace-instance" or not self.pool:
            return {}
        listing = self._read(
            lambda: self.client.list(
                NODES, lambda o: o, label_selector=f"{self.pool_label}={self.pool}"
            )
        )
        found = {}
        for n in listing.items:
            if n["metadata"].get("deletionTimestamp"):
                continue
            ready = next(
                (c["status"] for c in n["status"].get("conditions") or [] if c["type"] == "Ready"),
                "Unknown",
            )
            found[n["metadata"]["name"]] = "Ready" if ready == "True" else "NotReady"
        return found

    def view(self) -> dict[str, Any]:
        """What the runbooks change, as it is now."""
        found: dict[str, Any] = {}
        raw = self._node_raw()
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            found["node"] = "gone" if raw is None else "deleting"
        else:
            labels = raw["metadata"].get("labels") or {}
            annotations = raw["metadata"].get("annotations") or {}
            found["node"] = {
                "unschedulable": bool(raw["spec"].get("unschedulable")),
                "annotations": {
                    k: v
                    for k, v in annotations.items()
                    if k.startswith("mignurse.io/") and k != LOCK_ANNOTATION
                },
                "labels": {
                    k: v for k, v in labels.items() if k.startswith(DEPLOY) or k in MIG_LABELS
                },
            }
        if self.case.book == "reapply-mig-no-hooks":
            state = self.sandboxes / self.node / "state" / "mig.json"
            gpus = json.loads(state.read_text())["gpus"] if state.is_file() else []
            found["gpus"] = [[g.get("current"), len(g.get("instances") or [])] for g in gpus]
            found["cdi"] = self._stale_cdi()
        if self.case.cluster and self.case.aws != "eks":
            deploy = self._read(lambda: self.client.get(DEPLOYMENTS, "karpenter", "kube-system"))
            (ctr,) = [
                c
                for c in deploy["spec"]["template"]["spec"]["containers"]
                if c["name"] == "controller"
            ]
            found["karpenter"] = {
                "gates": [
                    e.get("value") for e in ctr.get("env") or [] if e["name"] == "FEATURE_GATES"
                ],
                "args": list(ctr.get("args") or []),
                "paused": (deploy["metadata"].get("annotations") or {}).get(REPAIR_TAG),
            }
        if self.case.aws == "eks":
            eks = _boto("eks")
            group = eks.describe_nodegroup(
                clusterName=self.eks_cluster, nodegroupName=self._group()
            )["nodegroup"]
            tags = eks.describe_cluster(name=self.eks_cluster)["cluster"].get("tags") or {}
            found["nodegroup"] = {
                "repair": group.get("nodeRepairConfig") or {},
                "record": sorted(k for k in tags if k.startswith(REPAIR_TAG)),
            }
        return found

    def _group(self) -> str:
        return self.pool or "ng-gpu-l4"

    def lock(self) -> str:
        """The lock left on the target, in words, or ""."""
        try:
            if self.case.cluster:
                raw = self._read(lambda: self.client.get(NAMESPACES, "kube-system"))
            else:
                raw = self._node_raw()
        except ClusterError:
            return ""
        value = ((raw or {}).get("metadata", {}).get("annotations") or {}).get(LOCK_ANNOTATION)
        if not value:
            return ""
        try:
            held = json.loads(value)
        except ValueError:
            return f"lock {value!r} on the target"
        where = "the kube-system Namespace" if self.case.cluster else f"node {self.node}"
        return f"lock of run {held.get('run')} ({held.get('runbook')}) left on {where}"

    def read_back(
        self, said: Said, view_before: dict[str, Any], *, concurrent: bool = False
    ) -> tuple[Found, dict[str, Any]]:
        """The target after `said` (and the view it was read from). `concurrent`: another run
        changed the target meanwhile, so what changed is not this command's."""
        replacement = ""
        if self.case.book == "replace-instance":
            now = self._pool_nodes()
            new = sorted(n for n, s in now.items() if s == "Ready" and n not in self.pool_before)
            replacement = new[0] if new else ""
            if self.case.settle:
                self._settle()
        view = self.view()
        leftovers = tuple(x for x in (self.lock(),) if x)
        changed = () if concurrent else tuple(_diff(view_before, view, skip_gone=True))
        found = Found(
            tuple(self._off_before(view)),
            tuple(self._off_done(view, said)),
            changed,
            leftovers,
            replacement,
        )
        return found, view

    def _settle(self) -> None:
        until = self.sim.loops.now + SETTLE
        deadline = time.monotonic() + 30
        while self.sim.loops.now < until and time.monotonic() < deadline:
            time.sleep(0.1)

    def _off_before(self, view: dict[str, Any]) -> list[str]:
        before = self.before
        if isinstance(view.get("node"), str):
            # The node is gone or going (replaced, or removed by someone else): nothing of the
            # run is left on it.
            view = {k: v for k, v in view.items() if k not in ("node", "gpus", "cdi")}
            before = {k: v for k, v in before.items() if k not in ("node", "gpus", "cdi")}
        return _diff(before, view)

    def _off_done(self, view: dict[str, Any], said: Said) -> list[str]:
        """How the target differs from where a clean run of the runbook leaves it."""
        book, node = self.case.book, view.get("node")
        if book == "replace-instance":
            return self._replace_off(view, said)
        if book in ("cordon", "cordon-and-collect", "uncordon", "reapply-mig-no-hooks") and (
            not isinstance(node, dict)
        ):
            return [f"node {self.node} is {node}"]
        assert isinstance(node, dict)
        off: list[str] = []
        if book in ("cordon", "cordon-and-collect"):
            if not node["unschedulable"] or CORDONED_BY not in node["annotations"]:
                off.append(f"node {self.node} is not cordoned by mignurse")
            if book == "cordon-and-collect" and not Path(self.params["out"]).is_file():
                off.append("no bundle at " + self.params["out"])
        elif book == "uncordon":
            if node["unschedulable"] or CORDONED_BY in node["annotations"]:
                off.append(f"node {self.node} is still cordoned")
        elif book == "pause-node-repair" and "karpenter" in view:
            gates = " ".join(str(g) for g in view["karpenter"]["gates"])
            if "NodeRepair=false" not in gates or not view["karpenter"]["paused"]:
                off.append(f"Karpenter repair is not paused (FEATURE_GATES {gates!r})")
        elif book == "pause-node-repair":
            group = view["nodegroup"]
            if group["repair"].get("enabled") is not False or not group["record"]:
                off.append(f"node group repair is not paused ({group})")
        elif book == "resume-node-repair":
            key = "karpenter" if "karpenter" in view else "nodegroup"
            off += [f"not resumed: {d}" for d in _diff(self.origin[key], view[key], key)]
        else:
            off += self._mig_off(view)
        return off

    def _mig_off(self, view: dict[str, Any]) -> list[str]:
        node, was = view["node"], self.before["node"]
        labels = node["labels"]
        off = []
        if labels.get(LABEL_MIG_CONFIG_STATE) != "success":
            off.append(f"{LABEL_MIG_CONFIG_STATE}={labels.get(LABEL_MIG_CONFIG_STATE)}")
        for key, value in self.origin["node"]["labels"].items():
            want = "false" if key == DEPLOY + "mig-manager" else value
            if key.startswith(DEPLOY) and labels.get(key) != want:
                off.append(f"{key}={labels.get(key)} (a clean run leaves {want})")
        if node["unschedulable"] != was["unschedulable"]:
            off.append(
                f"node {self.node} is {'cordoned' if node['unschedulable'] else 'uncordoned'}"
            )
        if CORDONED_BY in node["annotations"] and CORDONED_BY not in was["annotations"]:
            off.append(f"{CORDONED_BY} is left on node {self.node}")
        gpus = view.get("gpus") or []
        want = self.case.mig_instances
        if not gpus or any(mode != "Enabled" or count != want for mode, count in gpus):
            off.append(f"the GPUs do not hold {want} MIG instances each: {gpus}")
        if view.get("cdi"):
            off.append(f"the management CDI spec does not list {', '.join(view['cdi'][:3])}")
        return off

    def _stale_cdi(self) -> list[str]:
        """The MIG capability nodes the node's management CDI spec (where it has one) misses."""
        fs = self.sandboxes / self.node / "fs"
        spec = fs / "var/run/cdi/management.nvidia.com-gpu.yaml"
        if not spec.is_file():
            return []
        listed = spec.read_text()
        caps = sorted((fs / "dev/nvidia-caps").glob("nvidia-cap*"))
        return [c.name for c in caps if f"path: /dev/nvidia-caps/{c.name}\n" not in listed]

    def _replace_off(self, view: dict[str, Any], said: Said) -> list[str]:
        off = []
        if isinstance(view["node"], dict):
            off.append(f"node {self.node} is still there, not being replaced")
        settled = self._pool_nodes()
        named = re.findall(r"replacement (\S+) (?:is Ready in|stayed )", said.stderr)
        if named:
            name = named[-1]
            if settled.get(name) != "Ready":
                off.append(
                    f"replacement {name} is {settled.get(name, 'gone')} {SETTLE:.0f} s later"
                )
        elif not re.search(r"none expected|none needed|no replacement is expected", said.stdout):
            ready = [n for n, s in settled.items() if s == "Ready" and n not in self.pool_before]
            if not ready:
                off.append(f"no replacement is Ready in {self.pool_label}={self.pool}")
        return off

    # -- the cluster around the fault

    def arm(self) -> None:
        """What the fault needs in place before the run."""
        moment = self.case.moments.get(self.fault.at)
        if (moment is not None and moment.arm == "pdb") or self.fault.name == "pdb-timeout":
            self._hold_drain()
        if self.fault.name == "no-capacity":
            # the pool's limit below what it runs: Karpenter launches nothing more for it
            self.client.patch(NODEPOOLS, self.pool, {"spec": {"limits": {"nvidia.com/gpu": "24"}}})
        if self.fault.name == "stale-lock":
            self._stale_lock()

    def _hold_drain(self) -> None:
        """A PodDisruptionBudget (created through the API, as `kubectl create -f` does) that
        allows no eviction of the workload on the node."""
        app, namespace = self._workload()
        self.client.create(
            PDBS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"{app}-hold", "namespace": namespace},
                "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": app}}},
            },
            namespace=namespace,
        )
        self.say(f"[setup] poddisruptionbudget {namespace}/{app}-hold: minAvailable 100%")

    def _release_drain(self) -> None:
        app, namespace = self._workload()
        with _quiet():
            self.client.delete(PDBS, f"{app}-hold", namespace)
            self.say(f"[fault] poddisruptionbudget {namespace}/{app}-hold deleted")

    def _workload(self) -> tuple[str, str]:
        pods = self._read(
            lambda: self.client.list(PODS, lambda o: o, field_selector=f"spec.nodeName={self.node}")
        ).items
        for pod in pods:
            app = (pod["metadata"].get("labels") or {}).get("app")
            owner = (pod["metadata"].get("ownerReferences") or [{}])[0].get("kind")
            if app and owner != "DaemonSet":
                return str(app), str(pod["metadata"]["namespace"])
        raise TrialError(f"no workload pod on node {self.node} to hold with a budget")

    def _stale_lock(self) -> None:
        stale = {
            "holder": "alice@laptop",
            "run": "dead0001",
            "runbook": self.case.book,
            "expires": "2099-01-01T00:00:00Z",
            "host": this_host(),
            "pid": _dead_pid(),
            "renewed": "2026-11-20T11:50:00Z",
        }
        body = {"metadata": {"annotations": {LOCK_ANNOTATION: json.dumps(stale)}}}
        if self.case.cluster:
            self.client.patch(NAMESPACES, "kube-system", body)
        else:
            self.client.patch(NODES, self.node, body)
        self.say("[setup] a stale lock of dead run dead0001")

    def _write_path(self) -> str:
        """The API path the step under the fault writes (or reads, for a read-only step)."""
        at = self.fault.at
        if at in ("pause", "resume") and self.case.aws != "eks":
            return r"/deployments/karpenter$"
        if at == "delete-nodeclaim":
            return r"/nodeclaims/"
        if at == "wait-replacement":
            return r"/api/v1/nodes$"
        if at in ("drain", "drain-gpu-pods"):
            return r"/eviction$"
        return rf"/nodes/{re.escape(self.node)}$"

    def _other_client_write(self, sim: SimCluster) -> None:
        """Another client's write to the object the step is about to write."""
        del sim
        body = {"metadata": {"annotations": {"example.com/touched-by": "another-operator"}}}
        if "deployments" in self._write_path():
            self.client.patch(DEPLOYMENTS, "karpenter", body, namespace="kube-system")
        else:
            self.client.patch(NODES, self.node, body)
        self.say("[fault] another client wrote the object first")

    def land(self, child: cliserver.Child) -> None:
        """The fault, at its moment, on the run `child`."""
        name = self.fault.name
        if self.fault.family == "signal":
            send_signal(child.pid, name)
        elif name == "409-race":
            self.sim.race("PATCH", self._write_path(), self._other_client_write)
        elif name == "429-retry-after":
            self.sim.fail("*", self._write_path(), code=429, times=3, retry_after=60)
        elif name == "5xx":
            self.sim.fail("*", self._write_path(), code=503, times=3)
        elif name == "outage":
            self.sim.unavailable = True
            self.sim.store.wake_watchers()
            threading.Timer(5.0, lambda: setattr(self.sim, "unavailable", False)).start()
        elif name == "restart":
            self._background(lambda: self.sim.restart(down=3.0))
        elif name == "claim-deleted":
            claim = self._claim()
            with _quiet():
                self.client.delete(NODECLAIMS, claim)
                self.say(f"[fault] Karpenter deletes nodeclaim/{claim}")
        elif name == "node-deleted":
            with _quiet():
                self.client.delete(NODES, self.node)
                self.say(f"[fault] node {self.node} deleted")
        elif name == "sigstop":
            os.kill(child.pid, signal.SIGSTOP)
            self._background(lambda: self._take_over(child))
        elif name == "two-runs":
            self._background(self._second_run)
        moment = self.case.moments.get(self.fault.at)
        if moment is not None and moment.then == "unpdb" and name != "sigstop":
            self._release_drain()

    def _claim(self) -> str:
        for claim in self._read(lambda: self.client.list(NODECLAIMS, lambda o: o)).items:
            if (claim.get("status") or {}).get("nodeName") == self.node:
                return str(claim["metadata"]["name"])
        raise TrialError(f"node {self.node} has no NodeClaim")

    # -- the lock faults' other runs

    def _second_run(self) -> None:
        """Another run of the same runbook on the same target while the first holds it."""
        view = self.view()
        said = self.command(self.run_words())
        self.side.append((said, *self.read_back(said, view, concurrent=True)))

    def _take_over(self, stopped: cliserver.Child) -> None:
        """The run is stopped past its lock's expiry; another takes the target, then it goes
        on (SIGCONT)."""
        self.sim.advance(DEFAULT_TTL + 60)
        moment = self.case.moments.get(self.fault.at)
        if moment is not None and moment.then == "unpdb":
            self._release_drain()
        view = self.view()
        said = self.command(self.run_words())
        self.side.append((said, *self.read_back(said, view)))
        os.kill(stopped.pid, signal.SIGCONT)
        self.say("[fault] SIGCONT")

    # -- the trial

    def play(self) -> list[tuple[Said, Found]]:
        self.origin = self.view()
        if self.case.first:
            first = self.command(self.run_words(self.case.first))
            if first.code != 0:
                raise TrialError(
                    f"{self.case.first} did not succeed first:\n" + "\n".join(self.log)
                )
        self.before = self.view()
        self.arm()
        self.side: list[tuple[Said, Found, dict[str, Any]]] = []
        known = self.runs()
        fire = Fire(self, self.fault.at)
        view = self.view()
        said = self.command(self.run_words(), on_line=fire)
        for thread in self._threads:
            if thread.name == "fault":
                thread.join(timeout=120)
        if self.fault.name != "stale-lock" and not fire.fired.is_set():
            raise TrialError(
                f"{self.fault.label} never came in {self.case.book}:\n" + "\n".join(self.log)
            )
        if self.fault.name == "outage":
            time.sleep(0.1)
        chain: list[tuple[Said, Found]] = [(s, f) for s, f, _ in self.side]
        found, view = self.read_back(said, view)
        chain.append((said, found))
        run_id = _run_id(said) or next(iter(sorted(self.runs() - known)), "")
        self._operator(chain, said, run_id, view)
        return chain

    def _operator(
        self, chain: list[tuple[Said, Found]], first: Said, run_id: str, view: dict[str, Any]
    ) -> None:
        """The operator's move, then what the reports print, until the target is good."""
        then = self.spec.then
        words: tuple[str, ...] | None
        if then == "again":
            words = self.run_words()
        elif run_id:
            words = ("run", f"--{then}", run_id)
        else:
            words = None
        tried: dict[str, int] = {}
        if words is not None:
            printed = next((i for i in instructions(first) if i.argv == words), None)
            if printed is not None:
                tried[printed.command] = 1
            said = self.command(words, followed=printed)
            found, view = self.read_back(said, view)
            chain.append((said, found))
        for _hop in range(MAX_HOPS):
            if chain[-1][1].good:
                return
            choice = _pick(_offered(chain, tried), then)
            if choice is None:
                return
            tried[choice.command] = tried.get(choice.command, 0) + 1
            said = self.command(choice.argv, followed=choice)
            found, view = self.read_back(said, view)
            chain.append((said, found))


class Fire:
    """Watches a run's progress and lands the fault at its moment, once."""

    def __init__(self, trial: Trial, at: str) -> None:
        self.trial = trial
        self.fired = threading.Event()
        steps = step_ids(trial.case.book)
        moment = trial.case.moments.get(at)
        if at == "end":
            self.pattern = re.compile(rf"^{re.escape(steps[-1])}: (verified|skipped)")
        elif moment is not None:
            self.pattern = re.compile(moment.pattern)
        elif at:
            self.pattern = re.compile(rf"^> {re.escape(at)}: ")
        else:
            self.pattern = re.compile(r"^> ")

    def __call__(self, line: str, child: cliserver.Child) -> None:
        if self.fired.is_set() or not self.pattern.search(line):
            return
        self.fired.set()
        self.trial.say(f"[fault] {self.trial.fault.label}")
        self.trial.land(child)


def _run_id(said: Said) -> str:
    header = said.header
    return header["run"] if header else ""


def _offered(chain: list[tuple[Said, Found]], tried: dict[str, int]) -> list[Instruction]:
    """What the operator may run next: the commands the last report printed (each run at most
    twice), or, when it printed none, those of the latest report that did and not run yet."""
    latest = instructions(chain[-1][0])
    if latest:
        return [i for i in latest if tried.get(i.command, 0) < 2]
    for said, _found in reversed(chain[:-1]):
        earlier = instructions(said)
        if earlier:
            return [i for i in earlier if i.command not in tried]
    return []


def _pick(offered: list[Instruction], then: str) -> Instruction | None:
    """The operator's choice among printed commands: the kind of their move first."""
    preferred = [i for i in offered if i.kind == then]
    return (preferred or offered or [None])[0]


class _quiet:
    """Ignore an API error of a fault's own write (the object may already be gone)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        return kind is not None and issubclass(kind, ClusterError)


def _diff(before: Any, after: Any, path: str = "", *, skip_gone: bool = False) -> list[str]:
    """Where two views differ, one phrase each."""
    if skip_gone and path == "node" and (isinstance(before, str) or isinstance(after, str)):
        return []  # the node went (a controller): not a change of the command's
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in after:
                out.append(f"{sub} removed (was {before[key]!r})")
            elif key not in before:
                out.append(f"{sub} added ({after[key]!r})")
            else:
                out += _diff(before[key], after[key], sub, skip_gone=skip_gone)
        return out
    if before != after:
        return [f"{path}: {before!r} → {after!r}"]
    return []
