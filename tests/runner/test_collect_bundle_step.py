"""`collect-bundle` as an on-call engineer meets it before a node is replaced
(mignurse/runner/steps/collect.py): refused before anything runs when it could not collect, a
bundle named after the node and the cluster's clock, redacted unless asked otherwise, and a
node that cannot be reached is a failed step, not an empty success."""

from __future__ import annotations

import json
import os
import re
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from mignurse.model import Node
from mignurse.nodeaccess.base import CommandResult
from mignurse.runner.step import StepContext, StepFailed, StepPlan
from mignurse.runner.steps.collect import CollectBundle
from mignurse.sim.nodes import sandbox_shells

from .enginehelpers import Cluster

Make = Callable[..., Cluster]


def collecting(c: Cluster, node: str, sandboxes: Path, **params: Any) -> StepContext:
    shells = sandbox_shells(c.client, sandboxes)
    return c.ctx(node, params=params, shell_for=lambda name: shells(Node.from_api(c.node(name))))


def manifest_of(bundle: Path) -> dict[str, Any]:
    with tarfile.open(bundle) as tar:
        (name,) = [n for n in tar.getnames() if n.count("/") == 1 and n.endswith("/manifest.json")]
        member = tar.extractfile(name)
        assert member is not None
        loaded: dict[str, Any] = json.load(member)
    return loaded


def test_a_bundle_is_refused_before_the_run_without_a_way_into_the_node(
    cluster_for: Make,
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    assert CollectBundle().check(c.ctx(node)) == "no node access configured (pass --transport)"


def test_a_window_journalctl_cannot_take_is_refused_before_the_run(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    ctx = collecting(c, node, tmp_path / "sandboxes", since="yesterday")
    assert CollectBundle().check(ctx) == "'yesterday' is not a window like 90m, 6h or 2d"


def test_a_bundle_into_a_folder_that_does_not_exist_is_refused_before_the_run(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    out = tmp_path / "no-such-folder" / "bundle.tar.gz"
    ctx = collecting(c, node, tmp_path / "sandboxes", out=str(out))
    assert CollectBundle().check(ctx) == f"cannot write {out}: its folder does not exist"


def test_a_bundle_into_a_fifo_says_in_the_plan_that_a_reader_must_be_there(
    cluster_for: Make, tmp_path: Path
) -> None:
    """The plan is shown before the cordon; the FIFO is only opened at the step."""
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    plan = CollectBundle().plan(collecting(c, node, tmp_path / "sandboxes", out=str(fifo)))
    assert plan.notes[1] == (
        f"{fifo} is a FIFO: a process must read it when this step comes (it waits 30 s for "
        "one, then fails)"
    )


def test_the_default_bundle_is_named_after_the_node_and_the_clusters_clock(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    plan = CollectBundle().plan(collecting(c, node, tmp_path / "sandboxes"))
    short = node.split(".")[0]
    (note,) = plan.notes
    named = re.fullmatch(
        rf"writes the bundle to mignurse-{short}-(\d{{8}}T\d{{6}}Z)\.tar\.gz \(the name's time is "
        r"when it runs\)",
        note,
    )
    assert named, note
    assert plan.commands[0].why == "read-only: journals since 6h, nvidia-smi, mig-parted export"


def test_the_bundle_holds_the_journal_window_asked_for_and_is_redacted(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    out = tmp_path / "bundle.tar.gz"
    ctx = collecting(c, node, tmp_path / "sandboxes", since="2h", out=str(out))
    step = CollectBundle()
    plan = StepPlan.from_json(step.plan(ctx).to_json())
    assert "journals since 2h" in plan.commands[0].why
    step.apply(ctx, plan)
    manifest = manifest_of(out)
    assert manifest["window"] == {"since": "2 hours ago"}
    assert manifest["redaction"]["enabled"] is True


def test_no_redact_leaves_the_bundle_as_the_node_wrote_it(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    out = tmp_path / "bundle.tar.gz"
    ctx = collecting(c, node, tmp_path / "sandboxes", out=str(out), no_redact=True)
    step = CollectBundle()
    step.apply(ctx, step.plan(ctx))
    assert manifest_of(out)["redaction"]["enabled"] is False


class Answering:
    """A way into the node that answers as told: `rc` None is a node never reached."""

    transport = "ssm"

    def __init__(self, node: str, rc: int | None, error: str = "") -> None:
        self.node = node
        self.rc = rc
        self.error = error

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        return CommandResult(self.node, self.transport, self.rc, 0.1, error=self.error)


def test_a_node_that_cannot_be_reached_fails_the_step_naming_why(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    out = tmp_path / "bundle.tar.gz"
    offline = "SSM agent is not online (ConnectionLost)"
    ctx = c.ctx(
        node, params={"out": str(out)}, shell_for=lambda name: Answering(name, None, offline)
    )
    step = CollectBundle()
    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, step.plan(ctx))
    assert str(failed.value) == f"could not collect {node}: {offline} (partial bundle at {out})"


def test_a_node_that_answered_with_no_files_is_a_bundle_of_none_from_it(
    cluster_for: Make, tmp_path: Path
) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    out = tmp_path / "bundle.tar.gz"
    ctx = c.ctx(node, params={"out": str(out)}, shell_for=lambda name: Answering(name, 0))
    step = CollectBundle()
    plan = step.plan(ctx)
    applied = step.apply(ctx, plan)
    assert applied["bundle"] == str(out) and applied["files"] == 0
    assert step.verify(ctx, plan, applied) is None  # the cluster's part is there: a bundle


def test_a_bundle_gone_before_verify_is_said(cluster_for: Make, tmp_path: Path) -> None:
    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    gone = tmp_path / "moved-away.tar.gz"
    said = CollectBundle().verify(c.ctx(node), StepPlan(), {"bundle": str(gone)})
    assert said == f"the bundle {gone} was not written"


def test_a_full_disk_fails_the_step_in_one_line_and_leaves_no_bundle(
    cluster_for: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from mignurse.collect import bundle as bundle_module

    c = cluster_for()
    node = c.nodes("gpu-train")[0]
    folder = tmp_path / "bundles"
    folder.mkdir()
    out = folder / "bundle.tar.gz"
    real_write = os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder / ".bundle.tar.gz.")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(bundle_module.os, "write", full)
    ctx = c.ctx(node, params={"out": str(out)}, shell_for=lambda name: Answering(name, 0))
    step = CollectBundle()
    with pytest.raises(StepFailed) as failed:
        step.apply(ctx, step.plan(ctx))
    assert str(failed.value).startswith(f"collecting {node} failed: no space left on {folder}")
    assert list(folder.iterdir()) == []
