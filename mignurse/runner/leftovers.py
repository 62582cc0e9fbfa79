"""What other runs left on a target: the runs of this context on the same node (or cluster)
that did not end cleanly, and what of theirs the cluster still shows.

Decisions:
- A run is unfinished when its state says so (killed, interrupted, failed) and one of its
  steps may have changed something that was not undone. A run that is still alive counts
  too (it is not over yet). A run interrupted before its first change left nothing.
- What it left is read back from the cluster, not taken from its state: the node's
  `mignurse.io/cordoned-by` naming it, GPU operand labels it paused, the
  `karpenter.sh/do-not-disrupt` hold it set, the Karpenter
  Deployment's repair-paused record naming it, the lock naming it, the node itself gone.
- A node created after the run began is another node under a reused name (EKS names nodes
  by their private IP): that run left nothing on it. Clocks may be minutes apart: the run's
  own clock stamped its state, the API server's the node, so a margin of CLOCK_SLACK applies.
- Each leftover says the exact command that settles it: `mignurse run --resume ID` and
  `mignurse run --undo ID`, as the engine judges them now (`Followup`), or why neither can.
- The engine refuses a new run of the same runbook on a target an unfinished run still
  holds (running it again would record that run's changes as its own starting point), and a
  new run while another run is alive on it; a run of another runbook is shown what is left,
  and its report names it again when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mignurse.cluster.client import NODES, ClusterClient, ClusterError, NotFound
from mignurse.model import LABEL_GPU_DEPLOY_PREFIX
from mignurse.runner import state as st
from mignurse.runner.lock import LOCK_ANNOTATION, lock_resource, read_lock
from mignurse.runner.outcome import Followup
from mignurse.runner.steps.disruption import DO_NOT_DISRUPT
from mignurse.runner.steps.kube import CORDONED_BY, cordon_run
from mignurse.runner.steps.mig.labels import PAUSED
from mignurse.runner.steps.repair.deployment import karpenter_pause_record

CLOCK_SLACK = timedelta(minutes=10)


@dataclass
class Leftover:
    """One unfinished run on the target, what of it the cluster still shows, and what follows."""

    run_id: str
    runbook: str
    status: str  # killed, interrupted, failed, running, running on HOST
    where: str  # "at step delete-nodeclaim", "" when unknown
    alive: bool = False  # its process still runs (or runs on another machine)
    marks: list[str] = field(default_factory=list)  # what the cluster still shows of it
    followups: dict[str, Followup] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: the run, what it left, and the command that settles it."""
        where = f" {self.where}" if self.where else ""
        head = f"run {self.run_id} ({self.runbook}, {self.status}{where})"
        if self.alive:
            return f"{head} is still running: wait for it, or stop it where it runs"
        left = "; ".join(self.marks) or (
            "no mark of it shows on the cluster now, but its state records changes not undone"
        )
        return f"{head} left: {left}; " + self.commands()

    def commands(self) -> str:
        parts = []
        for kind, (possible, why) in self.followups.items():
            if possible:
                parts.append(f"`mignurse run --{kind} {self.run_id}` {why}")
        if not parts:
            reasons = "; ".join(f"{k}: {w}" for k, (_p, w) in self.followups.items())
            return f"neither resume nor undo can run now ({reasons})"
        return "; ".join(parts)


def unfinished_runs(context: str, target: str, exclude: str = "") -> list[st.RunState]:
    """This context's runs on `target` that may have left changes behind, oldest first."""
    found = []
    for run in st.list_runs():
        if run.run_id == exclude or run.context != context or run.target != target:
            continue
        if run.status in (st.SUCCEEDED, st.RUN_UNDONE):
            continue
        if _alive(run) or any(_left_something(s) for s in run.steps):
            found.append(run)
    return found


def _alive(run: st.RunState) -> bool:
    return run.status == st.RUNNING and run.alive()


def _status(run: st.RunState) -> str:
    if run.status != st.RUNNING:
        return run.status
    if not run.alive():
        return "killed"
    return run.shown_status()


def _left_something(step: st.StepState) -> bool:
    return step.touched and step.status not in (st.UNDONE, st.NOT_UNDOABLE)


def _stopped_at(run: st.RunState) -> str:
    for step in run.steps:
        if step.status not in st.DONE and (step.touched or step.status != st.PENDING):
            return f"at step {step.id}"
    pending = [s.id for s in run.steps if s.status == st.PENDING]
    return f"before step {pending[0]}" if pending else ""


def _parse(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def find_leftovers(
    client: ClusterClient,
    *,
    node_target: bool,
    target: str,
    exclude: str,
    followups: Callable[[str], dict[str, Followup]],
) -> list[Leftover]:
    """The unfinished runs on the target with what the cluster shows of them. `followups(run)`
    judges `--resume` and `--undo` of one (`engine.possible_followups`). Reads the cluster."""
    runs = unfinished_runs(client.info.context, target, exclude)
    if not runs:
        return []
    node: dict[str, Any] | None = None
    gone = False
    if node_target:
        try:
            node = client.get(NODES, target)
        except NotFound:
            gone = True
        except ClusterError:
            node = None  # unreadable: the runs are still named, without what they left
    repair_record = (karpenter_pause_record(client) or {}) if not node_target else {}
    found = []
    for run in runs:
        if node is not None and _newer_node(node, run):
            continue  # another node under the same name
        leftover = Leftover(
            run.run_id, run.runbook, _status(run), _stopped_at(run), alive=_alive(run)
        )
        if not leftover.alive:
            if gone:
                leftover.marks.append(f"node {target} is gone")
            elif node is not None:
                leftover.marks.extend(_node_marks(node, run))
            else:
                leftover.marks.extend(_lock_marks(client, node_target, target, run.run_id))
            if repair_record.get("run") == run.run_id:
                leftover.marks.append(
                    f"node repair paused by it since {repair_record.get('at') or '?'}"
                )
            leftover.followups = followups(run.run_id)
        found.append(leftover)
    return found


def _newer_node(node: dict[str, Any], run: st.RunState) -> bool:
    created = _parse(str((node.get("metadata") or {}).get("creationTimestamp") or ""))
    began = _parse(run.created)
    return created is not None and began is not None and created > began + CLOCK_SLACK


def _node_marks(node: dict[str, Any], run: st.RunState) -> Iterable[str]:
    meta = node.get("metadata") or {}
    name = meta.get("name", "")
    if (node.get("spec") or {}).get("unschedulable") and cordon_run(node) == run.run_id:
        yield f"node {name} cordoned by it ({CORDONED_BY})"
    touched = {s.action for s in run.steps if _left_something(s)}
    if "pause-gpu-operands" in touched:
        paused = sorted(
            k.removeprefix(LABEL_GPU_DEPLOY_PREFIX)
            for k, v in (meta.get("labels") or {}).items()
            if k.startswith(LABEL_GPU_DEPLOY_PREFIX) and v == PAUSED
        )
        if paused:
            yield f"GPU operands paused on {name} ({', '.join(paused)}={PAUSED})"
    if (
        "hold-disruption" in touched
        and (meta.get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"
    ):
        yield f"node {name} held off Karpenter's consolidation by it ({DO_NOT_DISRUPT})"
    if meta.get("deletionTimestamp"):
        yield f"node {name} is being deleted since {meta['deletionTimestamp']}"
    lock = str((meta.get("annotations") or {}).get(LOCK_ANNOTATION) or "")
    if f'"run":"{run.run_id}"' in lock:
        yield f"its lock ({LOCK_ANNOTATION}) on node {name}"


def _lock_marks(client: ClusterClient, node_target: bool, target: str, run: str) -> Iterable[str]:
    resource, name, words = lock_resource("node" if node_target else "cluster", target)
    try:
        current, _version = read_lock(client, resource, name)
    except ClusterError:
        return
    if current and current.get("run") == run:
        yield f"its lock ({LOCK_ANNOTATION}) on {words}"
