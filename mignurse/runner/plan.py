"""A runbook's plan as the operator sees it before anything changes: each step with its check
and plan (`PlannedStep`), the whole with the harm that sets the confirmation (`Plan`, as
text for the prompt and piped output, and as JSON), and the `Confirmer` protocol through
which the terminal and the app's modal answer that confirmation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from mignurse.runner import state as st
from mignurse.runner.schema import Runbook, StepSpec
from mignurse.runner.step import Action, Harm, StepPlan

# a name an operator can type back exactly: what EKS allows in a cluster name and more
# (kubeconfig entries are free text), no spaces, controls or slashes
_TYPEABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")


class Confirmer(Protocol):
    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        """LOW: a yes/no; HIGH: the operator must type `expected_word`."""
        ...


@dataclass
class PlannedStep:
    spec: StepSpec
    action: Action
    plan: StepPlan | None = None
    blocked: str = ""  # the failed check or plan, one line
    status: str = st.PENDING  # for a resume: steps already done are shown as such

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.spec.id,
            "action": self.spec.action,
            "title": self.action.title,
            "mutates": self.action.mutates,
            "harm": self.action.harm.name.lower(),
            "canUndo": self.action.can_undo,
            "status": self.status,
            "blocked": self.blocked or None,
            "plan": self.plan.to_json() if self.plan else None,
        }


@dataclass
class Plan:
    book: Runbook
    target: str
    steps: list[PlannedStep]
    harm: Harm
    refusal: str = ""  # why the run as a whole cannot start (another run's leftovers, a lock)
    leftovers: list[str] = field(default_factory=list)  # other runs' leftovers, one line each
    context: str = ""  # the kubeconfig context it acts through
    cluster: str = ""  # the cluster's name (`ContextInfo.name`)

    @property
    def blocked(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.blocked]

    def blocked_line(self) -> str:
        """Why the run cannot start, in one line ("" when it can)."""
        if self.refusal:
            return self.refusal
        first = next(iter(self.blocked), None)
        return f"step {first.spec.id} cannot run: {first.blocked}" if first else ""

    def text(self) -> str:
        """The plan as plain text (the confirmation prompt and piped output show it)."""
        lines = [f"{self.book.name} on {self.where()}: {self.book.title}"]
        if self.refusal:
            lines.append(f"BLOCKED: {self.refusal}")
        elif self.leftovers:
            lines.extend(f"left by another run: {line}" for line in self.leftovers)
        for i, step in enumerate(self.steps, 1):
            head = f"{i}. {step.spec.id} ({step.action.title})"
            if step.status in st.DONE:
                lines.append(f"{head}: already {step.status}")
                continue
            if not step.action.mutates:
                head += " [read-only]"
            lines.append(head)
            if step.blocked:
                lines.append(f"   BLOCKED: {step.blocked}")
                continue
            plan = step.plan or StepPlan()
            if plan.nothing_to_do:
                lines.append("   nothing to do")
            lines.extend(f"   change {c.describe()}" for c in plan.changes)
            lines.extend(f"   run {c.describe()}" for c in plan.commands)
            lines.extend(f"   note: {n}" for n in plan.notes)
        return "\n".join(lines)

    def where(self) -> str:
        """What the plan acts on, with the cluster and the context that reaches it, so that a
        plan read among several clusters names its own (`node N in cluster C (context X)`)."""
        if not self.cluster:
            return self.target
        context = f" (context {self.context})" if self.context not in ("", self.cluster) else ""
        if self.book.target == "node":
            return f"node {self.target} in cluster {self.cluster}{context}"
        return f"cluster {self.cluster}{context}"

    def typed_word(self) -> str:
        """What a HIGH-harm confirmation asks to be typed: the cluster's name, and for a node
        `CLUSTER/NODE` (as a code host asks for `owner/repo` before deleting it), so the
        answer names the cluster acted on as well as the node. A name that cannot be typed
        (spaces, controls: a kubeconfig is outside input) is not asked for: the node's name,
        or the target as before."""
        return typed_word(self.cluster, self.target, node=self.book.target == "node")

    def to_json(self) -> dict[str, Any]:
        return {
            "runbook": self.book.name,
            "target": self.target,
            "context": self.context,
            "cluster": self.cluster,
            "harm": self.harm.name.lower(),
            "refusal": self.refusal or None,
            "leftovers": list(self.leftovers),
            "steps": [s.to_json() for s in self.steps],
        }


def typed_word(cluster: str, target: str, *, node: bool) -> str:
    """`Plan.typed_word` for a target in a cluster (`mignurse unlock` asks for it too)."""
    if not _TYPEABLE.fullmatch(cluster):
        return target
    return f"{cluster}/{target}" if node else cluster


def batch_word(plans: list[Plan]) -> str:
    """What one HIGH-harm confirmation of several nodes' plans asks to be typed: how many,
    after their cluster's name where it can be typed (`prod-use1/3 nodes`)."""
    clusters = {plan.cluster for plan in plans}
    count = f"{len(plans)} nodes"
    if len(clusters) == 1 and _TYPEABLE.fullmatch(next(iter(clusters))):
        return f"{clusters.pop()}/{count}"
    return count
