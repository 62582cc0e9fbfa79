"""The Karpenter repair backend: node repair is the controller's `NodeRepair` feature gate.

A pause changes only that token, wherever the controller container sets it, and records the
prior strings on the Deployment (`deployment.py`) in the same JSON patch, so resume works from
another laptop and the app can say who paused and when; a lost response is settled by
reading the Deployment back (the record names the run). The pause, like the resume, is real
only once the rollout has replaced every controller pod: verify waits for both. Resume puts
back exactly the recorded strings, after its plan has named the nodes Karpenter would
replace at once (`hazard.py`). Facts in docs/repair.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mignurse.cluster.client import DEPLOYMENTS, NODES, ClusterError
from mignurse.model import Node, format_time
from mignurse.runner.step import Change, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.repair.backend import Found, cluster_failed, paused_by
from mignurse.runner.steps.repair.deployment import (
    ANNOTATION_PAUSED,
    describe_record,
    gate_patch,
    management_notes,
    patch_deployment,
    pause_record,
    verify_rollout,
)
from mignurse.runner.steps.repair.gates import (
    NODE_REPAIR,
    GateSetting,
    deploy_ref,
    effective_repair,
    gate_settings,
    namespace_of,
    restored_repair,
    set_gate,
)
from mignurse.runner.steps.repair.hazard import PoolRisk, resume_risk

KARPENTER_NAMESPACES = ("kube-system", "karpenter")


class KarpenterRepair:
    """Pause and resume the karpenter controller's node repair (see the module docstring)."""

    kind = "karpenter"

    # -- pause

    def pause_refusal(self, found: Found) -> str | None:
        if found.deploy is None:
            return (
                f"{found.backend.why}, but no karpenter Deployment was found in "
                f"{' or '.join(KARPENTER_NAMESPACES)}: pass --param namespace=NS"
            )
        settings = gate_settings(found.deploy)
        if len({s.where for s in settings}) < len(settings):
            return (
                f"{deploy_ref(found.deploy)} sets FEATURE_GATES twice in one place; fix it by hand"
            )
        return None

    def plan_pause(self, ctx: StepContext, found: Found) -> StepPlan:
        deploy = found.deploy
        if deploy is None:
            return StepPlan(notes=[found.backend.why], nothing_to_do=True)
        ref = deploy_ref(deploy)
        settings = gate_settings(deploy)
        notes = [found.backend.why, *management_notes(deploy, node_repair=False)]
        record = pause_record(deploy)
        if (
            not effective_repair(settings)
            and record
            and ctx.run_id
            and record.get("run") == ctx.run_id
        ):
            notes.insert(0, f"paused by this run before it stopped ({describe_record(record)})")
            return StepPlan(
                notes=[*notes, "waits for the rollout to finish"],
                data={
                    "backend": "karpenter",
                    "namespace": namespace_of(deploy),
                    "name": deploy["metadata"]["name"],
                    "edits": ctx.prior.get("edits") or record["settings"],
                },
            )
        if not effective_repair(settings):
            from mignurse.fleetview import RepairState  # the fleet view loads the diagnosis

            state = RepairState.read(False, record)
            why = " (NodeRepair is not true)" if not record else ""
            notes.insert(0, f"nothing to pause: {state.sentence()} in {ref}{why}")
            return StepPlan(notes=notes, nothing_to_do=True, data={"backend": "karpenter"})
        if record:
            notes.append(
                f"{ref} carries an earlier pause record ({describe_record(record)}) though "
                "repair is on again (a helm upgrade or sync?); it is replaced"
            )
        changes = []
        edits = []
        for s in settings:
            paused = set_gate(s.gates, NODE_REPAIR, False)
            if paused == s.gates:
                continue
            changes.append(Change(ref, f"{s.describe()} token {NODE_REPAIR}", s.gates, paused))
            edits.append(
                {
                    "where": s.where,
                    "container": s.container_name,
                    "path": s.path,
                    "prior": s.gates,
                    "paused": paused,
                    "prefix": s.prefix,
                }
            )
        notes.append(
            "the controller reads its gates only at start: the pause holds once the rollout "
            "has replaced every controller pod; until then the old leader can still repair"
        )
        changes.append(
            Change(ref, f"annotation {ANNOTATION_PAUSED}", None, "(prior values, who, when)")
        )
        return StepPlan(
            changes=changes,
            notes=notes,
            data={
                "backend": "karpenter",
                "namespace": namespace_of(deploy),
                "name": deploy["metadata"]["name"],
                "edits": edits,
            },
        )

    def apply_pause(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        ns, name, edits = plan.data["namespace"], plan.data["name"], plan.data["edits"]
        for note in plan.notes:
            if "managed by" in note:
                ctx.log(f"warning: {note}")
        record = {
            "settings": [
                {k: e[k] for k in ("where", "container", "prior", "paused")} for e in edits
            ],
            "by": paused_by(ctx),
            "at": format_time(ctx.client.server_now()),
            "run": ctx.run_id,
        }
        text = json.dumps(record, separators=(",", ":"), sort_keys=True)

        def landed(deploy: dict[str, Any]) -> bool:
            found = pause_record(deploy)
            return bool(found and found.get("run") == ctx.run_id and ctx.run_id) and all(
                s.gates == e["paused"] for s, e in _match(gate_settings(deploy), edits)
            )

        def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
            pairs = _match(gate_settings(deploy), edits)
            for s, e in pairs:
                if s.gates != e["prior"]:
                    raise StepFailed(
                        f"{deploy_ref(deploy)} {s.describe()} changed since the plan "
                        f"({e['prior']!r} → {s.gates!r}); nothing was changed: plan again"
                    )
            return gate_patch(
                deploy, [(s.path, s.render(s.gates), s.render(e["paused"])) for s, e in pairs], text
            )

        undo_needs = {
            "backend": "karpenter",
            "namespace": ns,
            "name": name,
            "edits": edits,
            "record": record,
        }
        after = patch_deployment(
            ctx, ns, name, build, landed, f"NodeRepair=false on deployment/{ns}/{name}", undo_needs
        )
        ctx.log(f"deployment/{ns}/{name}: NodeRepair=false, rolling out")
        return {
            "backend": "karpenter",
            "namespace": ns,
            "name": name,
            "generation": int(after["metadata"].get("generation", 1)),
            "edits": edits,
            "record": ctx.prior.get("record", record),
        }

    # -- managed node group

    def verify_pause(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        return verify_rollout(
            ctx, applied["namespace"], applied["name"], applied["generation"], False
        )

    def restore(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        _restore(ctx, applied["namespace"], applied["name"], applied["edits"])

    # -- resume

    def resume_refusal(self, ctx: StepContext, found: Found) -> str | None:
        deploy = found.deploy
        if deploy is None:
            return "no karpenter Deployment was found: pass --param namespace=NS"
        if pause_record(deploy) is None and not ctx.prior.get("record"):
            from mignurse.fleetview import RepairState

            state = RepairState.read(effective_repair(gate_settings(deploy)), None)
            return (
                f"{state.sentence()}: {deploy_ref(deploy)} has no {ANNOTATION_PAUSED} record "
                "(repair was not paused by mignurse), so there is no prior value to restore"
            )
        return None

    def plan_resume(self, ctx: StepContext, found: Found) -> StepPlan:
        deploy = found.deploy
        assert deploy is not None
        record = pause_record(deploy)
        if record is None and ctx.prior.get("record"):
            return StepPlan(
                notes=[
                    "restored by this run before it stopped "
                    f"({describe_record(ctx.prior['record'])}); waits for the rollout"
                ],
                data={
                    k: ctx.prior[k]
                    for k in ("backend", "namespace", "name", "edits", "record")
                    if k in ctx.prior
                },
            )
        assert record is not None
        settings = gate_settings(deploy)
        changes, edits, drifted = _resume_edits(deploy_ref(deploy), settings, record)
        changes.append(
            Change(
                deploy_ref(deploy), f"annotation {ANNOTATION_PAUSED}", describe_record(record), None
            )
        )
        notes = [describe_record(record), *drifted]
        risks = _risks(ctx)
        notes += [r.describe() for r in risks] or [
            "no node is past its repair toleration: nothing is replaced at once"
        ]
        notes += management_notes(deploy, node_repair=restored_repair(settings, edits))
        return StepPlan(
            changes=changes,
            notes=notes,
            data={
                "backend": "karpenter",
                "namespace": namespace_of(deploy),
                "name": deploy["metadata"]["name"],
                "edits": edits,
                "record": record,
                "at_risk": [
                    {
                        "pool": r.pool,
                        "due": [n for n, _ in r.due],
                        "blocked": r.blocked,
                        "unhealthy": len(r.unhealthy),
                        "nodes": r.nodes,
                        "allowance": r.allowance,
                    }
                    for r in risks
                ],
            },
        )

    def apply_resume(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        data = plan.data
        undo_needs = {k: v for k, v in data.items() if k != "at_risk"}
        after = _restore(ctx, data["namespace"], data["name"], data["edits"], undo_needs)
        return {
            "backend": "karpenter",
            "namespace": data["namespace"],
            "name": data["name"],
            "generation": int(after["metadata"].get("generation", 1)),
            "edits": data["edits"],
            "record": data["record"],
        }

    def verify_resume(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        want = effective_repair(
            [
                GateSetting(e["where"], 0, e["container"], "", "", e["prior"])
                for e in applied["edits"]
            ]
        )
        return verify_rollout(
            ctx, applied["namespace"], applied["name"], applied["generation"], want
        )

    def pause_again(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        ns, name, edits = applied["namespace"], applied["name"], applied["edits"]
        text = json.dumps(applied["record"], separators=(",", ":"), sort_keys=True)

        def landed(deploy: dict[str, Any]) -> bool:
            return pause_record(deploy) is not None and all(
                s.gates == e["paused"] for s, e in _match(gate_settings(deploy), edits)
            )

        def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
            pairs = _match(gate_settings(deploy), edits)
            return gate_patch(
                deploy,
                [(s.path, s.render(s.gates), s.render(e["paused"])) for s, e in pairs],
                text,
            )

        patch_deployment(ctx, ns, name, build, landed, f"pause deployment/{ns}/{name} again")

    # -- undo's read-back

    def not_back(self, ctx: StepContext, applied: Mapping[str, Any], *, paused: bool) -> str | None:
        """What differs from the gates "paused" or "prior" and the record's presence."""
        which = "paused" if paused else "prior"
        ns, name = applied["namespace"], applied["name"]
        try:
            deploy = ctx.client.get(DEPLOYMENTS, name, ns)
        except ClusterError as exc:
            raise cluster_failed(f"cannot read deployment/{ns}/{name}", exc) from None
        wrong = [
            f"{s.describe()} is {s.gates!r}, not {e[which]!r}"
            for s, e in _match(gate_settings(deploy), applied["edits"])
            if s.gates != e[which]
        ]
        record = pause_record(deploy)
        if paused and record is None:
            wrong.append(f"the {ANNOTATION_PAUSED} record is gone")
        if not paused and record is not None and record.get("run") == ctx.run_id:
            wrong.append(f"the {ANNOTATION_PAUSED} record of this run is still there")
        return f"deployment/{ns}/{name}: " + "; ".join(wrong) if wrong else None


def _resume_edits(
    ref: str, settings: list[GateSetting], record: Mapping[str, Any]
) -> tuple[list[Change], list[dict[str, Any]], list[str]]:
    """Resume's changes (each gate string back to its recorded prior), the edits undo and
    the rollout check need, and a note for each string changed since the pause."""
    edits = []
    changes = []
    drifted: list[str] = []
    for entry in record["settings"]:
        here = [
            s
            for s in settings
            if (s.where, s.container_name) == (entry.get("where"), entry.get("container"))
        ]
        current = here[0].gates if here else None
        if current is not None and current != entry.get("paused"):
            drifted.append(
                f"{entry['where']} was changed after the pause ({entry.get('paused')!r} → "
                f"{current!r}); it is restored to the recorded value anyway"
            )
        if current != entry["prior"]:
            changes.append(
                Change(
                    ref,
                    f"{entry['where']} of container {entry['container']}",
                    current,
                    entry["prior"],
                )
            )
        edits.append({k: entry.get(k) for k in ("where", "container", "prior", "paused")})
    return changes, edits, drifted


def _risks(ctx: StepContext) -> list[PoolRisk]:
    try:
        nodes = ctx.client.list(NODES, Node.from_api).items
    except ClusterError as exc:
        raise cluster_failed("cannot list nodes to show who repair would replace", exc) from None
    return resume_risk(nodes, ctx.client.server_now())


def _match(
    settings: list[GateSetting], edits: list[dict[str, Any]]
) -> list[tuple[GateSetting, dict[str, Any]]]:
    """Pair each recorded edit with the setting now at the same place (where + container)."""
    pairs = []
    for edit in edits:
        same = [
            s for s in settings if (s.where, s.container_name) == (edit["where"], edit["container"])
        ]
        if len(same) != 1:
            raise StepFailed(
                f"{edit['where']} of container {edit['container']} is no longer set once "
                "in the Deployment; restore it by hand to "
                f"{edit.get('prior')!r}"
            )
        pairs.append((same[0], edit))
    return pairs


def _restore(
    ctx: StepContext,
    namespace: str,
    name: str,
    edits: list[dict[str, Any]],
    prior: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Put every recorded prior string back and drop the record; safe to run twice."""

    def landed(deploy: dict[str, Any]) -> bool:
        return pause_record(deploy) is None and all(
            s.gates == e["prior"] for s, e in _match(gate_settings(deploy), edits)
        )

    def build(deploy: dict[str, Any]) -> list[dict[str, Any]]:
        pairs = _match(gate_settings(deploy), edits)
        return gate_patch(
            deploy,
            [
                (s.path, s.render(s.gates), s.render(e["prior"]))
                for s, e in pairs
                if s.gates != e["prior"]
            ],
            None,
        )

    after = patch_deployment(
        ctx,
        namespace,
        name,
        build,
        landed,
        f"restore the feature gates of deployment/{namespace}/{name}",
        prior,
    )
    ctx.log(f"deployment/{namespace}/{name}: feature gates restored, rolling out")
    return after
