"""mig-hook-kubelet-restart at its edges: which kubelet start, stop and restart it pairs, which
journal lines count as the failures it quotes, what ties a restart to MIG, and the evidence an
on-call engineer reads beside it.

The journals are the incident's (tests/evidence/fixtures/kubelet.log and containerd.log: AL2023,
systemd 252 with StatusUnitFormat=combined, containerd 1.7 logrus lines, kubelet klog lines),
written line by line so each case moves one line. The stop is mig-manager's: when the MIG mode
must change and host GPU clients are shut down, it adds the host's kubelet.service to the
systemd services it stops and starts again (NVIDIA/mig-parted@v0.15.0
pkg/mig/reconfigure/reconfigure.go, cmd/nvidia-mig-manager/main.go
DefaultHostKubeletSystemdService); NVIDIA/mig-parted#368, NVIDIA/gpu-operator#2415 and
docs/mig.md tell the incident. The kubelet unit is AL2023's (awslabs/amazon-eks-ami@08fbb51
templates/al2023/runtime/rootfs/etc/systemd/system/kubelet.service: an iptables ExecStartPre,
Restart=on-failure, RestartSec=5).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from mignurse.diagnose.findings import Evidence, Finding
from mignurse.diagnose.inputs import DiagnosisInput, NodeEvidence
from mignurse.evidence import parse_cgroup_fs, parse_journal, parse_os_release, parse_smi_xml
from mignurse.evidence.cloudinit import parse_cloud_init_status
from mignurse.model import Condition, Event, Node

from .test_node_rules import FIXTURES, about, h100_xml, incident_node, run, sim_input, with_node
from .test_node_rules import bundle as fixture_bundle

HOOK = "mig-hook-kubelet-restart"
HOST = "ip-10-0-37-142.us-west-2.compute.internal"
KUBELET_UNIT = "kubelet.service - Kubernetes Kubelet"

# (seconds after kubelet's first start, "ident[pid]", message): the fixture's lines.
STARTING = (0.0, "systemd[1]", f"Starting {KUBELET_UNIT}...")
STARTED = (0.006, "systemd[1]", f"Started {KUBELET_UNIT}.")
FIRST_RUN = [
    (0.347, "kubelet[2345]", 'I1129 03:01:02.345000    2345 server.go:1234] "Started kubelet"'),
    (
        0.414,
        "kubelet[2345]",
        "I1129 03:01:02.412700    2345 container_manager_linux.go:270] "
        '"Creating Container Manager object based on Node Config" nodeConfig={"CgroupsPerQOS":true,'
        '"CgroupRoot":"/","CgroupDriver":"systemd"}',
    ),
    (
        12.552,
        "kubelet[2345]",
        "I1129 03:01:14.549870    2345 kubelet_node_status.go:501] "
        '"Fast updating node status as it just became ready"',
    ),
]
STOPPING = (40.348, "systemd[1]", f"Stopping {KUBELET_UNIT}...")
STOPPED = (40.391, "systemd[1]", f"Stopped {KUBELET_UNIT}.")
RESTARTING = (70.404, "systemd[1]", f"Starting {KUBELET_UNIT}...")
RESTARTED = (70.412, "systemd[1]", f"Started {KUBELET_UNIT}.")
SANDBOX_FAILED = (
    73.302,
    "kubelet[4021]",
    'E1129 03:02:15.300180    4021 pod_workers.go:1301] "Error syncing pod, skipping" '
    'err="failed to \\"CreatePodSandbox\\" for \\"nvidia-device-plugin-daemonset-x7k2p_gpu-'
    'operator\\" with CreatePodSandboxError: \\"rpc error: code = Unknown desc = failed to '
    "create containerd task: failed to create shim task: OCI runtime create failed: unable to "
    'apply cgroup configuration\\"" pod="gpu-operator/nvidia-device-plugin-daemonset-x7k2p"',
)
BECAME_NOT_READY = (
    76.117,
    "kubelet[4021]",
    'I1129 03:02:18.115300    4021 setters.go:602] "Node became not ready" '
    f'node="{HOST}" condition={{"type":"Ready","status":"False","reason":"KubeletNotReady",'
    '"message":"container runtime is down"}',
)
# After the restart kubelet logs its container manager again: a normal line that names cgroups.
RESTART_CGROUP_INFO = (
    70.620,
    "kubelet[4021]",
    "I1129 03:02:12.830100    4021 container_manager_linux.go:270] "
    '"Creating Container Manager object based on Node Config" nodeConfig={"CgroupsPerQOS":true,'
    '"CgroupRoot":"/","CgroupDriver":"systemd"}',
)

CONTAINERD_STARTED = (
    -4.0,
    "containerd[1234]",
    'level=info msg="starting containerd" '
    "revision=05044ec0a9a75232cad458027ca83437aae3f4da version=1.7.27",
)
MIG_MANAGER_SANDBOX = (
    18.120,
    "containerd[1234]",
    'level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:nvidia-mig-manager-4kq9d,'
    'Uid:7b0c1f2e-5d3a-4e8b-9c1a-0f2e3d4c5b6a,Namespace:gpu-operator,Attempt:0,}"',
)
IMAGE_PULLED = (
    18.900,
    "containerd[1234]",
    'level=info msg="ImageCreate event name:\\"nvcr.io/nvidia/cloud-native/k8s-mig-manager:'
    'v0.15.0-ubi9\\" labels:{key:\\"io.cri-containerd.image\\" value:\\"managed\\"}"',
)


def containerd_failure(at: float, n: int) -> tuple[float, str, str]:
    """containerd's error for the n-th container it could not start after the restart."""
    return (
        at,
        "containerd[1234]",
        f'level=error msg="StartContainer for \\"9f8e7d6c5b4{n}\\" failed" error="failed to '
        "create containerd task: failed to create shim task: OCI runtime create failed: runc "
        "create failed: unable to start container process: error setting cgroup config for "
        'procHooks process: openat2 /sys/fs/cgroup/kubepods.slice/cpu.weight: no such file"',
    )


KUBELET = [
    STARTING,
    STARTED,
    *FIRST_RUN,
    STOPPING,
    STOPPED,
    RESTARTING,
    RESTARTED,
    SANDBOX_FAILED,
    BECAME_NOT_READY,
]
CONTAINERD = [CONTAINERD_STARTED, MIG_MANAGER_SANDBOX, containerd_failure(73.233, 0)]

Line = tuple[float, str, str]


def journal_text(start: datetime, lines: list[Line], *, precise: bool = True) -> str:
    """`journalctl -o short-iso-precise` (or `short-iso`, whole seconds) of these lines."""
    stamp = "%Y-%m-%dT%H:%M:%S.%f" if precise else "%Y-%m-%dT%H:%M:%S"
    return "".join(
        f"{(start + timedelta(seconds=at)).strftime(stamp)}+0000 {HOST} {ident}: {message}\n"
        for at, ident, message in lines
    )


def node_bundle(
    node: Node,
    kubelet: list[Line] | str = KUBELET,
    containerd: list[Line] | None = CONTAINERD,
    *,
    precise: bool = True,
    **files: object,
) -> NodeEvidence:
    """The node's bundle: these journals with kubelet's first start at the node's creation,
    cgroup v2 and AL2023's os-release unless `files` says otherwise."""
    assert node.created is not None
    start = node.created
    kubelet_text = (
        kubelet if isinstance(kubelet, str) else journal_text(start, kubelet, precise=precise)
    )
    journals = {"kubelet": parse_journal(kubelet_text, "journal:kubelet")}
    if containerd is not None:
        journals["containerd"] = parse_journal(
            journal_text(start, containerd, precise=precise), "journal:containerd"
        )
    evidence = NodeEvidence(
        node=node.name,
        journals=journals,
        cgroup=parse_cgroup_fs("cgroup2fs\n"),
        os_release=parse_os_release((FIXTURES / "os-release-al2023").read_text()),
    )
    return replace(evidence, **files)  # type: ignore[arg-type]


def findings_with(inp: DiagnosisInput, node: Node, evidence: NodeEvidence) -> dict[str, Finding]:
    return about(run(replace(with_node(inp, node), node_evidence={node.name: evidence})), node.name)


def hook_of(inp: DiagnosisInput, node: Node, evidence: NodeEvidence) -> Finding | None:
    return findings_with(inp, node, evidence).get(HOOK)


def lines_of(finding: Finding) -> list[str]:
    return [f"{e.source} {e.text}" for e in finding.evidence]


def quoted(finding: Finding, text: str) -> list[Evidence]:
    return [e for e in finding.evidence if text in e.text]


@pytest.fixture(scope="module")
def incident() -> tuple[DiagnosisInput, Node]:
    inp = sim_input("mig-hook-notready")
    return inp, incident_node(inp)


# -- the incident as the engineer reads it ------------------------------------------------------


def test_the_incident_quotes_systemds_first_start_stop_and_restart_and_each_line_once(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    hook = hook_of(inp, node, fixture_bundle(node))

    assert hook is not None
    evidence = lines_of(hook)
    # The first start is the "Started" line, the restart the first start after the stop.
    assert "journal:kubelet line 2: systemd[1]: Started kubelet.service - Kubernetes Kubelet." in (
        evidence
    )
    assert "journal:kubelet line 1: systemd[1]: Starting kubelet.service" not in "\n".join(evidence)
    assert (
        "journal:kubelet line 15: systemd[1]: Starting kubelet.service - Kubernetes Kubelet..."
        in evidence
    )
    # kubelet's own failure after the restart, not only containerd's.
    assert any(
        line.startswith("journal:kubelet line 18: kubelet[4021]: E1129") for line in evidence
    )
    # containerd's start-up lines are no failure.
    assert not any("starting containerd" in line for line in evidence)
    # The mig-manager sandbox is the early pod: quoted once, like every other journal line.
    journal = [line for line in evidence if line.startswith("journal:")]
    assert len(journal) == len(set(journal))
    assert len(quoted(hook, "nvidia-mig-manager-4kq9d")) == 1
    # What the cluster says beside the journals.
    assert "label nvidia.com/mig.config.state=failed" in evidence
    assert "label nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change" in evidence
    assert (
        "condition Ready=False, reason KubeletNotReady, message 'container runtime is down'"
        in evidence
    )
    not_ready = next(e for e in inp.events_by_node[node.name] if e.reason == "NodeNotReady")
    assert not_ready.count == 2 and not_ready.last_seen is not None
    assert quoted(hook, f"(x2, last {not_ready.last_seen:%H:%M:%SZ})")[0].time == (
        not_ready.first_seen
    )
    assert quoted(hook, "event Normal Starting from kubelet") == [] and any(
        line.startswith("event Normal Starting from kubelet: Starting kubelet.")
        for line in evidence
    )
    assert not any("InvalidDiskCapacity" in line for line in evidence)  # not about readiness
    # A clean bundle has nothing it could not read, and no MIG probe to speak of.
    assert not any("could not read all of it" in line for line in evidence)
    assert "the node stays NotReady" in hook.summary


def test_a_node_ready_again_is_told_its_containers_may_have_lost_the_gpus(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    ready = Condition(
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
        inp.now - timedelta(minutes=5),
    )
    back = replace(node, conditions=(ready,))

    hook = hook_of(inp, back, node_bundle(back))

    assert hook is not None
    assert "the node is Ready now but its containers may have lost GPU access" in hook.summary
    assert "stays NotReady" not in hook.summary


def _event(node: Node, reason: str, count: int, first: str | None, last: str | None) -> Event:
    raw: dict[str, object] = {
        "metadata": {
            "name": f"{node.name}.{reason.lower()}{count}",
            "namespace": "default",
            "uid": f"uid-{reason}-{count}-{first}-{last}",
        },
        "involvedObject": {"kind": "Node", "name": node.name, "uid": node.uid},
        "reason": reason,
        "message": f"Node {node.name} status is now: {reason}",
        "type": "Normal",
        "source": {"component": "kubelet", "host": node.name},
        "count": count,
    }
    if first is not None:
        raw["firstTimestamp"] = first
    if last is not None:
        raw["lastTimestamp"] = last
    return Event.from_api(raw)


def test_readiness_events_say_how_often_and_when_last_as_far_as_the_event_tells(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    events = (
        _event(node, "NodeNotReady", 3, "2026-11-29T03:02:18Z", "2026-11-29T03:09:41Z"),
        _event(node, "NodeReady", 1, "2026-11-29T03:01:14Z", "2026-11-29T03:01:14Z"),
        # Read back from a bundle whose events lost their timestamps.
        _event(node, "NodeNotReady", 2, None, None),
        _event(node, "NodeReady", 1, None, None),
        # An events.k8s.io/v1 event seen only by its last time.
        _event(node, "Starting", 2, None, "2026-11-29T03:02:12Z"),
    )
    bare = replace(inp, snapshot=replace(inp.snapshot, events=events))

    hook = hook_of(bare, node, node_bundle(node))

    assert hook is not None
    said = {e.text: e.time for e in hook.evidence if e.source == "event"}
    texts = [e.text for e in hook.evidence if e.source == "event"]
    repeated = f"Normal NodeNotReady from kubelet: Node {node.name} status is now: NodeNotReady"
    assert said[f"{repeated} (x3, last 03:09:41Z)"] == events[0].first_seen
    assert said[f"{repeated} (x2)"] is None
    once = f"Normal NodeReady from kubelet: Node {node.name} status is now: NodeReady"
    assert (once, events[1].first_seen) in [(e.text, e.time) for e in hook.evidence]
    assert texts.count(once) == 2  # the timed one and the bare one, neither with "(x1"
    assert not any("(x1" in text for text in texts)
    started = f"Normal Starting from kubelet: Node {node.name} status is now: Starting"
    assert said[f"{started} (x2, last 03:02:12Z)"] == events[4].last_seen


# -- which start, which stop, which restart ------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_after", "explained"),
    [
        (timedelta(minutes=10), True),  # just inside RESTART_WINDOW
        (timedelta(minutes=10, seconds=1), False),  # just outside: a later, unrelated restart
    ],
)
def test_a_stop_counts_as_the_bootstrap_restart_up_to_ten_minutes_after_the_first_start(
    incident: tuple[DiagnosisInput, Node], stop_after: timedelta, explained: bool
) -> None:
    inp, node = incident
    shift = STARTED[0] + stop_after.total_seconds() - STOPPING[0]
    later = [(at + shift, ident, message) for at, ident, message in KUBELET[5:]]
    kubelet = [*KUBELET[:5], *later]
    containerd = [CONTAINERD_STARTED, MIG_MANAGER_SANDBOX, containerd_failure(73.233 + shift, 0)]

    hook = hook_of(inp, node, node_bundle(node, kubelet, containerd))

    if explained:
        assert hook is not None
        assert f"stopped kubelet on {node.name} 10 min after its first start" in hook.summary
    else:
        assert hook is None


@pytest.mark.parametrize(
    "kept",
    [
        # `journalctl -u kubelet` cut after kubelet started: only kubelet's own lines are left.
        [*FIRST_RUN, SANDBOX_FAILED, BECAME_NOT_READY],
        # Rotated past the first start, and kubelet never came back after the stop.
        [*FIRST_RUN, STOPPING, STOPPED],
        # Stopped 40 s after its first start and never started again (the node stays down).
        [STARTING, STARTED, *FIRST_RUN, STOPPING, STOPPED],
    ],
    ids=["no-systemd-lines", "stopped-never-started", "stopped-never-restarted"],
)
def test_a_kubelet_journal_without_a_start_stop_and_restart_explains_nothing_and_raises_nothing(
    incident: tuple[DiagnosisInput, Node], kept: list[Line]
) -> None:
    inp, node = incident

    found = findings_with(inp, node, node_bundle(node, kept))

    assert HOOK not in found
    assert "notready-loop" in found


def test_a_bundle_of_a_node_already_gone_from_the_cluster_still_names_the_restart(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # `diagnose --from` a bundle collected before the node was replaced: no Node object, no
    # label; mig-manager's sandbox in containerd's journal ties the restart to MIG.
    inp, node = incident
    nodes = {name: n for name, n in inp.snapshot.nodes.items() if name != node.name}
    gone = replace(
        inp,
        snapshot=replace(inp.snapshot, nodes=nodes),
        node_evidence={node.name: node_bundle(node)},
    )

    findings = [f for f in run(gone) if f.id == HOOK]

    assert [f.nodes for f in findings] == [(node.name,)]
    (hook,) = findings
    assert "the node stays NotReady" in hook.summary
    assert hook.nodepool == "" and hook.deadline is None
    assert quoted(hook, "nvidia-mig-manager-4kq9d")


def test_a_bundle_without_the_cgroup_file_system_explains_nothing_and_raises_nothing(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    found = findings_with(inp, node, node_bundle(node, cgroup=None))
    assert HOOK not in found
    assert "notready-loop" in found


def test_the_restart_of_an_earlier_boot_still_explains_a_node_whose_last_boot_never_started_kubelet(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # The node rebooted; in the new boot kubelet never started (a dependency failed).
    inp, node = incident
    assert node.created is not None
    after_reboot = journal_text(
        node.created + timedelta(minutes=5),
        [
            (0.0, "systemd[1]", f"Dependency failed for {KUBELET_UNIT}."),
            (
                0.001,
                "systemd[1]",
                "kubelet.service: Job kubelet.service/start failed with result 'dependency'.",
            ),
        ],
    )
    text = (
        journal_text(node.created, KUBELET)
        + "-- Boot 8f1e2d3c4b5a69788796a5b4c3d2e1f0 --\n"
        + after_reboot
    )

    hook = hook_of(inp, node, node_bundle(node, text))

    assert hook is not None
    assert "40 s after its first start" in hook.summary


def test_a_first_start_that_failed_before_kubelet_ran_is_not_the_start_the_stop_is_timed_from(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # AL2023's kubelet.service runs `iptables -P FORWARD ACCEPT -w 5` first; when that fails,
    # systemd logs no "Started", restarts the unit 5 s later (RestartSec=5) and, in whole
    # seconds, logs that restart's "Stopped" in the second of the start that ran.
    inp, node = incident

    def later(lines: list[Line]) -> list[Line]:
        return [(at + 5, ident, message) for at, ident, message in lines]

    kubelet = [
        (0.0, "systemd[1]", f"Starting {KUBELET_UNIT}..."),
        (
            0.012,
            "systemd[1]",
            "kubelet.service: Control process exited, code=exited, status=4/NOPERMISSION",
        ),
        (0.013, "systemd[1]", "kubelet.service: Failed with result 'exit-code'."),
        (0.014, "systemd[1]", f"Failed to start {KUBELET_UNIT}."),
        (5.101, "systemd[1]", "kubelet.service: Scheduled restart job, restart counter is at 1."),
        (5.102, "systemd[1]", f"Stopped {KUBELET_UNIT}."),
        *later(KUBELET),
    ]

    hook = hook_of(inp, node, node_bundle(node, kubelet, precise=False))

    assert hook is not None
    assert "40 s after its first start" in hook.summary


def test_a_restart_in_the_same_second_as_the_stop_is_read_from_a_whole_second_journal(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # `journalctl -o short-iso`, and the default format eks-log-collector writes
    # (awslabs/amazon-eks-ami log-collector-script/linux/eks-log-collector.sh:
    # `journalctl --unit=kubelet --since ...`), keep whole seconds: a stop and the start after
    # it can share one.
    inp, node = incident
    kubelet = [
        STARTING,
        STARTED,
        *FIRST_RUN,
        STOPPING,
        (40.391, "systemd[1]", f"Stopped {KUBELET_UNIT}."),
        (40.404, "systemd[1]", f"Starting {KUBELET_UNIT}..."),
        (40.412, "systemd[1]", f"Started {KUBELET_UNIT}."),
        SANDBOX_FAILED,
        BECAME_NOT_READY,
    ]

    hook = hook_of(inp, node, node_bundle(node, kubelet, precise=False))

    assert hook is not None
    assert "40 s after its first start" in hook.summary


# -- what counts as the failure after the restart -----------------------------------------------


def test_containerd_failures_alone_are_enough_and_normal_kubelet_lines_are_not_quoted(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    kubelet = [*KUBELET[:9], RESTART_CGROUP_INFO]  # restarted, then nothing failed in kubelet

    hook = hook_of(inp, node, node_bundle(node, kubelet))

    assert hook is not None
    assert quoted(hook, "StartContainer for")
    assert not [
        e for e in hook.evidence if e.source == "journal:kubelet" and "kubelet[4021]" in e.text
    ]


def test_kubelet_failures_alone_are_enough(incident: tuple[DiagnosisInput, Node]) -> None:
    inp, node = incident
    hook = hook_of(
        inp, node, node_bundle(node, containerd=[CONTAINERD_STARTED, MIG_MANAGER_SANDBOX])
    )

    assert hook is not None
    assert quoted(hook, "Node became not ready")
    assert quoted(hook, "CreatePodSandbox")


def test_a_restart_that_broke_nothing_is_not_the_mig_hook_even_after_an_early_not_ready(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # A new node is briefly not ready before its CNI starts: that line predates the restart.
    inp, node = incident
    cni_not_ready = (
        2.103,
        "kubelet[2345]",
        'I1129 03:01:04.103000    2345 setters.go:602] "Node became not ready" '
        f'node="{HOST}" condition={{"type":"Ready","status":"False","reason":"KubeletNotReady",'
        '"message":"container runtime network not ready: NetworkReady=false '
        "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not "
        'initialized"}',
    )
    kubelet = [*KUBELET[:3], cni_not_ready, *KUBELET[3:9], RESTART_CGROUP_INFO]

    found = findings_with(
        inp, node, node_bundle(node, kubelet, [CONTAINERD_STARTED, MIG_MANAGER_SANDBOX])
    )

    assert HOOK not in found


def test_failures_logged_in_the_second_of_the_stop_and_of_the_restart_count(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    at_stop = (
        STOPPING[0],
        "containerd[1234]",
        'level=error msg="failed to delete cgroup" error="cgroups: cgroup deleted" id=5a4b3c2d1e0f',
    )
    at_restart = (
        RESTARTING[0],
        "kubelet[4021]",
        "E1129 03:02:12.402700    4021 "
        'kubelet.go:2996] "Container runtime is down" err="PLEG is not healthy"',
    )
    kubelet = [*KUBELET[:7], RESTARTING, at_restart, RESTARTED]
    containerd = [CONTAINERD_STARTED, MIG_MANAGER_SANDBOX, at_stop]

    hook = hook_of(inp, node, node_bundle(node, kubelet, containerd, precise=False))

    assert hook is not None
    assert quoted(hook, "failed to delete cgroup")
    assert quoted(hook, "PLEG is not healthy")


@pytest.mark.parametrize(("failures", "more"), [(4, None), (6, "2 more containerd failure lines")])
def test_four_failure_lines_are_quoted_and_the_rest_counted_at_the_last_ones_time(
    incident: tuple[DiagnosisInput, Node], failures: int, more: str | None
) -> None:
    inp, node = incident
    containerd = [
        CONTAINERD_STARTED,
        MIG_MANAGER_SANDBOX,
        *(containerd_failure(73.0 + 2 * n, n) for n in range(failures)),
    ]

    hook = hook_of(inp, node, node_bundle(node, containerd=containerd))

    assert hook is not None
    assert len(quoted(hook, "StartContainer for")) == 4
    counted = quoted(hook, "more containerd failure lines after the restart")
    if more is None:
        assert counted == []
    else:
        (line,) = counted
        assert line.text == f"{more} after the restart"
        assert line.source == "journal:containerd"
        assert node.created is not None
        assert line.time == node.created + timedelta(seconds=73.0 + 2 * (failures - 1))


# -- what ties the restart to MIG ----------------------------------------------------------------


def _unlabelled(node: Node) -> Node:
    labels = {k: v for k, v in node.labels.items() if not k.startswith("nvidia.com/mig.config")}
    return replace(node, labels=labels)


def test_a_restart_on_a_node_without_mig_config_or_mig_manager_is_someone_elses(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    plain = _unlabelled(node)
    no_mig_manager = [CONTAINERD_STARTED, containerd_failure(73.233, 0)]

    assert hook_of(inp, plain, node_bundle(plain, containerd=no_mig_manager)) is None


def test_mig_managers_sandbox_ties_an_unlabelled_node_to_the_hook(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    plain = _unlabelled(node)

    hook = hook_of(inp, plain, node_bundle(plain))

    assert hook is not None
    assert "label nvidia.com/mig.config not set" in lines_of(hook)
    assert quoted(hook, "nvidia-mig-manager-4kq9d")


def test_the_mig_config_label_ties_the_restart_to_mig_when_the_journals_never_name_mig_manager(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    hook = hook_of(
        inp, node, node_bundle(node, containerd=[CONTAINERD_STARTED, containerd_failure(73.233, 0)])
    )
    assert hook is not None
    assert "label nvidia.com/mig.config=all-1g.10gb" in lines_of(hook)


def test_the_first_mig_manager_line_is_quoted_when_no_early_sandbox_names_it(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    added = (
        18.050,
        "kubelet[2345]",
        "I1129 03:01:20.050000    2345 kubelet.go:2458] "
        '"SyncLoop ADD" source="api" pods=["gpu-operator/nvidia-mig-manager-4kq9d"]',
    )
    updated = (
        19.200,
        "kubelet[2345]",
        "I1129 03:01:21.200000    2345 kubelet.go:2474] "
        '"SyncLoop UPDATE" source="api" pods=["gpu-operator/nvidia-mig-manager-4kq9d"]',
    )
    kubelet = [*KUBELET[:5], added, updated, *KUBELET[5:]]

    hook = hook_of(
        inp, node, node_bundle(node, kubelet, [CONTAINERD_STARTED, containerd_failure(73.233, 0)])
    )

    assert hook is not None
    assert quoted(hook, '"SyncLoop ADD"')
    assert not quoted(hook, '"SyncLoop UPDATE"')


def test_pods_started_between_the_first_start_and_the_stop_are_the_suspects(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    # Whole seconds: the sandboxes share the second of kubelet's start and of its stop.
    inp, node = incident

    def sandbox(at: float, name: str) -> Line:
        return (
            at,
            "containerd[1234]",
            f'level=info msg="RunPodSandbox for &PodSandboxMetadata'
            f'{{Name:{name},Uid:7b0c1f2e,Namespace:gpu-operator,Attempt:0,}}"',
        )

    containerd = [
        CONTAINERD_STARTED,
        sandbox(STARTED[0], "nvidia-container-toolkit-daemonset-2hj8s"),
        IMAGE_PULLED,
        MIG_MANAGER_SANDBOX,
        sandbox(STOPPING[0], "nvidia-operator-validator-q8w4e"),
        sandbox(RESTARTED[0] + 1, "nvidia-dcgm-exporter-m2k9x"),
        containerd_failure(73.233, 0),
    ]

    hook = hook_of(inp, node, node_bundle(node, containerd=containerd, precise=False))

    assert hook is not None
    for pod in (
        "nvidia-container-toolkit-daemonset-2hj8s",
        "nvidia-mig-manager-4kq9d",
        "nvidia-operator-validator-q8w4e",
    ):
        assert quoted(hook, pod), pod
    assert not quoted(hook, "nvidia-dcgm-exporter-m2k9x")  # after the restart
    assert not quoted(hook, "ImageCreate event")  # no sandbox


# -- what the bundle could not say ----------------------------------------------------------------


def test_what_the_bundle_could_not_read_is_quoted_beside_the_hook_three_problems_a_source(
    incident: tuple[DiagnosisInput, Node],
) -> None:
    inp, node = incident
    long = "errors.txt: nvidia-smi -q -x: " + "NVIDIA-SMI has failed because it couldn't " * 4
    assert len(long) > 160
    problems = (
        "kubelet.log: journalctl timed out after 60 s",
        long,
        "dmesg.txt: dmesg: read kernel buffer failed: Operation not permitted",
        "containerd.log: journalctl timed out after 60 s",
    )
    evidence = node_bundle(
        node,
        problems=problems,
        os_release=parse_os_release(
            'NAME="Amazon Linux"\nID=amzn\nVERSION_ID="2023"\nthis is not KEY=value\n'
        ),
        cloud_init=parse_cloud_init_status(""),
        mig=parse_smi_xml(h100_xml(8, devices_per_gpu=7)),
    )

    hook = hook_of(inp, node, evidence)

    assert hook is not None
    (manifest,) = [e.text for e in hook.evidence if e.source == "node:manifest"]
    assert manifest.startswith("could not read all of it: kubelet.log: journalctl timed out")
    assert manifest.endswith("Operation not permitted (+1 more)")
    clipped = long[:159] + "…"
    assert f"; {' '.join(clipped.split())}; " in manifest
    assert [e.text for e in hook.evidence if e.source == "node:os-release"] == [
        "could not read all of it: line 4: not KEY=value: 'this is not KEY=value'"
    ]  # and no PRETTY_NAME line: this os-release has none
    assert any(e.source == "node:cloud-init-status" for e in hook.evidence)
    assert not quoted(hook, "MIG probe")  # the probe read fine

    three = hook_of(inp, node, node_bundle(node, problems=problems[:3]))
    assert three is not None
    assert not quoted(three, "more)")


@pytest.mark.parametrize(("length", "shown"), [(480, 480), (481, 479)])
def test_a_journal_line_is_quoted_whole_up_to_480_characters(
    incident: tuple[DiagnosisInput, Node], length: int, shown: int
) -> None:
    inp, node = incident
    head = 'level=error msg="failed to load cgroup for task" error="cgroups: cgroup deleted" id='
    message = head + "f" * (length - len(head))
    kubelet_failure_free = [*KUBELET[:9]]
    containerd = [CONTAINERD_STARTED, MIG_MANAGER_SANDBOX, (73.5, "containerd[1234]", message)]

    hook = hook_of(inp, node, node_bundle(node, kubelet_failure_free, containerd))

    assert hook is not None
    (line,) = quoted(hook, "failed to load cgroup for task")
    text = line.text.split("containerd[1234]: ", 1)[1]
    assert text == (message if shown == length else message[:shown] + "…")
