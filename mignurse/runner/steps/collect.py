"""`collect-bundle`: the node's support bundle, as `mignurse collect NODE` writes it.

Decisions:
- It asks the collector's one entry (`mignurse.collect.request.run_collect`) for one node,
  as `mignurse collect NODE` does (same layout, redaction, manifest), through the run's own
  node access (`ctx.shell_for`), so a runbook collects over the same transport its other
  node steps use.
- Harm NONE and `mutates = False`: it reads the node and writes a local file only; no
  confirmation, and nothing to undo.
- An unreachable node is a failed step (the runbook asked for evidence and got none); a
  node reached with some files missing is a success with `ok: false` in the output, so
  the report says so without undoing the cordon before it.
"""

from __future__ import annotations

import stat
from datetime import datetime
from pathlib import Path
from typing import Any

from mignurse.cluster.client import ClusterError
from mignurse.model import Node
from mignurse.runner.step import (
    Action,
    Harm,
    NodeCommand,
    StepContext,
    StepFailed,
    StepPlan,
    action,
    transient,
)
from mignurse.runner.steps.kube import get_node, node_check


def _out_path(ctx: StepContext, now: datetime) -> Path:
    given = ctx.param("out")
    if given:
        return Path(str(given)).expanduser()
    short = ctx.node.split(".", 1)[0]
    return Path(f"mignurse-{short}-{now:%Y%m%dT%H%M%SZ}.tar.gz")


def _wanted(ctx: StepContext) -> bool:
    """A runbook may make collection optional with a bool param `collect` (replace-instance)."""
    return bool(ctx.param("collect", True))


def _reader_note(out: Path) -> list[str]:
    """What a FIFO named as the bundle's path needs: a reader by the time the step writes."""
    try:
        fifo = stat.S_ISFIFO(out.stat().st_mode)
    except OSError:
        return []
    if not fifo:
        return []
    from mignurse.collect.bundle import FIFO_READER_SECONDS

    return [f"{out} is a FIFO: a process must read it when this step comes (it waits "
            f"{FIFO_READER_SECONDS:g} s for one, then fails)"]  # fmt: skip


@action("collect-bundle")
class CollectBundle(Action):
    title = "Collect the node's support bundle"
    mutates = False
    harm = Harm.NONE
    can_undo = False
    retries = 0
    timeout = 900.0

    def check(self, ctx: StepContext) -> str | None:
        if not _wanted(ctx):
            return None
        if ctx.shell_for is None:
            return "no node access configured (pass --transport)"
        from mignurse.collect.run import DEFAULT_SINCE, journal_since_words

        since = str(ctx.param("since", DEFAULT_SINCE) or DEFAULT_SINCE)
        try:
            journal_since_words(since)
        except ValueError as exc:
            return str(exc)
        out = ctx.param("out")
        if out and not Path(str(out)).expanduser().parent.exists():
            return f"cannot write {out}: its folder does not exist"
        return node_check(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        if not _wanted(ctx):
            return StepPlan(notes=["collection skipped (collect=false)"], nothing_to_do=True)
        from mignurse.collect.run import DEFAULT_SINCE

        since = str(ctx.param("since", DEFAULT_SINCE) or DEFAULT_SINCE)
        out = _out_path(ctx, ctx.client.server_now())
        return StepPlan(
            commands=[
                NodeCommand(
                    ctx.node,
                    ("sh", "-s", "<mignurse collector script>"),
                    f"read-only: journals since {since}, nvidia-smi, mig-parted export",
                )
            ],
            notes=[
                f"writes the bundle to {out} (the name's time is when it runs)",
                *_reader_note(out),
            ],
            data={"since": since},
        )

    def apply(self, ctx: StepContext, plan: StepPlan) -> dict[str, Any]:
        assert ctx.shell_for is not None  # check() refused otherwise
        # The collector, its redaction rules and the snapshot load when a bundle is taken,
        # not when a runbook naming this step is listed or checked.
        from mignurse.cluster.snapshot import Snapshot
        from mignurse.collect.events import NOTICE, STARTED, CollectEvent
        from mignurse.collect.request import CollectRequest, run_collect
        from mignurse.collect.run import DEFAULT_SINCE, CollectError

        shell_for = ctx.shell_for
        since = str(plan.data.get("since") or DEFAULT_SINCE)
        raw = get_node(ctx)
        node = Node.from_api(raw)
        try:
            karpenter = ctx.client.api_group_available("karpenter.sh", "v1")
            now = ctx.client.server_now()
        except ClusterError as exc:
            raise StepFailed(str(exc), retryable=transient(exc)) from None
        out = _out_path(ctx, now)

        def progress(event: CollectEvent) -> None:
            if event.kind == STARTED:
                ctx.log(f"collecting {ctx.node} into {event.out}")
            elif event.kind != NOTICE:
                ctx.log(f"{event.node}: {event.text}")

        request = CollectRequest(
            ctx.client,
            out=out,
            nodes=[node],
            snapshot=Snapshot(nodes={node.name: node}, karpenter=karpenter, taken_at=now),
            shell_for=lambda chosen: shell_for(chosen.name),
            since=since,
            concurrency=1,
            node_timeout=max(5.0, ctx.time_left()),
            redact=not bool(ctx.param("no_redact", False)),
            collected_at=now,
        )
        try:
            collected = run_collect(request, progress)
        except (ClusterError, CollectError) as exc:  # CollectError: a full disk, a bad -o
            raise StepFailed(f"collecting {ctx.node} failed: {exc}") from None
        out = collected.out or out
        manifest = collected.manifest or {}
        outcome = (manifest.get("nodes") or {}).get(node.name) or {}
        if outcome.get("rc") is None:
            raise StepFailed(
                f"could not collect {ctx.node}: {outcome.get('error') or 'not reached'} "
                f"(partial bundle at {out})"
            )
        ok = bool(outcome.get("ok"))
        ctx.log(f"bundle: {out} ({outcome.get('files', 0)} files{'' if ok else ', incomplete'})")
        return {"bundle": str(out), "ok": ok, "files": int(outcome.get("files") or 0)}

    def verify(self, ctx: StepContext, plan: StepPlan, applied: dict[str, Any]) -> str | None:
        if not Path(str(applied.get("bundle", ""))).is_file():
            return f"the bundle {applied.get('bundle')} was not written"
        return None
