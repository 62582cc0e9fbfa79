"""The resume hazard: which nodes Karpenter replaces as soon as repair runs again (their
matching condition is older than its toleration), per NodePool, and what the 20% guard
does to that, so resume's plan names them before the typed acknowledgement. Pure: the
nodes and the time come in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from mignurse.model import LABEL_NODEPOOL, Node, format_time


@dataclass(frozen=True)
class PoolRisk:
    pool: str  # "" for nodes outside any NodePool (the cluster-wide guard)
    nodes: int
    unhealthy: list[str]  # matching a repair policy now (what the guard counts)
    due: list[tuple[str, str]]  # (node, "Type=Status since T") past their toleration
    allowance: int

    @property
    def blocked(self) -> bool:
        return len(self.unhealthy) > self.allowance

    def describe(self) -> str:
        where = f"NodePool {self.pool}" if self.pool else "nodes outside any NodePool"
        names = ", ".join(f"{n} ({why})" for n, why in self.due)
        if self.blocked:
            return (
                f"{where}: {len(self.due)} node(s) past their toleration ({names}), but "
                f"{len(self.unhealthy)} of {self.nodes} are unhealthy, more than the 20% "
                f"guard's {self.allowance}: repairs stay blocked (NodeRepairBlocked) until "
                "fewer are unhealthy"
            )
        return (
            f"{where}: {len(self.due)} node(s) replaced at once: {names} "
            f"({len(self.unhealthy)} unhealthy of {self.nodes}, the 20% guard allows "
            f"{self.allowance})"
        )


def resume_risk(nodes: list[Node], now: datetime) -> list[PoolRisk]:
    """Per NodePool: which nodes Karpenter replaces as soon as repair runs again.

    Only pools with a node past its toleration are listed. Pure: `now` is passed in."""
    # The repair clock lives with the diagnosis' facts, loaded when a resume is checked.
    from mignurse.diagnose.facts import repair_allowance, repair_clock, unhealthy_for_repair

    by_pool: dict[str, list[Node]] = {}
    for node in nodes:
        if node.pool_kind == "nodegroup" or node.deleting is not None:
            continue
        by_pool.setdefault(node.labels.get(LABEL_NODEPOOL, ""), []).append(node)
    risks: list[PoolRisk] = []
    for pool, members in sorted(by_pool.items()):
        due: list[tuple[str, str]] = []
        for node in members:
            clock = repair_clock(node)
            if clock is not None and clock.deadline <= now:
                cond = clock.condition
                since = format_time(cond.last_transition) or "?"
                due.append((node.name, f"{cond.type}={cond.status} since {since}"))
        if not due:
            continue
        risks.append(
            PoolRisk(
                pool=pool,
                nodes=len(members),
                unhealthy=sorted(n.name for n in members if unhealthy_for_repair(n)),
                due=sorted(due),
                allowance=repair_allowance(len(members)),
            )
        )
    return risks
