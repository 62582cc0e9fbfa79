"""The EKS node monitoring agent's reasons, in our own words: what each means, the agent's
severity, whether replacing the instance helps, and the first agent release that defines it.

Read from aws/eks-node-monitoring-agent `pkg/reasons/reasons.yaml` at every tag from v1.6.0
(its first public release) to v1.7.0, and from the monitors that build each reason
(`monitors/nvidia/dcgm/*.go`, `monitors/kernel/monitor.go`, `monitors/storage/monitor.go`,
`monitors/networking/npa/npa.go`, `monitors/runtime/monitor.go` at v1.7.0). A Fatal reason sets
its condition False; a Warning one is only a Node event whose reason is the condition type and
whose message starts with the reason (`pkg/manager/manager.go` SendCondition,
`pkg/manager/node_exporter.go`).

Reasons are matched exactly as the agent writes them; a family is matched by its prefix only
where the agent builds the reason from a template (`DCGMHealthCode%d`, `NvidiaXID%dError`, …).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What the reason says about the node, for the advice that follows it.
PLUMBING = "plumbing"  # the agent's own GPU monitoring is broken, not the GPU
GPU = "gpu"  # the GPU (or Neuron device) itself
SERVICE = "service"  # a service on the node the GPUs need
APPLICATION = "application"  # the workload's own fault
NODE = "node"  # the node's kernel, storage, network or runtime, not an accelerator

# Whether a new instance fixes it.
HELPS = "replacing the instance helps"
NO_HELP = "replacing the instance will not help: a new node fails the same way"
DEPENDS = "replacing helps only if the fault is this instance's own, not the image's or the setup's"

FATAL = "Fatal"
WARNING = "Warning"
FATAL_OR_WARNING = "Fatal or Warning"

NEWEST_KNOWN = "v1.7.0"  # the newest agent release this table was read from
FIRST_PUBLIC = "v1.6.0"  # the first release with public source: earlier ones are not readable


@dataclass(frozen=True, slots=True)
class AgentReason:
    condition: str  # the condition type the agent reports it under
    name: str  # the key in reasons.yaml
    template: str  # how the agent builds the reason ("%d": a number, "%s": a unit name)
    severity: str  # the agent's severity at v1.7.0
    kind: str  # PLUMBING | GPU | SERVICE | APPLICATION | NODE
    meaning: str  # our words
    replacing: str  # HELPS | NO_HELP | DEPENDS
    since: str  # the first agent release that defines it ("v1.6.0": that release or earlier)
    history: str = ""  # how it changed between releases

    @property
    def first_defined(self) -> str:
        if self.since == FIRST_PUBLIC:
            return f"{FIRST_PUBLIC} or earlier"
        return self.since


def _r(
    condition: str,
    name: str,
    severity: str,
    kind: str,
    meaning: str,
    replacing: str,
    since: str = FIRST_PUBLIC,
    template: str = "",
    history: str = "",
) -> AgentReason:
    return AgentReason(
        condition, name, template or name, severity, kind, meaning, replacing, since, history
    )


AHR = "AcceleratedHardwareReady"
_K = "KernelReady"
_C = "ContainerRuntimeReady"
_N = "NetworkingReady"
_S = "StorageReady"

REASONS: tuple[AgentReason, ...] = (
    # -- AcceleratedHardwareReady (monitors/nvidia/dcgm, monitors/nvidia/nccl, monitors/neuron)
    _r(AHR, "DCGMError", FATAL, PLUMBING,
       "the agent cannot reach the DCGM host engine (or load its library): the GPU monitoring "
       "is broken, the GPU may be fine", NO_HELP),
    _r(AHR, "DCGMDiagnosticFailure", FATAL, GPU,
       "a test of DCGM's active diagnostics failed on a GPU", HELPS),
    _r(AHR, "DCGMFieldError", WARNING, GPU,
       "DCGM reported GPU degradation through a watched field (throttling, NVSwitch errors)",
       HELPS, template="DCGMFieldError%d"),
    _r(AHR, "DCGMHealthCode", FATAL_OR_WARNING, GPU,
       "a DCGM health check failed on a GPU (the number is DCGM's error code)", HELPS,
       template="DCGMHealthCode%d"),
    _r(AHR, "NvidiaDeviceCountMismatch", FATAL, GPU,
       "fewer GPUs than the instance type has, or DCGM and /dev disagree on the count: a GPU "
       "failed or the driver lost it", HELPS,
       history="a Warning (an event only) before v1.6.2"),
    _r(AHR, "NvidiaDoubleBitError", FATAL, GPU,
       "the driver reported a double-bit (uncorrectable) memory error", HELPS),
    _r(AHR, "NvidiaNCCLError", WARNING, APPLICATION,
       "a segfault in NCCL (libnccl): the workload's communication, not the GPU", NO_HELP),
    _r(AHR, "NvidiaNVLinkError", FATAL, GPU, "the driver reported NVLink errors", HELPS),
    _r(AHR, "NvidiaPCIeError", WARNING, GPU,
       "PCIe replays recovered transmission errors", DEPENDS),
    _r(AHR, "NvidiaPageRetirement", WARNING, GPU,
       "the driver marked a GPU memory page for retirement", DEPENDS),
    _r(AHR, "NvidiaPowerError", WARNING, GPU, "GPU power outside its thresholds", DEPENDS),
    _r(AHR, "NvidiaThermalError", WARNING, GPU, "GPU temperature outside its thresholds", DEPENDS),
    _r(AHR, "NvidiaXIDError", FATAL, GPU,
       "a well-known (critical) Xid: its number says what failed", HELPS,
       template="NvidiaXID%dError",
       history="v1.6.0-v1.6.3 also made Xid 13 and 31 a condition; v1.6.4 and later do not"),
    _r(AHR, "NvidiaXIDWarning", WARNING, GPU,
       "an Xid outside the agent's well-known list (an event only)", DEPENDS,
       template="NvidiaXID%dWarning"),
    _r(AHR, "FabricManagerNotRunning", FATAL, SERVICE,
       "the NVIDIA Fabric Manager service is not running on this NVSwitch instance: multi-GPU "
       "NVLink work fails or degrades", DEPENDS, since="v1.6.5"),
    _r(AHR, "NvidiaFabricError", FATAL, GPU,
       "a GPU reported NVSwitch fabric training failure; the agent says it persists across "
       "reboots and requires instance replacement", HELPS, since="v1.6.5"),
    _r(AHR, "NeuronDMAError", FATAL, GPU, "a Neuron DMA engine hit an unrecoverable error", HELPS),
    _r(AHR, "NeuronHBMUncorrectableError", FATAL, GPU,
       "Neuron HBM had an uncorrectable error", HELPS),
    _r(AHR, "NeuronNCUncorrectableError", FATAL, GPU,
       "a NeuronCore had an uncorrectable memory error", HELPS),
    _r(AHR, "NeuronSRAMUncorrectableError", FATAL, GPU,
       "Neuron on-chip SRAM had a parity error", HELPS),
    # -- KernelReady (monitors/kernel)
    _r(_K, "LargeEnvironment", WARNING, NODE,
       "a process has an unusually large environment (many service links)", NO_HELP),
    _r(_K, "RapidCron", WARNING, NODE, "a cron job runs more often than every five minutes",
       NO_HELP),
    _r(_K, "SoftLockup", WARNING, NODE, "a CPU stalled (soft lockup)", DEPENDS),
    _r(_K, "AppBlocked", WARNING, NODE, "a task was blocked for long, usually on I/O", DEPENDS),
    _r(_K, "AppCrash", WARNING, APPLICATION, "an application on the node crashed", NO_HELP),
    _r(_K, "ApproachingKernelPidMax", WARNING, NODE,
       "the process count nears kernel.pid_max", NO_HELP),
    _r(_K, "ApproachingMaxOpenFiles", WARNING, NODE, "open files near the kernel's limit",
       NO_HELP),
    _r(_K, "ClockUnsynchronized", WARNING, NODE,
       "the kernel clock follows no time source (STA_UNSYNC): tokens and TLS can fail; fix the "
       "time daemon or its source, not the GPU", NO_HELP, since="v1.6.6"),
    _r(_K, "ConntrackExceededKernel", WARNING, NODE,
       "the kernel's connection tracking table is full", NO_HELP),
    _r(_K, "ExcessiveZombieProcesses", WARNING, NODE, "zombie processes pile up", NO_HELP),
    _r(_K, "ForkFailedOutOfPIDs", FATAL, NODE,
       "fork or exec failed: out of process ids or memory", DEPENDS),
    _r(_K, "KernelBug", WARNING, NODE, "the kernel reported a bug", DEPENDS),
    # -- ContainerRuntimeReady (monitors/runtime)
    _r(_C, "KubeletFailed", WARNING, NODE, "the kubelet entered a failed state", DEPENDS),
    _r(_C, "LivenessProbeFailures", WARNING, APPLICATION, "liveness probes fail", NO_HELP),
    _r(_C, "PodStuckTerminating", FATAL, NODE,
       "a pod is stuck terminating (often a container runtime fault)", DEPENDS),
    _r(_C, "ReadinessProbeFailures", WARNING, APPLICATION, "readiness probes fail", NO_HELP),
    _r(_C, "RepeatedRestart", WARNING, NODE,
       "a systemd unit (named at the front) keeps restarting", DEPENDS,
       template="%sRepeatedRestart"),
    _r(_C, "ServiceFailedToStart", WARNING, NODE, "a systemd unit failed to start", DEPENDS),
    _r(_C, "ContainerRuntimeFailed", WARNING, NODE,
       "the container runtime failed to create a container", DEPENDS),
    _r(_C, "DeprecatedContainerdConfiguration", WARNING, NODE,
       "an image with the deprecated manifest v2 schema 1 was pulled", NO_HELP),
    # -- NetworkingReady (monitors/networking)
    _r(_N, "MACAddressPolicyMisconfigured", WARNING, NODE,
       "systemd-networkd's MACAddressPolicy is wrong", NO_HELP),
    _r(_N, "MissingDefaultRoutes", WARNING, NODE, "default route rules are missing", DEPENDS),
    _r(_N, "MissingIPRoutes", WARNING, NODE, "routes for pod IPs are missing", DEPENDS),
    _r(_N, "MissingIPRules", WARNING, NODE, "rules for pod IPs are missing", DEPENDS),
    _r(_N, "MissingLoopbackInterface", FATAL, NODE, "the loopback interface is missing", DEPENDS),
    _r(_N, "NetworkSysctl", WARNING, NODE, "network sysctl settings look wrong", NO_HELP),
    _r(_N, "PPSExceeded", WARNING, NODE, "the instance's packets-per-second limit was exceeded",
       NO_HELP),
    _r(_N, "KubeProxyNotReady", WARNING, NODE, "kube-proxy failed to watch or list", DEPENDS),
    _r(_N, "PortConflict", WARNING, NODE, "a pod's hostPort rules shadow a host port", NO_HELP),
    _r(_N, "UnexpectedRejectRule", WARNING, NODE,
       "an unexpected REJECT or DROP rule is in iptables", NO_HELP),
    _r(_N, "LinkLocalExceeded", WARNING, NODE,
       "traffic to link-local services exceeded its packet limit", NO_HELP),
    _r(_N, "BandwidthInExceeded", WARNING, NODE, "inbound bandwidth limit exceeded", NO_HELP),
    _r(_N, "BandwidthOutExceeded", WARNING, NODE, "outbound bandwidth limit exceeded", NO_HELP),
    _r(_N, "ConntrackExceeded", WARNING, NODE,
       "the instance's connection tracking limit was exceeded", NO_HELP),
    _r(_N, "IPAMDInconsistentState", WARNING, NODE,
       "the VPC CNI's checkpoint disagrees with the runtime's IPs", DEPENDS),
    _r(_N, "IPAMDNoIPs", WARNING, NODE, "the VPC CNI has no IP addresses left", NO_HELP),
    _r(_N, "IPAMDNotReady", FATAL, NODE, "the VPC CNI cannot reach the API server", DEPENDS),
    _r(_N, "IPAMDNotRunning", FATAL, NODE, "the VPC CNI process is not running", DEPENDS),
    _r(_N, "IPAMDRepeatedlyRestart", WARNING, NODE, "the VPC CNI keeps restarting", DEPENDS),
    _r(_N, "InterfaceNotRunning", FATAL, NODE,
       "a network interface is not running (IPoIB interfaces can be excluded in the agent's "
       "settings)", DEPENDS),
    _r(_N, "InterfaceNotUp", FATAL, NODE,
       "a network interface is not up (IPoIB interfaces can be excluded in the agent's "
       "settings)", DEPENDS),
    _r(_N, "NPARepeatedlyRestart", WARNING, NODE,
       "Auto Mode's Network Policy Agent restarts in a loop, usually its configuration's fault",
       NO_HELP, since="v1.6.7"),
    _r(_N, "NPANotRunning", FATAL, SERVICE,
       "Auto Mode's Network Policy Agent has not run for over 15 minutes: network policies are "
       "not enforced", DEPENDS, since="v1.6.7"),
    _r(_N, "NPABPFRecoveryError", WARNING, NODE,
       "Auto Mode's Network Policy Agent could not recover its BPF state after a restart; it "
       "usually heals at the next policy reconcile", NO_HELP, since="v1.6.7"),
    _r(_N, "EFAErrorMetric", WARNING, NODE, "an EFA interface reports degraded performance",
       DEPENDS),
    # -- StorageReady (monitors/storage)
    _r(_S, "EBSInstanceIOPSExceeded", WARNING, NODE, "the instance's EBS IOPS limit exceeded",
       NO_HELP),
    _r(_S, "EBSInstanceThroughputExceeded", WARNING, NODE,
       "the instance's EBS throughput limit exceeded", NO_HELP),
    _r(_S, "EBSVolumeIOPSExceeded", WARNING, NODE, "an EBS volume's IOPS limit exceeded",
       NO_HELP),
    _r(_S, "EBSVolumeThroughputExceeded", WARNING, NODE,
       "an EBS volume's throughput limit exceeded", NO_HELP),
    _r(_S, "EtcHostsMountFailed", WARNING, NODE,
       "the kubelet's /etc/hosts mount failed (user data remounting kubelet's pods folder)",
       NO_HELP),
    _r(_S, "IODelays", WARNING, NODE, "a process waits long on I/O", NO_HELP),
    _r(_S, "KubeletDiskUsageSlow", WARNING, NODE, "the kubelet reads disk usage slowly",
       NO_HELP),
    _r(_S, "XFSSmallAverageClusterSize", WARNING, NODE, "XFS free space is badly fragmented",
       DEPENDS),
    _r(_S, "BlockDeviceIOError", WARNING, NODE,
       "an I/O error on a block device: a failed instance-store drive or EBS volume, data may "
       "be lost", HELPS, since="v1.7.0"),
)  # fmt: skip

_EXACT: dict[str, AgentReason] = {r.template: r for r in REASONS if "%" not in r.template}
# The templated families, as the agent builds them: "%d" formats an unsigned code (ASCII digits,
# at most what a 64-bit uint prints), "%s" a systemd unit's name.
_FAMILIES: tuple[tuple[re.Pattern[str], AgentReason], ...] = tuple(
    (
        re.compile(
            re.escape(r.template)
            .replace("%d", "[0-9]{1,20}")
            .replace("%s", "[A-Za-z0-9][A-Za-z0-9_.@:-]{0,254}")
        ),
        r,
    )
    for r in REASONS
    if "%" in r.template
)


def agent_reason(reason: str) -> AgentReason | None:
    """The table's entry for a reason as the agent writes it; None for one it does not define
    (up to NEWEST_KNOWN)."""
    found = _EXACT.get(reason)
    if found is not None:
        return found
    for pattern, entry in _FAMILIES:
        if pattern.fullmatch(reason):
            return entry
    return None


def plumbing(reason: str) -> bool:
    """The agent's GPU monitoring is what is broken (DCGMError): replacing will not help."""
    entry = agent_reason(reason)
    return entry is not None and entry.kind == PLUMBING


_VERSION = re.compile(r"v?([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?")


def agent_release(text: str) -> tuple[int, int, int] | None:
    """ "v1.7.0", "v1.4.0-eksbuild.1", an image "…/eks-node-monitoring-agent:v1.8.1-eksbuild.2"
    → (1, 7, 0); None when it names no release."""
    tag = text.strip().rsplit(":", 1)[-1] if "/" in text else text.strip()
    match = _VERSION.match(tag)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


_SHOWN = 120


def unknown_reason_text(reason: str, agent_version: str) -> str:
    """What to say of a reason the table lacks, naming the agent release running there."""
    if len(reason) > _SHOWN:
        reason = reason[: _SHOWN - 1] + "…"  # a reason is a CamelCase word: a page is not one
    head = (
        f"{reason} is not in mignurse's table of the node monitoring agent's reasons "
        f"(agent releases up to {NEWEST_KNOWN})"
    )
    if len(agent_version) > _SHOWN:
        agent_version = agent_version[: _SHOWN - 1] + "…"
    release = agent_release(agent_version) if agent_version else None
    newest = agent_release(NEWEST_KNOWN)
    if release is None:
        return (
            f"{head}; the agent's version could not be read here: look the reason up in "
            "pkg/reasons/reasons.yaml of the agent release that runs on the node"
        )
    if newest is not None and release > newest:
        return (
            f"{head}; the agent here is {agent_version}, newer: its pkg/reasons/reasons.yaml "
            "defines it"
        )
    return (
        f"{head}; the agent here is {agent_version}, which does not define it either: "
        "something other than the agent may have set it"
    )
