"""The managed node group repair backend: node repair is the node group's `nodeRepairConfig`
(EKS API), changed with `update_nodegroup_config`.

A pause records the prior config as tags on the EKS cluster, one set per node group (tag
values hold 256 characters, so the JSON is split over numbered tags; the cluster rather than
the node group, because moto tags only clusters and the record must be testable), then turns
repair off or adds a `NoAction` override for the condition and reason at hand. The update id
is tracked with `describe_update`; where the endpoint lacks it (moto), verify reads
`describe_nodegroup` and says so. Resume restores exactly the recorded config and removes
the record. Facts in docs/repair.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mignurse.cluster.client import NODES, ClusterError
from mignurse.model import LABEL_NODEGROUP, Node, format_time
from mignurse.runner.step import Change, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.awserror import aws_step_failed
from mignurse.runner.steps.repair.backend import Found, cluster_failed, paused_by, wait_until
from mignurse.runner.steps.repair.deployment import describe_record
from mignurse.untrusted import json_value

TAG_PAUSED = "mignurse.io/node-repair-paused"  # + "/<nodegroup>.0", ".1", … on the cluster
TAG_VALUE_MAX = 256
UPDATE_ENDED = ("Successful", "Failed", "Cancelled")  # EKS API Update.status

# Conditions EKS node monitoring reports and managed node groups act on (EKS API
# NodeRepairConfigOverrides).
MNG_CONDITIONS = (
    "AcceleratedHardwareReady",
    "KernelReady",
    "StorageReady",
    "NetworkingReady",
    "ContainerRuntimeReady",
)


class NodegroupRepair:
    """Pause and resume a managed node group's repair (see the module docstring)."""

    kind = "nodegroup"

    # -- pause

    def pause_refusal(self, found: Found) -> str | None:
        return None

    def plan_pause(self, ctx: StepContext, found: Found) -> StepPlan:
        eks = _eks(ctx)
        cluster = _eks_cluster(ctx, found.deploy)
        group = found.backend.pool
        nodegroup = _describe_nodegroup(eks, cluster, group)
        prior = _repair_config(nodegroup)
        mode = str(ctx.param("mode") or "off")
        notes = [found.backend.why]
        if mode not in ("off", "override"):
            raise StepFailed(f"mode {mode!r} is not off or override")
        data = {
            "backend": "nodegroup",
            "cluster": cluster,
            "nodegroup": group,
            "arn": nodegroup.get("nodegroupArn", ""),
            "prior": prior,
        }
        ours = nodegroup_record(eks, cluster, group) if not prior.get("enabled") else None
        if ours and ctx.run_id and ours.get("run") == ctx.run_id:
            return StepPlan(
                notes=[f"node group {group} was paused by this run before it stopped", *notes],
                data={
                    **data,
                    "prior": ours["prior"],
                    "wanted": prior,
                    "mode": ours.get("mode", mode),
                },
            )
        if not prior.get("enabled"):
            from mignurse.fleetview import RepairState  # the fleet view loads the diagnosis

            state = RepairState.read(False, nodegroup_record(eks, cluster, group))
            return StepPlan(
                notes=[f"nothing to pause: {state.sentence()} for node group {group}", *notes],
                nothing_to_do=True,
                data={"backend": "nodegroup"},
            )
        wanted, field, note = _paused_config(ctx, found.node, prior, mode)
        notes += [note] if note else []
        notes.append(
            "managed node groups repair by reason and stop above their unhealthy thresholds "
            "on their own (docs/repair.md)"
        )
        return StepPlan(
            changes=[
                Change(
                    f"nodegroup/{cluster}/{group}",
                    field,
                    prior if mode == "override" else True,
                    wanted if mode == "override" else False,
                ),
                Change(
                    f"cluster/{cluster}",
                    f"tags {TAG_PAUSED}/{group}.*",
                    None,
                    "(prior nodeRepairConfig, who, when)",
                ),
            ],
            notes=notes,
            data={**data, "wanted": wanted, "mode": mode},
        )

    def apply_pause(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        eks = _eks(ctx)
        data = plan.data
        cluster, group = data["cluster"], data["nodegroup"]
        current = _describe_nodegroup(eks, cluster, group)
        config_now = _repair_config(current)
        if not _same_config(config_now, data["prior"]):
            found = nodegroup_record(eks, cluster, group) or {}
            if _same_config(config_now, data["wanted"]) and found.get("run") == ctx.run_id:
                return _applied(data, "", found)
            raise StepFailed(
                f"node group {group}'s nodeRepairConfig changed since the plan "
                f"({json.dumps(config_now)}); nothing was changed: plan again"
            )
        record = {
            "prior": data["prior"],
            "mode": data["mode"],
            "by": paused_by(ctx),
            "at": format_time(ctx.client.server_now()),
            "run": ctx.run_id,
        }
        undo_needs = {
            "backend": "nodegroup",
            "cluster": cluster,
            "nodegroup": group,
            "arn": data["arn"],
            "prior": data["prior"],
            "wanted": data["wanted"],
        }
        ctx.intend(f"tag cluster {cluster} with the pause record of node group {group}", undo_needs)
        _write_record(eks, cluster, group, record)
        try:
            ctx.intend(f"update_nodegroup_config of node group {group}: repair {data['mode']}")
            update_id = _update_config(ctx, eks, cluster, group, data["wanted"])
        except StepFailed:
            # Nothing changed: no record may claim a pause (best effort; resume checks it).
            try:
                _drop_record(eks, cluster, group)
            except StepFailed as drop:
                ctx.log(str(drop))
            raise
        ctx.log(
            f"node group {group}: nodeRepairConfig updated"
            + (f" (update {update_id})" if update_id else "")
        )
        return _applied(data, update_id, record)

    def verify_pause(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        return _verify(
            ctx, applied["cluster"], applied["nodegroup"], applied["update"], applied["wanted"]
        )

    def restore(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        _restore(ctx, applied["cluster"], applied["nodegroup"], applied["prior"])

    # -- resume

    def resume_refusal(self, ctx: StepContext, found: Found) -> str | None:
        return None

    def plan_resume(self, ctx: StepContext, found: Found) -> StepPlan:
        eks = _eks(ctx)
        cluster = _eks_cluster(ctx, found.deploy)
        group = found.backend.pool
        nodegroup = _describe_nodegroup(eks, cluster, group)
        record = nodegroup_record(eks, cluster, group)
        if record is None and ctx.prior.get("record") and ctx.prior.get("backend") == "nodegroup":
            data = {k: v for k, v in ctx.prior.items() if k != "labels"}
            return StepPlan(
                notes=[f"node group {group} was restored by this run before it stopped"],
                data=data,
            )
        if record is None:
            from mignurse.fleetview import RepairState

            state = RepairState.read(bool(_repair_config(nodegroup).get("enabled")), None)
            raise StepFailed(
                f"{state.sentence()}: node group {group} has no {TAG_PAUSED}/{group}.* tag "
                f"record on cluster {cluster} (repair was not paused by mignurse), so there is "
                "no prior value to restore"
            )
        current = _repair_config(nodegroup)
        ref = f"nodegroup/{cluster}/{group}"
        notes = [describe_record(record)]
        try:
            members = ctx.client.list(
                NODES, Node.from_api, label_selector=f"{LABEL_NODEGROUP}={group}"
            ).items
        except ClusterError as exc:
            raise cluster_failed("cannot list the node group's nodes", exc) from None
        failing = [
            f"{n.name} ({c.type}={c.reason or c.status})"
            for n in members
            for c in n.conditions
            if c.type in (*MNG_CONDITIONS, "Ready") and c.status != "True"
        ]
        notes.append(
            "nodes the node group may repair once it is on (by its own reason rules): "
            + (", ".join(failing) if failing else "none")
        )
        return StepPlan(
            changes=[
                Change(ref, "nodeRepairConfig", current, record["prior"]),
                Change(
                    f"cluster/{cluster}",
                    f"tags {TAG_PAUSED}/{group}.*",
                    describe_record(record),
                    None,
                ),
            ],
            notes=notes,
            data={
                "backend": "nodegroup",
                "cluster": cluster,
                "nodegroup": group,
                "arn": nodegroup.get("nodegroupArn", ""),
                "prior": record["prior"],
                "current": current,
                "record": record,
            },
        )

    def apply_resume(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        data = plan.data
        undo_needs = {k: v for k, v in data.items() if k != "at_risk"}
        update_id = _restore(ctx, data["cluster"], data["nodegroup"], data["prior"], undo_needs)
        return {**data, "update": update_id}

    def verify_resume(self, ctx: StepContext, applied: Mapping[str, Any]) -> str | None:
        return _verify(
            ctx, applied["cluster"], applied["nodegroup"], applied["update"], applied["prior"]
        )

    def pause_again(self, ctx: StepContext, applied: Mapping[str, Any]) -> None:
        eks = _eks(ctx)
        cluster, group = applied["cluster"], applied["nodegroup"]
        if nodegroup_record(eks, cluster, group) is None:
            ctx.intend(f"tag cluster {cluster} with the pause record of node group {group}")
            _write_record(eks, cluster, group, applied["record"])
        now = _repair_config(_describe_nodegroup(eks, cluster, group))
        if not _same_config(now, applied["current"]):
            ctx.intend(f"update_nodegroup_config of node group {group}: paused again")
            _update_config(ctx, eks, cluster, group, applied["current"])

    # -- undo's read-back

    def not_back(self, ctx: StepContext, applied: Mapping[str, Any], *, paused: bool) -> str | None:
        want = applied["current"] if paused else applied["prior"]
        eks = _eks(ctx)
        cluster, group = applied["cluster"], applied["nodegroup"]
        now = _repair_config(_describe_nodegroup(eks, cluster, group))
        wrong = []
        if not _same_config(now, want):
            wrong.append(f"nodeRepairConfig is {json.dumps(now)}, not {json.dumps(dict(want))}")
        record = nodegroup_record(eks, cluster, group)
        if paused and record is None:
            wrong.append("its pause record is gone")
        if not paused and record is not None and record.get("run") == ctx.run_id:
            wrong.append("the pause record of this run is still there")
        return f"node group {group}: " + "; ".join(wrong) if wrong else None


def _applied(data: Mapping[str, Any], update_id: str, record: Any) -> dict[str, Any]:
    return {
        "backend": "nodegroup",
        "cluster": data["cluster"],
        "nodegroup": data["nodegroup"],
        "arn": data["arn"],
        "update": update_id,
        "prior": data["prior"],
        "wanted": data["wanted"],
        "record": record,
    }


def _paused_config(
    ctx: StepContext, node: Mapping[str, Any] | None, prior: dict[str, Any], mode: str
) -> tuple[dict[str, Any], str, str]:
    """The config a pause in `mode` writes, the field its plan names, and a note ("" when
    none): repair off, or a NoAction override for the condition and reason at hand."""
    if mode != "override":
        return {**prior, "enabled": False}, "nodeRepairConfig.enabled", ""
    condition, reason = _condition_at_hand(ctx, node)
    if not (condition and reason):
        raise StepFailed(
            "mode=override needs the condition and reason at hand: pass --param "
            "condition=AcceleratedHardwareReady --param reason=DCGMError"
        )
    wanted = override_config(prior, condition, reason, int(ctx.param("wait_mins", 10)))
    return (
        wanted,
        f"nodeRepairConfig override {condition}/{reason}",
        f"only {condition}={reason} is left alone (NoAction); other faults are still repaired",
    )


def _restore(
    ctx: StepContext,
    cluster: str,
    group: str,
    prior: Mapping[str, Any],
    undo_needs: Mapping[str, Any] | None = None,
) -> str:
    eks = _eks(ctx)
    current = _describe_nodegroup(eks, cluster, group)
    update_id = ""
    if not _same_config(_repair_config(current), prior):
        ctx.intend(f"restore nodeRepairConfig of node group {group}", undo_needs)
        update_id = _update_config(ctx, eks, cluster, group, prior)
    if nodegroup_record(eks, cluster, group) is not None:
        ctx.intend(f"remove the pause record of node group {group}", undo_needs)
    _drop_record(eks, cluster, group)
    ctx.log(f"node group {group}: nodeRepairConfig restored")
    return update_id


def _eks(ctx: StepContext) -> Any:
    if ctx.aws is None:
        raise StepFailed(
            "no AWS access configured: managed node groups are paused through the EKS API "
            "(set AWS_PROFILE or credentials)"
        )
    return ctx.aws("eks")


def _eks_cluster(ctx: StepContext, deploy: Mapping[str, Any] | None) -> str:
    """The EKS cluster name: --param cluster, else the context's cluster (an EKS ARN ends
    in cluster/NAME), else Karpenter's CLUSTER_NAME."""
    if name := ctx.param("cluster"):
        return str(name)
    if deploy is not None:
        ctrs = deploy["spec"]["template"]["spec"].get("containers") or []
        for ctr in ctrs:
            for env in ctr.get("env") or []:
                if env.get("name") == "CLUSTER_NAME" and env.get("value"):
                    return str(env["value"])
    cluster = ctx.client.info.cluster
    return cluster.rsplit("cluster/", 1)[-1] if "cluster/" in cluster else cluster


def _describe_nodegroup(eks: Any, cluster: str, group: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)[
            "nodegroup"
        ]
    except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
        raise aws_step_failed(
            f"cannot describe node group {group} of cluster {cluster}", exc
        ) from None
    return result


def _repair_config(nodegroup: Mapping[str, Any]) -> dict[str, Any]:
    """The node group's nodeRepairConfig; repair is off (enabled false) when absent."""
    config = nodegroup.get("nodeRepairConfig")
    return dict(config) if isinstance(config, dict) else {"enabled": False}


def split_tag(value: str, group: str) -> dict[str, str]:
    """A long string as numbered tags `TAG_PAUSED/<group>.0`, `.1`, … of ≤256 characters."""
    return {
        f"{TAG_PAUSED}/{group}.{i}": value[at : at + TAG_VALUE_MAX]
        for i, at in enumerate(range(0, max(1, len(value)), TAG_VALUE_MAX))
    }


def _record_keys(tags: Mapping[str, str], group: str) -> list[str]:
    prefix = f"{TAG_PAUSED}/{group}."
    return [k for k in tags if k.startswith(prefix) and k[len(prefix) :].isdigit()]


def joined_tag(tags: Mapping[str, str], group: str) -> str:
    return "".join(
        tags[k] for k in sorted(_record_keys(tags, group), key=lambda k: int(k.rsplit(".", 1)[1]))
    )


def _cluster_tags(eks: Any, cluster: str) -> tuple[str, dict[str, str]]:
    """The EKS cluster's ARN and tags: where node group pause records live (one set of tags
    per node group; a cluster is always taggable, and its tags survive the node group's
    updates)."""
    try:
        found = eks.describe_cluster(name=cluster)["cluster"]
    except Exception as exc:  # noqa: BLE001 - botocore errors carry the one line we show
        raise aws_step_failed(f"cannot describe EKS cluster {cluster}", exc) from None
    return str(found.get("arn") or ""), dict(found.get("tags") or {})


def nodegroup_record(eks: Any, cluster: str, group: str) -> dict[str, Any] | None:
    _arn, tags = _cluster_tags(eks, cluster)
    raw = joined_tag(tags, group)
    if not raw:
        return None
    try:
        record = json_value(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "prior" in record else None


def _write_record(eks: Any, cluster: str, group: str, record: Mapping[str, Any]) -> None:
    arn, tags = _cluster_tags(eks, cluster)
    _drop_record(eks, cluster, group, (arn, tags))
    try:
        eks.tag_resource(
            resourceArn=arn, tags=split_tag(json.dumps(record, separators=(",", ":")), group)
        )
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(
            f"cannot record the prior config of node group {group} on cluster {cluster}", exc
        ) from None


def _drop_record(
    eks: Any, cluster: str, group: str, known: tuple[str, dict[str, str]] | None = None
) -> None:
    arn, tags = known or _cluster_tags(eks, cluster)
    keys = _record_keys(tags, group)
    if not keys:
        return
    try:
        eks.untag_resource(resourceArn=arn, tagKeys=keys)
    except Exception as exc:  # noqa: BLE001
        raise aws_step_failed(
            f"cannot remove the pause record of node group {group} from cluster {cluster}", exc
        ) from None


def override_config(
    prior: Mapping[str, Any], condition: str, reason: str, wait_mins: int
) -> dict[str, Any]:
    """`prior` plus a NoAction override for (condition, reason), replacing one for the same
    pair; all four override fields are required by the API (EKS API NodeRepairConfigOverrides)."""
    config = json.loads(json.dumps(dict(prior)))
    overrides = [
        o
        for o in config.get("nodeRepairConfigOverrides") or []
        if (o.get("nodeMonitoringCondition"), o.get("nodeUnhealthyReason")) != (condition, reason)
    ]
    overrides.append(
        {
            "nodeMonitoringCondition": condition,
            "nodeUnhealthyReason": reason,
            "minRepairWaitTimeMins": max(1, wait_mins),
            "repairAction": "NoAction",
        }
    )
    config["nodeRepairConfigOverrides"] = overrides
    return config


def _condition_at_hand(ctx: StepContext, node: Mapping[str, Any] | None) -> tuple[str, str]:
    condition = str(ctx.param("condition") or "")
    reason = str(ctx.param("reason") or "")
    if condition and reason:
        return condition, reason
    for cond in ((node or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") in MNG_CONDITIONS and cond.get("status") == "False":
            return condition or str(cond["type"]), reason or str(cond.get("reason") or "")
    return condition, reason


def _update_config(
    ctx: StepContext, eks: Any, cluster: str, group: str, config: Mapping[str, Any]
) -> str:
    """update_nodegroup_config; returns the update id ("" when the answer was lost but the
    config is in place)."""
    try:
        response = eks.update_nodegroup_config(
            clusterName=cluster, nodegroupName=group, nodeRepairConfig=dict(config)
        )
    except Exception as exc:  # noqa: BLE001 - settled by reading the node group back
        now = _repair_config(_describe_nodegroup(eks, cluster, group))
        if _same_config(now, config):
            ctx.log(f"update_nodegroup_config's answer was lost ({exc}); read back: in place")
            return ""
        raise aws_step_failed(f"EKS refused update_nodegroup_config for {group}", exc) from None
    return str((response.get("update") or {}).get("id") or "")


def _same_config(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def norm(c: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in c.items() if v not in (None, [], {})}
        out["enabled"] = bool(c.get("enabled"))
        return out

    return norm(a) == norm(b)


def _verify(
    ctx: StepContext, cluster: str, group: str, update_id: str, want: Mapping[str, Any]
) -> str | None:
    eks = _eks(ctx)
    if update_id:
        try:
            update = eks.describe_update(name=cluster, nodegroupName=group, updateId=update_id)
        except Exception as exc:  # noqa: BLE001 - moto and old endpoints lack DescribeUpdate
            ctx.log(
                f"describe_update is not available here ({' '.join(str(exc).split())[:120]}); "
                "verifying through describe_nodegroup instead"
            )
        else:
            status = str((update.get("update") or {}).get("status") or "")

            def finished() -> str | None:
                """None once the update has ended: one that failed or was cancelled does
                not finish later, so there is no use waiting for it."""
                nonlocal status
                if status not in UPDATE_ENDED:
                    status = str(
                        eks.describe_update(name=cluster, nodegroupName=group, updateId=update_id)[
                            "update"
                        ]["status"]
                    )
                return None if status in UPDATE_ENDED else f"update {update_id} is {status}"

            failed = wait_until(ctx, finished, f"update {update_id} of node group {group}")
            if failed:
                return failed
            if status != "Successful":
                return f"update {update_id} ended {status}"
    now = _repair_config(_describe_nodegroup(eks, cluster, group))
    if not _same_config(now, want):
        return (
            f"node group {group} reports nodeRepairConfig {json.dumps(now)}, "
            f"not {json.dumps(dict(want))}"
        )
    return None
