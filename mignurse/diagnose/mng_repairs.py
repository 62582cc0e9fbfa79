"""Nodes an EKS managed node group replaced through its own auto repair, read back from what
the cluster still shows: the local history, the Node events, and the node group's repair
settings (`cluster/nodegroups.json`, from `aws eks describe-nodegroup`).

Managed node groups leave no repair events of their own. What remains is the Node's story
as Kubernetes tells it: a failing condition (Karpenter's status controller publishes its
transitions on every Node of a cluster it runs in), a cordon about a minute later (the
kubelet reports `NodeNotSchedulable`), and after the repair wait the instance's end
(`NodeNotReady`, then the cloud node lifecycle controller's `DeletingNode` and the node
controller's `RemovingNode`). A rolling update cordons and replaces nodes too, but healthy
ones, in batches, without a failing condition before the cordon; that is what tells the two
apart (kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go, pkg/controller/util/node/
controller_utils.go, staging/src/k8s.io/cloud-provider/controllers/nodelifecycle; EKS user
guide node-repair.html).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from mignurse.diagnose.events import Transition, event_evidence, event_index, parse_transition
from mignurse.diagnose.facts import REPAIR_TOLERATIONS
from mignurse.diagnose.findings import Evidence
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.mng import DEFAULT_WAIT, REPLACE, MngAction, NodeGroupRepair
from mignurse.diagnose.replacements import WINDOW
from mignurse.diagnose.wording import human_duration
from mignurse.model import Event, Node, format_time

# Events a Karpenter termination leaves on a Node: such a node was not MNG's.
_KARPENTER_TERMINATION = frozenset(
    {"TerminationGracePeriodExpiring", "DisruptionTerminating", "TerminatingOnInterruption"}
)
_REGISTERED = ("RegisteredNode", "NodeReady", "Starting")
_GONE = ("DeletingNode", "RemovingNode")
# MNG cordons about a minute after the failing check; a transition this long before the
# cordon is the one that triggered it.
CORDON_AFTER_CHECK = timedelta(minutes=5)
# How far the cordon-to-shutdown gap may stray from the repair wait and still be its work.
WAIT_EARLY = timedelta(minutes=2)
WAIT_LATE = timedelta(minutes=6)
_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class MngRepair:
    """One node a managed node group cordoned and replaced."""

    node: str
    group: str  # "" when nothing tells which group it was in
    registered: datetime | None
    cordoned: datetime
    ended: datetime  # the instance's end began (NotReady), else its Node was deleted
    unhealthy: tuple[str, str, str] | None  # (type, status, reason) that triggered it
    unhealthy_since: datetime | None
    message: str = ""
    source: str = "event"
    evidence: tuple[Evidence, ...] = field(default=())

    @property
    def lifetime(self) -> timedelta | None:
        return self.ended - self.registered if self.registered is not None else None


def group_action(
    inp: DiagnosisInput, group: str, condition: str, status: str, reason: str
) -> tuple[MngAction | None, NodeGroupRepair | None]:
    """What the node group's repair does for this condition; None when its settings are
    not in the snapshot."""
    settings = inp.nodegroups.get(group)
    if settings is None:
        return None, None
    return settings.action(condition, status, reason), settings


def unhealthy_now(node: Node) -> tuple[str, str, str, datetime | None] | None:
    """The node's failing condition of the repair table (earliest first), as
    (type, status, reason, since)."""
    matching = [c for c in node.conditions if (c.type, c.status) in REPAIR_TOLERATIONS]
    if not matching:
        return None
    cond = min(matching, key=lambda c: (c.last_transition is None, c.last_transition or _EPOCH))
    return cond.type, cond.status, cond.reason, cond.last_transition


def mng_repairs(inp: DiagnosisInput, window: timedelta = WINDOW) -> list[MngRepair]:
    """Every node a managed node group cordoned and replaced within `window` of now, oldest
    first. Computed once per input."""
    return inp.memo(f"mng.repairs.{window}", lambda: _mng_repairs(inp, window))


def _mng_repairs(inp: DiagnosisInput, window: timedelta) -> list[MngRepair]:
    if not inp.nodegroups and not any(
        n.pool_kind == "nodegroup" for n in inp.snapshot.nodes.values()
    ):
        return []
    index = event_index(inp)
    about = {
        name: [e for e in index.by_object[name] if e.involved_kind == "Node"]
        for name in index.node_names
        if name not in inp.snapshot.nodes
    }
    history_pool = {
        lc.name: lc.pool for lc in inp.history.lifecycles if lc.kind == "Node" and lc.pool
    }
    suspects = _groups_with_unhealthy_cordoned(inp)
    found: list[MngRepair] = []
    since = inp.now - window
    for name, events in sorted(about.items()):
        repair = _read_node(inp, name, events, history_pool.get(name, ""), suspects)
        if repair is not None and repair.ended >= since:
            found.append(repair)
    found.sort(key=lambda r: (r.ended, r.node))
    return found


def _groups_with_unhealthy_cordoned(inp: DiagnosisInput) -> dict[str, set[tuple[str, str, str]]]:
    """Node groups whose live nodes show what their repair does: cordoned, and failing."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    for node in inp.snapshot.nodes.values():
        if node.pool_kind != "nodegroup" or not node.unschedulable:
            continue
        failing = unhealthy_now(node)
        if failing is not None:
            out.setdefault(node.pool, set()).add(failing[:3])
    return out


def _read_node(
    inp: DiagnosisInput,
    name: str,
    events: list[Event],
    known_group: str,
    suspects: Mapping[str, set[tuple[str, str, str]]],
) -> MngRepair | None:
    if any(e.reason in _KARPENTER_TERMINATION for e in events):
        return None
    if any(e.reason == "Finalized" and "karpenter.sh" in e.message for e in events):
        return None
    cordoned = _first(events, ("NodeNotSchedulable",))
    if cordoned is None:
        return None
    not_ready = _first(events, ("NodeNotReady",), after=cordoned)
    gone = _first(events, _GONE, after=cordoned)
    ended = not_ready or gone
    if ended is None:
        return None
    registered = _first(events, _REGISTERED)
    transitions = [t for e in events if (t := parse_transition(e)) is not None]
    trigger = _trigger(transitions, cordoned)
    unhealthy = (trigger.type, trigger.new, trigger.reason) if trigger is not None else None
    group = known_group or _attribute(unhealthy, suspects)
    if unhealthy is None:
        # No transition left to say why: it was repair only if the group's live nodes fail
        # one way and the cordon-to-shutdown gap matches that failure's repair wait.
        unhealthy = _matching_wait(inp, group, suspects.get(group, set()), cordoned, ended)
        if unhealthy is None:
            return None
    evidence = [
        event_evidence(e)
        for e in events
        if e.reason in ("NodeNotSchedulable", "NodeNotReady", *_GONE)
    ]
    if trigger is not None:
        evidence.insert(0, event_evidence(trigger.event))
    lifetime = ended - registered if registered is not None else None
    evidence.insert(
        0,
        Evidence(
            ended,
            "event",
            f"Node {name} is gone: "
            + (f"registered {format_time(registered)}, " if registered else "")
            + f"cordoned {format_time(cordoned)}, NotReady/deleted from {format_time(ended)}"
            + (f" (lived about {human_duration(lifetime)})" if lifetime is not None else "")
            + f" → managed node group repair of {unhealthy[0]}={unhealthy[1]}"
            + (f" ({unhealthy[2]})" if unhealthy[2] else "")
            + ("" if trigger is not None else " (inferred: no transition event left)"),
        ),
    )
    return MngRepair(
        node=name,
        group=group,
        registered=registered,
        cordoned=cordoned,
        ended=ended,
        unhealthy=unhealthy,
        unhealthy_since=trigger.time if trigger is not None else None,
        message=trigger.message if trigger is not None else "",
        evidence=tuple(dict.fromkeys(evidence)),
    )


def _first(
    events: Iterable[Event], reasons: tuple[str, ...], after: datetime | None = None
) -> datetime | None:
    times = [
        t
        for e in events
        if e.reason in reasons
        and (t := e.first_seen or e.last_seen) is not None
        and (after is None or t >= after)
    ]
    return min(times) if times else None


def _trigger(transitions: list[Transition], cordoned: datetime) -> Transition | None:
    """The failing-condition transition the cordon answered."""
    eligible = [
        t
        for t in transitions
        if (t.type, t.new) in REPAIR_TOLERATIONS
        and t.time is not None
        and cordoned - CORDON_AFTER_CHECK <= t.time <= cordoned + timedelta(seconds=10)
    ]
    return max(eligible, key=lambda t: t.time or cordoned, default=None)


def _attribute(
    unhealthy: tuple[str, str, str] | None, suspects: Mapping[str, set[tuple[str, str, str]]]
) -> str:
    """The node group a gone node most likely belonged to: the one whose live nodes fail
    the same way (by name, events say nothing of labels)."""
    if unhealthy is not None:
        matching = [g for g, failing in suspects.items() if unhealthy in failing]
        if len(matching) == 1:
            return matching[0]
    return next(iter(suspects)) if len(suspects) == 1 else ""


def _matching_wait(
    inp: DiagnosisInput,
    group: str,
    failing: set[tuple[str, str, str]],
    cordoned: datetime,
    ended: datetime,
) -> tuple[str, str, str] | None:
    gap = ended - cordoned
    for condition in sorted(failing):
        action, _settings = group_action(inp, group, *condition)
        wait = action.wait if action is not None and action.action == REPLACE else None
        if action is None:
            wait = DEFAULT_WAIT.get(condition[0])  # settings unknown: the documented default
        if wait is not None and wait - WAIT_EARLY <= gap <= wait + WAIT_LATE:
            return condition
    return None
