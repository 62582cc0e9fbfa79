"""The Eviction API and the disruption controller: an eviction a PodDisruptionBudget
refuses or records in `status.disruptedPods`, each PDB's status, and the PDBs that make a
node no disruption candidate for Karpenter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.model import scheduling
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.workloads.base import WorkloadsBase
from mignurse.sim.workloads.records import PodRecord, scaled

if TYPE_CHECKING:
    from mignurse.sim.controllers import Machine

PDB_DELETION_TIMEOUT = 120.0  # disruption controller DeletionTimeout for status.disruptedPods


def pdb_selects(selector: JsonDict | None, labels: dict[str, str]) -> bool:
    """Whether a PDB's label selector selects these labels: a null selector selects no pod,
    an empty one every pod of the namespace (policy/v1 PodDisruptionBudgetSpec.selector);
    matchExpressions as metav1.LabelSelectorAsSelector reads them."""
    if selector is None:
        return False
    if not scheduling.selector_matches(selector.get("matchLabels") or {}, labels):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, values = expr.get("key", ""), expr.get("values") or []
        operator = expr.get("operator")
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class DisruptionBudgets(WorkloadsBase):
    def evict(self, namespace: str, name: str, grace: int | None) -> JsonDict | None:
        """POST pods/eviction: the PDB that refuses it, or None when the pod is being deleted
        (k8s pkg/registry/core/pod/storage eviction.go: a pending or terminating pod ignores
        its PDB; otherwise disruptionsAllowed is decremented and the pod recorded in
        status.disruptedPods before the delete)."""
        pod = self.pods.get((namespace, name))
        obj = self.loops.tx.get("pods", namespace, name)
        if pod is None or obj is None:
            return None
        ignores_pdb = pod.deleting or obj["status"].get("phase") in (
            "Pending",
            "Succeeded",
            "Failed",
        )
        if not ignores_pdb:
            pdb = self.pdb_for(obj)
            if pdb is not None:
                status = pdb.get("status") or {}
                if int(status.get("disruptionsAllowed", 0)) <= 0:
                    return pdb
                status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
                disrupted = dict(status.get("disruptedPods") or {})
                disrupted[name] = ts(self.loops.t)
                status["disruptedPods"] = disrupted
                pdb["status"] = status
                self.loops.tx.put("poddisruptionbudgets", pdb)
                self._disrupted[pod.key] = self.loops.t
                self.loops.schedule(
                    self.loops.t + PDB_DELETION_TIMEOUT, self._disruption_expired, pod.key
                )
        self.start_deletion(
            pod,
            self.grace_of(pod) if grace is None else grace,
            condition=("EvictionByEvictionAPI", "Eviction API: evicting"),
        )
        return None

    def _disruption_expired(self, key: tuple[str, str]) -> None:
        at = self._disrupted.get(key)
        if at is not None and self.loops.t - at >= PDB_DELETION_TIMEOUT - 1e-6:
            del self._disrupted[key]
            self.update_pdbs(key[0])

    def _pdb_key(self, pod: JsonDict) -> tuple[str, str] | None:
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels", {})
        for key in self.loops.store.keys("poddisruptionbudgets"):
            if key[0] != ns:
                continue
            pdb = self.loops.tx.peek("poddisruptionbudgets", *key)
            if pdb is None:
                continue
            if pdb_selects(pdb["spec"].get("selector"), labels):
                return key
        return None

    def pdb_for(self, pod: JsonDict) -> JsonDict | None:
        """The pod's PDB, this transaction's copy (to change and put)."""
        key = self._pdb_key(pod)
        return None if key is None else self.loops.tx.get("poddisruptionbudgets", *key)

    def blocking_pdb(self, pod: PodRecord) -> JsonDict | None:
        """The PDB an eviction of this pod would hit now, if any."""
        obj = self.loops.tx.peek("pods", pod.namespace, pod.name)
        if obj is None or pod.deleting or obj["status"].get("phase") != "Running":
            return None
        key = self._pdb_key(obj)
        pdb = None if key is None else self.loops.tx.peek("poddisruptionbudgets", *key)
        if pdb is None or int((pdb.get("status") or {}).get("disruptionsAllowed", 0)) > 0:
            return None
        return pdb

    def blocking_pdbs_on(self, machine: Machine) -> JsonDict | None:
        """A PDB that allows no eviction of one of the node's pods (KC pdb.Limits
        CanEvictPods): such a node is no disruption candidate."""
        for pod in machine.pods:
            if pod.reschedulable:
                pdb = self.blocking_pdb(pod)
                if pdb is not None:
                    return pdb
        return None

    def update_pdbs(self, namespace: str) -> None:
        """The disruption controller's status for each PDB of the namespace
        (k8s pkg/controller/disruption disruption.go getExpectedPodCount, countHealthyPods)."""
        for key in [k for k in self.loops.store.keys("poddisruptionbudgets") if k[0] == namespace]:
            pdb = self.loops.tx.get("poddisruptionbudgets", *key)
            if pdb is None:
                continue
            selector = pdb["spec"].get("selector")
            matched = [
                p
                for p in self.pods.values()
                if p.namespace == namespace
                and p.owner is not None
                and pdb_selects(selector, p.owner.template["metadata"]["labels"])
            ]
            spec = pdb["spec"]
            scale = sum(
                rs.replicas
                for wl in self.workloads.values()
                if wl.namespace == namespace
                and pdb_selects(selector, wl.current.template["metadata"]["labels"])
                for rs in wl.sets
            )
            if "maxUnavailable" in spec:
                expected = scale
                desired = expected - scaled(spec["maxUnavailable"], expected)
            elif isinstance(spec.get("minAvailable"), int):
                expected = len(matched)
                desired = int(spec["minAvailable"])
            else:
                expected = scale
                desired = scaled(spec.get("minAvailable", 0), expected)
            disrupted = {
                p.name: ts(self._disrupted[p.key]) for p in matched if p.key in self._disrupted
            }
            healthy = sum(
                1 for p in matched if p.ready and not p.deleting and p.key not in self._disrupted
            )
            allowed = max(0, healthy - desired)
            old = pdb.get("status") or {}
            old_cond = next(iter(old.get("conditions") or []), None)
            status = "True" if allowed else "False"
            since = (
                old_cond["lastTransitionTime"]
                if old_cond is not None and old_cond["status"] == status
                else ts(self.loops.t)
            )
            generation = int(pdb["metadata"].get("generation") or 1)
            new: JsonDict = {
                "observedGeneration": generation,
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "disruptionsAllowed": allowed,
                "expectedPods": expected,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": status,
                        "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "message": "",
                        "observedGeneration": generation,
                        "lastTransitionTime": since,
                    }
                ],
            }
            if disrupted:
                new["disruptedPods"] = disrupted
            if new != old:
                pdb["status"] = new
                self.loops.tx.put("poddisruptionbudgets", pdb)
