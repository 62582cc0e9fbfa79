"""Parsing what happens to nodes: lifecycle steps after launch, and the timeline.

A lifecycle step (`after` a node launches) and a timeline item (`at` a sim time, for a node
named or picked as a pool's newest or oldest) change a node the same way: readiness,
conditions, labels, taints, allocatable, kubelet restarts, events. A timeline item may
instead inject a fault or an operator's action (`deleteNodeClaim`, `spotInterrupt`,
`consolidate`, `scale`, `cordon`). See docs/scenarios.md.
"""

from __future__ import annotations

import re
from typing import Any

from mignurse.sim.scenario_fields import ParseContext
from mignurse.sim.scenario_spec import (
    KUBELET_CONDITIONS,
    NMA_CONDITIONS,
    ConditionSpec,
    EventSpec,
    NodeRef,
    PluginCrashSpec,
    Step,
    TaintSpec,
    TimelineItem,
)
from mignurse.yamlfile import LDict

_STEP = {
    "after",
    "ready",
    "reason",
    "message",
    "condition",
    "conditions",
    "labels",
    "taints",
    "removeTaints",
    "allocatable",
    "kubelet",
    "nmaRestart",
    "gpuPluginCrash",
    "event",
    "events",
}
_TIMELINE = (_STEP - {"after"}) | {
    "at",
    "node",
    "deleteNodeClaim",
    "spotInterrupt",
    "consolidate",
    "scale",
    "cordon",
}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _parse_condition(ctx: ParseContext, raw: Any, where: str, line: int) -> ConditionSpec:
    d = ctx.mapping(raw, where, line, {"type", "status", "reason", "message"})
    ctype = ctx.string(d, "type", where)
    status = d.get("status")
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ctx.fail(ctx.line_of(d, "status"), f"{where}.status must be True, False or Unknown")
    if ctype not in NMA_CONDITIONS + KUBELET_CONDITIONS:
        allowed = ", ".join(NMA_CONDITIONS + KUBELET_CONDITIONS)
        raise ctx.fail(ctx.line_of(d, "type"), f"{where}.type {ctype!r} is not one of {allowed}")
    return ConditionSpec(
        ctype, status, ctx.string(d, "reason", where, ""), ctx.string(d, "message", where, "")
    )


def _parse_event(ctx: ParseContext, raw: Any, where: str, line: int) -> EventSpec:
    d = ctx.mapping(raw, where, line, {"reason", "message", "type", "source"})
    etype = ctx.string(d, "type", where, "Normal")
    if etype not in ("Normal", "Warning"):
        raise ctx.fail(ctx.line_of(d, "type"), f"{where}.type must be Normal or Warning")
    source = ctx.string(d, "source", where, "kubelet")
    return EventSpec(
        ctx.string(d, "reason", where), ctx.string(d, "message", where, ""), etype, source
    )


def parse_taint(ctx: ParseContext, raw: Any, where: str, line: int) -> TaintSpec:
    if isinstance(raw, str):
        # kubectl syntax: key[=value]:Effect
        m = re.match(r"^([^=:]+)(?:=([^:]*))?:(\w+)$", raw)
        if not m or m.group(3) not in _EFFECTS:
            raise ctx.fail(line, f"{where}: {raw!r} is not key[=value]:Effect")
        return TaintSpec(m.group(1), m.group(3), m.group(2))
    d = ctx.mapping(raw, where, line, {"key", "value", "effect"})
    effect = ctx.string(d, "effect", where)
    if effect not in _EFFECTS:
        raise ctx.fail(ctx.line_of(d, "effect"), f"{where}.effect must be one of {_EFFECTS}")
    value = d.get("value")
    return TaintSpec(ctx.string(d, "key", where), effect, None if value is None else str(value))


def _parse_step(ctx: ParseContext, raw: Any, where: str, line: int, allowed: set[str]) -> Step:
    d = ctx.mapping(raw, where, line, allowed)
    after = ctx.duration(d, "after", where, 0.0 if "after" not in allowed else None)
    ready = d.get("ready")
    if ready is not None and not isinstance(ready, bool):
        raise ctx.fail(ctx.line_of(d, "ready"), f"{where}.ready must be true or false")
    conds: list[ConditionSpec] = []
    if "condition" in d:
        conds.append(
            _parse_condition(ctx, d["condition"], f"{where}.condition", ctx.line_of(d, "condition"))
        )
    for i, c in enumerate(
        ctx.seq(d.get("conditions"), f"{where}.conditions", ctx.line_of(d, "conditions"))
    ):
        conds.append(
            _parse_condition(ctx, c, f"{where}.conditions[{i}]", ctx.line_of(d, "conditions"))
        )
    events: list[EventSpec] = []
    if "event" in d:
        events.append(_parse_event(ctx, d["event"], f"{where}.event", ctx.line_of(d, "event")))
    for i, e in enumerate(ctx.seq(d.get("events"), f"{where}.events", ctx.line_of(d, "events"))):
        events.append(_parse_event(ctx, e, f"{where}.events[{i}]", ctx.line_of(d, "events")))
    taints = tuple(
        parse_taint(ctx, t, f"{where}.taints[{i}]", ctx.line_of(d, "taints"))
        for i, t in enumerate(ctx.seq(d.get("taints"), f"{where}.taints", ctx.line_of(d, "taints")))
    )
    remove = ctx.seq(d.get("removeTaints"), f"{where}.removeTaints", ctx.line_of(d, "removeTaints"))
    kubelet = d.get("kubelet")
    if kubelet is not None and kubelet not in ("restart", "stop", "start"):
        raise ctx.fail(ctx.line_of(d, "kubelet"), f"{where}.kubelet must be restart, stop or start")
    step = Step(
        after=after,
        ready=ready,
        reason=None if d.get("reason") is None else str(d["reason"]),
        message=None if d.get("message") is None else str(d["message"]),
        conditions=tuple(conds),
        labels=tuple(ctx.str_map(d, "labels", where, nullable=True).items()),
        taints=taints,
        remove_taints=tuple(str(k) for k in remove),
        allocatable=tuple(ctx.str_map(d, "allocatable", where, nullable=True).items()),
        kubelet=kubelet,
        nma_restart=ctx.boolean(d, "nmaRestart", where, False),
        events=tuple(events),
        line=line,
        plugin_crash=_parse_plugin_crash(ctx, d, where),
    )
    if (step.reason or step.message) and step.ready is not False:
        raise ctx.fail(line, f"{where}: reason/message go with `ready: false`")
    return step


def _parse_plugin_crash(ctx: ParseContext, d: LDict, where: str) -> PluginCrashSpec | None:
    raw = d.get("gpuPluginCrash")
    if raw is None:
        return None
    here = f"{where}.gpuPluginCrash"
    line = ctx.line_of(d, "gpuPluginCrash")
    m = ctx.mapping(raw, here, line, {"message", "exitCode", "restarts"})
    exit_code = m.get("exitCode", 1)
    restarts = m.get("restarts", 5)
    if isinstance(exit_code, bool) or not isinstance(exit_code, int) or not 1 <= exit_code <= 255:
        raise ctx.fail(line, f"{here}.exitCode must be 1 to 255 (a crash)")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise ctx.fail(line, f"{here}.restarts must be a whole number, at least 1")
    message = m.get("message", "")
    if not isinstance(message, str):
        raise ctx.fail(line, f"{here}.message must be text")
    return PluginCrashSpec(message=message, exit_code=exit_code, restarts=restarts)


def _has_action(step: Step) -> bool:
    return bool(
        step.ready is not None
        or step.conditions
        or step.labels
        or step.taints
        or step.remove_taints
        or step.allocatable
        or step.kubelet
        or step.nma_restart
        or step.events
        or step.plugin_crash
    )


def parse_steps(ctx: ParseContext, raw: Any, where: str, line: int) -> tuple[Step, ...]:
    steps = []
    seq = ctx.seq(raw, where, line)
    for i, item in enumerate(seq):
        step_line = seq.item_lines[i] if i < len(seq.item_lines) else line
        step = _parse_step(ctx, item, f"{where}[{i}]", step_line, _STEP)
        if not _has_action(step):
            raise ctx.fail(step_line, f"{where}[{i}] has `after` but nothing to do")
        steps.append(step)
    return tuple(sorted(steps, key=lambda s: s.after))


def _parse_node_ref(ctx: ParseContext, raw: Any, where: str, line: int, pools: set[str]) -> NodeRef:
    if isinstance(raw, str):
        return NodeRef(name=raw)
    d = ctx.mapping(raw, where, line, {"newest", "oldest", "name"})
    if len(d) != 1:
        raise ctx.fail(line, f"{where} needs exactly one of name, newest, oldest")
    ref = NodeRef(**{k: str(v) for k, v in d.items()})
    pool = ref.newest or ref.oldest
    if pool is not None and pool not in pools:
        raise ctx.fail(line, f"{where}: no pool named {pool!r}")
    return ref


def parse_timeline(
    ctx: ParseContext, raw: Any, line: int, pools: set[str]
) -> tuple[TimelineItem, ...]:
    items = []
    seq = ctx.seq(raw, "timeline", line)
    for i, item_raw in enumerate(seq):
        where = f"timeline[{i}]"
        item_line = seq.item_lines[i]
        d = ctx.mapping(item_raw, where, item_line, _TIMELINE)
        at = ctx.duration(d, "at", where, None, signed=True)
        step_keys = {k for k in d if k in _STEP}
        step = None
        if step_keys:
            sub = LDict({k: d[k] for k in step_keys})
            sub.line, sub.key_lines = item_line, {k: d.key_lines[k] for k in step_keys}
            step = _parse_step(ctx, sub, where, item_line, _STEP - {"after"})
        actions = [
            k
            for k in ("deleteNodeClaim", "spotInterrupt", "consolidate", "scale", "cordon")
            if k in d
        ]
        if len(actions) > 1 or (actions and step is not None):
            raise ctx.fail(
                item_line,
                f"{where} has more than one action: {', '.join(sorted(step_keys | set(actions)))}",
            )
        if not actions and step is None:
            raise ctx.fail(item_line, f"{where} has nothing to do")
        action = actions[0] if actions else None
        argument: str | None = None
        nodes: int | None = None
        node_ref: NodeRef | None = None
        if action == "scale":
            sc = ctx.mapping(
                d["scale"], f"{where}.scale", ctx.line_of(d, "scale"), {"pool", "nodes"}
            )
            argument = ctx.string(sc, "pool", f"{where}.scale")
            if argument not in pools:
                raise ctx.fail(
                    ctx.line_of(sc, "pool"), f"{where}.scale: no pool named {argument!r}"
                )
            nodes = ctx.integer(sc, "nodes", f"{where}.scale", 0)
        else:
            node_ref = _parse_node_ref(
                ctx, ctx.required(d, "node", where), f"{where}.node", ctx.line_of(d, "node"), pools
            )
            if action == "consolidate":
                argument = str(d["consolidate"])
                if argument not in ("Underutilized", "Empty"):
                    raise ctx.fail(
                        ctx.line_of(d, "consolidate"),
                        f"{where}.consolidate must be Underutilized or Empty",
                    )
            elif action is not None and d[action] is not True:
                raise ctx.fail(ctx.line_of(d, action), f"{where}.{action} must be true")
        items.append(TimelineItem(at, node_ref, step, action, argument, nodes, item_line))
    return tuple(sorted(items, key=lambda t: t.at))
