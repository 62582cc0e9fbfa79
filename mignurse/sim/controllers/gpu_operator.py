"""The NVIDIA GPU operator's operands: deploy labels and the device plugin's advertising."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.sim import hardware
from mignurse.sim.controllers.base import (
    ADVERTISE_DELAY,
    LABEL_GPU_DEPLOY,
    MIG_LABELS,
    OPERAND_DAEMONSETS,
    OPERAND_DELAY,
    Machine,
)
from mignurse.sim.objects import JsonDict

if TYPE_CHECKING:
    from mignurse.sim.controllers.loops import ControlLoops


class GpuOperator:
    def __init__(self, loops: ControlLoops) -> None:
        self.loops = loops

    # ------------------------------------------------------------------ GPU operator

    def react(self, machine: Machine, before: JsonDict, after: JsonDict) -> None:
        old = before["metadata"].get("labels") or {}
        new = after["metadata"].get("labels") or {}
        # Like the DaemonSet controller, converge on the labels as they are now (a scenario
        # may have paused a label and left its pod), for the operands whose label is set.
        for key, ds in OPERAND_DAEMONSETS.items():
            label = LABEL_GPU_DEPLOY + key
            if label not in new:
                continue
            running = bool(self._operand_pods(machine, ds))
            if new[label] == "true" and not running:
                self.loops.schedule(
                    self.loops.t + OPERAND_DELAY, self._operand_start, machine, ds, label
                )
            elif new[label] != "true" and running:
                self.loops.schedule(
                    self.loops.t + OPERAND_DELAY, self._operand_stop, machine, ds, label
                )
        watched = (LABEL_GPU_DEPLOY + "device-plugin", *MIG_LABELS)
        if any(old.get(key) != new.get(key) for key in watched):
            self.loops.schedule(self.loops.t + ADVERTISE_DELAY, self._advertise_gpus, machine)

    def label(self, machine: Machine, key: str) -> str | None:
        node = self.loops.node(machine)
        value = (node["metadata"].get("labels") or {}).get(key) if node is not None else None
        return None if value is None else str(value)

    def _operand_pods(self, machine: Machine, ds: str) -> list[tuple[str, str]]:
        return [entry for entry in machine.daemon_pods if entry[1].rsplit("-", 1)[0] == ds]

    def _operand_stop(self, machine: Machine, ds: str, label: str) -> None:
        if machine.removed or self.label(machine, label) == "true":
            return
        for entry in self._operand_pods(machine, ds):
            machine.daemon_pods.remove(entry)
            self.loops.tx.delete("pods", *entry)

    def _operand_start(self, machine: Machine, ds: str, label: str) -> None:
        if (
            machine.removed
            or self.label(machine, label) != "true"
            or self._operand_pods(machine, ds)
        ):
            return
        self.loops.pods.create_daemon_pods(machine, only=ds)

    def plugin_crashed(self, machine: Machine) -> None:
        """The device plugin exited: kubelet marks its devices unhealthy, so allocatable
        goes to 0 while capacity keeps them (kubernetes v1.34
        pkg/kubelet/cm/devicemanager/manager.go: an endpoint that stops marks its devices
        unhealthy; GetCapacity keeps them in capacity for endpointStopGracePeriod)."""
        self._advertise_gpus(machine)

    def _advertise_gpus(self, machine: Machine) -> None:
        """What the device plugin makes kubelet report: nothing allocatable while it is
        paused; the layout of `nvidia.com/mig.config` once its state is `success`."""
        node = self.loops.node(machine)
        it = hardware.instance_type(machine.pool.instance_type)
        if node is None or it.gpu is None or machine.pool.dra:
            return  # on a DRA node the driver publishes slices; nothing is advertised
        labels = node["metadata"].get("labels") or {}
        advertised = [
            r for r in node["status"].get("allocatable", {}) if r.startswith("nvidia.com/")
        ]
        running = (
            bool(self._operand_pods(machine, OPERAND_DAEMONSETS["device-plugin"]))
            and not machine.gpu_plugin_crashed
        )
        if labels.get(LABEL_GPU_DEPLOY + "device-plugin") != "true" or not running:
            allocatable = node["status"].setdefault("allocatable", {})
            for resource in advertised:
                allocatable[resource] = "0"
            self.loops.tx.put("nodes", node)
            return
        if labels.get("nvidia.com/mig.config.state") != "success":
            return
        strategy = labels.get("nvidia.com/mig.strategy") or machine.pool.mig_strategy
        config = labels.get("nvidia.com/mig.config")
        layouts = self.loops.mig_files.layouts(it.gpu, machine.node, config)
        try:
            resources = hardware.mig_resources(it, config, strategy, layouts)
        except ValueError:
            return  # a config the GPU has no layout for: the plugin keeps what it had
        update: dict[str, str | None] = dict.fromkeys(advertised)
        update.update({r: str(n) for r, n in resources.items()})
        self.loops.set_allocatable(machine, update)
        counts: dict[str, str | None] = {
            k: None for k in labels if k.startswith("nvidia.com/mig-") and k.endswith(".count")
        }
        counts.update(
            {f"{r}.count": str(n) for r, n in resources.items() if r.startswith("nvidia.com/mig-")}
        )
        self.loops.set_labels(machine, counts)
