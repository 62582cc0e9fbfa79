"""Runbooks in the app, through Textual's Pilot against the simulator: the picker, the
params, the plan, the tiered confirmation, the run and its report, cancel and undo, the
audit view, and the keys read-only hides.

The simulator runs on a manual clock (speed 0); where a step waits for the cluster (a
rollout), `clock_running` moves the simulated time forward while the run waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, OptionList, RichLog, Static

from mignurse.cluster.client import NODEPOOLS, ClusterClient
from mignurse.collect.access import Access
from mignurse.session import LiveSource
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.nodes import sandbox_shells
from mignurse.tui.app import MigNurseApp, make_app
from mignurse.tui.appstate import NODES
from mignurse.tui.screens.audit import AuditScreen
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.picker import RunbookPicker
from mignurse.tui.screens.plan import PlanScreen
from mignurse.tui.screens.run import RunScreen
from mignurse.tui.screens.run_steps import RunStepsScreen
from mignurse.tui.selection import Selection

from .test_fleet_app import footer_keys
from .test_node_screen import static_text, table_rows, until

SIM_ACCESS = Access(sandbox_shells=sandbox_shells)  # the simulator's node sandboxes

CLUSTER = "ml-prod-usw2"  # the dcgm-repair-loop scenario's cluster: the typed word


@contextlib.asynccontextmanager
async def clock_running(sim: SimCluster, step: float = 5.0) -> AsyncIterator[None]:
    """Move the simulated clock while the body waits (rollouts need time to pass)."""

    async def tick() -> None:
        while True:
            sim.advance(step)
            await asyncio.sleep(0.05)

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def node_obj(sim: SimCluster, name: str) -> dict[str, Any]:
    return next(n for n in sim.objects("nodes") if n["metadata"]["name"] == name)


def gate_string(sim: SimCluster) -> str:
    (deploy,) = [d for d in sim.objects("deployments") if d["metadata"]["name"] == "karpenter"]
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    (value,) = [e["value"] for e in container.get("env", []) if e["name"] == "FEATURE_GATES"]
    return str(value)


def screen_text(app: MigNurseApp, selector: str = "Static") -> str:
    return "\n".join(static_text(w) for w in app.screen.query(selector) if isinstance(w, Static))


async def highlight(app: MigNurseApp, name: str) -> None:
    app.jump_to_node(name)
    await until(lambda: app.view == NODES and app.highlighted_node() == name)
    app.query_one("#nodes", DataTable).focus()


async def finding_node(app: MigNurseApp) -> tuple[str, list[str]]:
    """The node under the repair clock that the findings name (the repair-loop finding also
    names nodes already replaced), and the runbooks its findings suggest."""
    await until(lambda: app.diagnosis is not None and bool(app.diagnosis.findings))
    assert app.diagnosis is not None
    state = app.source.state
    names = sorted(
        n
        for f in app.diagnosis.findings
        if f.id in ("node-repair-loop", "accelerated-hardware-not-ready")
        for n in f.nodes
        if state.node(n) is not None
    )
    findings = tuple(app.diagnosis.findings)
    return names[0], Selection(nodes=(names[0],), findings=findings).suggested_runbooks()


async def confirm(app: MigNurseApp, pilot: Pilot[Any], answer: str) -> None:
    """Answer the confirmation modal: a key for y/N, or the typed word for high harm."""
    await until(lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ConfirmScreen)
    if len(answer) == 1:
        await pilot.press(answer)
        return
    screen.query_one("#confirm-word", Input).value = answer
    await pilot.press("enter")


async def run_done(app: MigNurseApp, timeout: float = 30.0) -> RunScreen:
    await until(lambda: isinstance(app.screen, RunScreen) and not app.screen.running, timeout)
    screen = app.screen
    assert isinstance(screen, RunScreen)
    return screen


async def params_ready(app: MigNurseApp) -> ParamsScreen:
    await until(lambda: isinstance(app.screen, ParamsScreen) and bool(app.screen.query(Input)))
    screen = app.screen
    assert isinstance(screen, ParamsScreen)
    return screen


async def plan_ready(app: MigNurseApp) -> PlanScreen:
    await until(lambda: isinstance(app.screen, PlanScreen) and app.screen.ready)
    screen = app.screen
    assert isinstance(screen, PlanScreen)
    return screen


async def test_picker_labels_the_suggested_runbooks_and_says_why_the_others_cannot_run(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    _sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        name, suggested = await finding_node(app)
        assert suggested[0] == "pause-node-repair"
        await highlight(app, name)
        assert "R" in footer_keys(app) and "x" in footer_keys(app)
        await pilot.press("R")
        await until(lambda: isinstance(app.screen, RunbookPicker) and not app.screen.checking)
        options = app.screen.query_one(OptionList)
        shown = [options.get_option_at_index(i) for i in range(options.option_count)]
        prompts = {str(o.id): (str(o.prompt), o.disabled) for o in shown}
        assert [o.id for o in shown] == sorted(prompts)  # every runbook, always this order
        assert options.highlighted_option is not None
        assert options.highlighted_option.id == "pause-node-repair"  # the most urgent
        for runbook in suggested:
            assert prompts[runbook][0].startswith(f"suggested {runbook}"), prompts[runbook]
        assert "Pause node auto-repair" in prompts["pause-node-repair"][0]
        assert not prompts["cordon"][0].startswith("suggested") and not prompts["cordon"][1]
        # nothing to undo on a schedulable node, nothing to resume while repair is on
        assert prompts["uncordon"][1] and "not cordoned" in prompts["uncordon"][0]
        resume = prompts["resume-node-repair"]
        assert resume[1] and "node repair is on: no pause of mignurse's to resume" in resume[0]
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, RunbookPicker))


async def test_plan_screen_lists_the_changes_and_esc_changes_nothing(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        app.start_runbook("cordon-and-collect")
        await params_ready(app)
        since = app.screen.query_one("#param-since", Input)
        assert since.value == "6h"  # the default, filled in
        since.value = "six hours"
        since.focus()
        await pilot.press("enter")
        await until(lambda: "not a duration" in screen_text(app, "#param-error"))
        since.value = "2h"
        await pilot.press("enter")
        plan = await plan_ready(app)
        text = screen_text(app)
        assert f"change node/{name}: spec.unschedulable False → True" in text
        assert "annotation mignurse.io/cordoned-by (absent) →" in text
        assert "enter runs it (low harm: confirm with y/N)" in text
        assert plan.plans[0].book.name == "cordon-and-collect"
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, PlanScreen))
    assert not node_obj(sim, name)["spec"].get("unschedulable")


async def test_x_cordons_after_y_and_uncordon_runs_from_the_plan(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        await pilot.press("x")
        await confirm(app, pilot, "n")  # N is the default: nothing changes
        screen = await run_done(app)
        assert "declined" in screen.report
        assert not node_obj(sim, name)["spec"].get("unschedulable")
        await pilot.press("escape")

        await until(lambda: app.screen is app.screen_stack[0])
        await pilot.press("x")
        await confirm(app, pilot, "y")
        screen = await run_done(app)
        assert node_obj(sim, name)["spec"].get("unschedulable") is True
        marker = json.loads(
            node_obj(sim, name)["metadata"]["annotations"]["mignurse.io/cordoned-by"]
        )
        assert marker["run"] == screen.results[0].run_id
        assert f"run {screen.results[0].run_id} ({name.split('.')[0]}): succeeded" in screen.report
        assert "cordon: verified" in screen.report
        assert "Ready, cordoned" in screen.report or "NotReady, cordoned" in screen.report
        assert "run uncordon" in screen.report  # what to do next
        await pilot.press("escape")

        await until(lambda: app.screen is app.screen_stack[0])
        app.start_runbook("uncordon")
        await plan_ready(app)
        assert f"change node/{name}: spec.unschedulable True → False" in screen_text(app)
        await pilot.press("enter")
        await confirm(app, pilot, "y")
        screen = await run_done(app)
        assert "succeeded" in screen.report, screen.report
    node = node_obj(sim, name)
    assert not node["spec"].get("unschedulable")
    assert "mignurse.io/cordoned-by" not in node["metadata"].get("annotations", {})


async def test_x_on_marked_nodes_plans_both_and_asks_once(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.refreshes > 0)
        app.open_pool("gpu-inference")
        await until(lambda: len(table_rows(app)) >= 2 and app.diagnosis is not None)
        await pilot.pause(0.6)  # a refresh after the diagnosis: rows sorted by their badges
        app.query_one("#nodes", DataTable).focus()
        await pilot.press("space", "space")
        await until(lambda: len(app.marks) == 2)
        await pilot.press("x")
        await until(lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        asked = app.screen
        assert isinstance(asked, ConfirmScreen)
        assert all(f"cordon on node {n} in cluster " in asked.plan_text for n in app.marks)
        await confirm(app, pilot, "y")
        screen = await run_done(app)
        assert [r.status for r in screen.results] == ["succeeded", "succeeded"], screen.report
    assert {
        n["metadata"]["name"] for n in sim.objects("nodes") if n["spec"].get("unschedulable")
    } == set(app.marks)


async def test_high_harm_refuses_a_wrong_typed_word(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    before = gate_string(sim)
    async with app.run_test(size=(160, 45)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        app.start_runbook("pause-node-repair")
        await params_ready(app)
        assert app.screen.query_one("#param-node", Input).value == name
        await pilot.press("enter")
        await plan_ready(app)
        assert f"confirm by typing {CLUSTER}" in screen_text(app)
        await pilot.press("enter")
        await confirm(app, pilot, CLUSTER.upper())
        # A typo is said, and the prompt stays for another try; nothing has run.
        await until(lambda: "is not ml-prod-usw2" in screen_text(app, "#confirm-error"))
        asked = app.screen
        assert isinstance(asked, ConfirmScreen)
        word = asked.query_one("#confirm-word", Input)
        assert word.value == "" and word.placeholder != CLUSTER
        await pilot.press("escape")  # esc refuses
        screen = await run_done(app)
        assert "declined" in screen.report
    assert gate_string(sim) == before and sim.loops.repair_enabled is True


async def test_pause_from_the_finding_stops_the_loop_and_resume_restores_the_gate(
    repair_loop: tuple[SimCluster, MigNurseApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause/resume promise in the app: pause from the finding's node, no replacement
    while paused, resume lists the nodes at risk and puts back the exact gate string."""
    sim, app = repair_loop
    prior = gate_string(sim)
    source = app.source
    assert isinstance(source, LiveSource)
    async with app.run_test(size=(160, 45)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        await pilot.press("R")
        await until(lambda: isinstance(app.screen, RunbookPicker))
        await pilot.press("enter")  # the first suggestion: pause-node-repair
        await params_ready(app)
        await pilot.press("enter")  # the defaults, and the finding's node
        await plan_ready(app)
        assert "NodeRepair=true" in screen_text(app) and "NodeRepair=false" in screen_text(app)
        # The app's next reads of the Deployment stall: what it read before the pause is all
        # it holds. That is stale once the run is done, so resume is not refused on it.
        with monkeypatch.context() as stalled:
            stalled.setattr(source, "_reread_karpenter", lambda: None)
            await pilot.press("enter")
            await confirm(app, pilot, CLUSTER)
            async with clock_running(sim):
                screen = await run_done(app, timeout=60)
            assert app.selection().repair is None
            assert app.selection().why_not("resume-node-repair") == ""
        assert screen.results[0].status == "succeeded", screen.report
        assert "pause: verified" in screen.report
        assert "run resume-node-repair" in screen.report
        assert sim.loops.repair_enabled is False
        await pilot.press("escape")

        claims = {c["metadata"]["name"] for c in sim.objects("nodeclaims")}
        sim.advance(30 * 60)  # well past the 10-minute toleration
        assert {c["metadata"]["name"] for c in sim.objects("nodeclaims")} <= claims

        await until(lambda: app.screen is app.screen_stack[0])
        await until(lambda: getattr(app.selection().repair, "state", None) == "paused")
        await pilot.press("R")
        await until(lambda: isinstance(app.screen, RunbookPicker))
        app.screen.dismiss("resume-node-repair")
        await params_ready(app)
        await pilot.press("enter")
        await plan_ready(app)
        plan = screen_text(app)
        assert "replaced at once:" in plan, plan
        assert "paused by" in plan
        await pilot.press("enter")
        await confirm(app, pilot, CLUSTER)
        async with clock_running(sim):
            screen = await run_done(app, timeout=60)
        assert screen.results[0].status == "succeeded", screen.report
        await pilot.press("escape")
        assert gate_string(sim) == prior  # byte for byte

        await until(lambda: app.screen is app.screen_stack[0])
        await pilot.press("A")
        await until(lambda: isinstance(app.screen, AuditScreen))
        audit = app.screen
        assert isinstance(audit, AuditScreen)
        rows = audit.rows()
        assert [r[2] for r in rows[:2]] == ["resume-node-repair", "pause-node-repair"], rows
        assert all(r[4] == "succeeded" and r[3] == CLUSTER for r in rows[:2])
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, RunStepsScreen))
        assert "resume (resume-node-repair): verified" in screen_text(app)


async def test_ctrl_c_interrupts_and_undo_puts_the_gate_back(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    sim, app = repair_loop
    prior = gate_string(sim)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.refreshes > 0)
        app.open_pool("gpu-inference")
        await until(lambda: bool(table_rows(app)))
        app.start_runbook("pause-node-repair")
        await params_ready(app)
        await pilot.press("enter")
        await plan_ready(app)
        await pilot.press("enter")
        await confirm(app, pilot, CLUSTER)
        # The clock stands still, so the rollout never finishes: the step waits.
        await until(lambda: _log_has(app, "waiting"))
        await pilot.press("ctrl+c")
        screen = await run_done(app)
        assert screen.results[0].status == "interrupted"
        await until(lambda: bool(screen.followups))  # the engine judged what can follow
        assert "r resumes" in screen.report and "u undoes" in screen.report
        assert screen.step_states()[f"{screen.results[0].run_id}/pause"] != "running"
        assert "NodeRepair=false" in gate_string(sim)  # nothing was undone on its own
        assert "u" in footer_keys(app) and "r" in footer_keys(app)
        await pilot.press("u")
        await confirm(app, pilot, CLUSTER)
        screen = await run_done(app)
        assert screen.results[0].status == "undone", screen.report
    assert gate_string(sim) == prior


def _log_has(app: MigNurseApp, word: str) -> bool:
    from textual.widgets import RichLog

    logs = list(app.screen.query(RichLog))
    return any(word in line.text for log in logs for line in log.lines)


async def test_read_only_hides_runbooks_and_cordon(tmp_path: Path, state_home: Path) -> None:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        source = LiveSource(
            client, simulated="dcgm-repair-loop ×0", clock=sim.now, access=SIM_ACCESS
        )
        source.check()
        app = make_app(source, read_only=True)
        async with app.run_test(size=(160, 45)) as pilot:
            await until(lambda: app.refreshes > 0)
            app.open_pool("gpu-inference")
            await until(lambda: bool(table_rows(app)))
            app.query_one("#nodes", DataTable).focus()
            assert "A" in app.screen.active_bindings  # listed in `?`, out of the footer
            shown = app.screen.active_bindings  # dimmed keys are in it too: these must not be
            assert "R" not in shown and "x" not in shown
            assert app.runbook_names() == []
            await pilot.press("x", "R")
            await pilot.pause()
            assert app.screen is app.screen_stack[0]
            app.start_runbook("cordon")  # the palette's way in refuses too
            await pilot.pause()
            assert app.screen is app.screen_stack[0]
        assert not any(n["spec"].get("unschedulable") for n in sim.objects("nodes"))
    finally:
        sim.stop()


async def test_high_harm_prompt_is_on_screen_at_80x24_and_takes_the_cluster_and_short_name(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    """The plan scrolls above a pinned prompt; after the cluster's name, the node's name as
    the table shows it is enough where only one node has it; no placeholder reads like the
    answer."""
    sim, app = repair_loop
    async with app.run_test(size=(80, 24)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        app.start_runbook("replace-instance")
        params = await params_ready(app)
        params.query_one("#param-collect", Input).value = "false"
        await pilot.press("enter")
        await plan_ready(app)
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        await pilot.pause(0.3)
        asked = app.screen
        assert isinstance(asked, ConfirmScreen)
        word = asked.query_one("#confirm-word", Input)
        visible = asked._compositor.visible_widgets
        assert word in visible and word.region.bottom <= 24 and word.has_focus
        assert asked.query_one("#confirm-harm") in visible  # the harm line too
        assert "cannot be undone" in screen_text(app, "#confirm-harm")
        short = name.split(".")[0]
        assert f"{CLUSTER}/{short}" in screen_text(app)  # the cluster's name, then the node's
        assert word.placeholder not in (name, short)
        await pilot.press(*short, "enter")  # the node alone does not say which cluster
        await until(lambda: f"is not {CLUSTER}/{short}" in screen_text(app, "#confirm-error"))
        assert app.screen is asked and not node_obj(sim, name)["spec"].get("unschedulable")
        await pilot.press(*f"{CLUSTER}/{short}", "enter")  # the node as the table shows it
        await until(lambda: isinstance(app.screen, RunScreen))
        # it ran: the node is cordoned first (the log names every step before they run)
        await until(lambda: node_obj(sim, name)["spec"].get("unschedulable") is True, timeout=30)
        log = app.screen.query_one("#run-output", RichLog)  # it follows its newest line
        await until(lambda: log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y)


async def test_undo_is_not_offered_when_the_node_it_would_restore_is_gone(
    repair_loop: tuple[SimCluster, MigNurseApp], tmp_path: Path
) -> None:
    """An interrupted replace-instance: the engine says undo cannot run (its node is being
    deleted), so `u` is not offered and the report says why."""
    sim, app = repair_loop
    # The pool is at its node limit, so Karpenter launches the replacement only once the node
    # is deleting (not for the pod the drain evicts): the run is still waiting for it at Ctrl-C.
    live = [c for c in sim.objects("nodeclaims") if c["metadata"]["name"].startswith("gpu-inf")]
    admin = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "admin")))
    limit = {"spec": {"limits": {"nodes": str(len(live))}}}
    admin.patch(NODEPOOLS, "gpu-inference", limit)
    async with app.run_test(size=(160, 45)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        app.start_runbook("replace-instance")
        params = await params_ready(app)
        params.query_one("#param-collect", Input).value = "false"
        await pilot.press("enter")
        await plan_ready(app)
        await pilot.press("enter")
        await confirm(app, pilot, f"{CLUSTER}/{name}")
        running = app.screen
        assert isinstance(running, RunScreen)

        def waiting() -> bool:  # past the NodeClaim delete: the node it would restore is going
            states = running.step_states()
            return any(
                k.endswith("/wait-replacement") and v == "running" for k, v in states.items()
            )

        def drained() -> bool:
            states = running.step_states()
            return any(k.endswith("/drain") and v == "verified" for k, v in states.items())

        # The clock moves only until the drain is done: the replacement Karpenter launched for
        # the evicted pod cannot come up, however slow the machine, before Ctrl-C lands.
        deadline = time.monotonic() + 60
        while not drained():
            assert time.monotonic() < deadline, "the drain never finished"
            sim.advance(2.0)
            await asyncio.sleep(0.05)
        await until(waiting, 60)
        await pilot.press("ctrl+c")
        screen = await run_done(app)
        assert screen.results[0].status == "interrupted", screen.report
        await until(lambda: bool(screen.followups))
        assert "u" not in footer_keys(app), screen.report
        assert "cannot undo:" in screen.report, screen.report
        assert "running" not in screen.step_states().values()


async def test_a_pause_at_120_columns_reads_one_clock_and_says_how_it_is_reversed(
    repair_loop: tuple[SimCluster, MigNurseApp],
) -> None:
    """The harm line names the runbook that reverses a pause; back on the fleet, PAUSED
    leaves KIND and the status line whole at 120 columns, and its time is the one the audit
    log wrote (the demo's clock, not the laptop's)."""
    from mignurse.runner.audit import read_audit
    from mignurse.tui.appstate import FLEET

    from .test_fleet_app import fleet_rows

    sim, app = repair_loop
    async with app.run_test(size=(120, 40)) as pilot:
        name, _ = await finding_node(app)
        await highlight(app, name)
        app.start_runbook("pause-node-repair")
        await params_ready(app)
        await pilot.press("enter")
        await plan_ready(app)
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        harm = screen_text(app, "#confirm-harm")
        assert "HIGH HARM · reversible: resume-node-repair puts it back" in harm, harm
        assert "hard to reverse" not in harm and "cannot be undone" not in harm
        await confirm(app, pilot, CLUSTER)
        async with clock_running(sim):
            screen = await run_done(app, timeout=60)
        assert screen.results[0].status == "succeeded", screen.report
        run_id = screen.results[0].run_id
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])
        await pilot.press("escape")
        await until(lambda: app.view == FLEET)
        app.action_refresh_now()
        await until(lambda: fleet_rows(app)[0][4].startswith("PAUSED since"), timeout=30)
        fleet = app.query_one(f"#{FLEET}", DataTable)
        assert "KIND" in [str(c.value) for c in fleet.columns]
        assert fleet.virtual_size.width <= fleet.size.width
        status = static_text(app.query_one("#status", Static)).strip()
        assert "Karpenter on" in status and "as of" in status and "…" not in status
        since = fleet_rows(app)[0][4].removeprefix("PAUSED since ").removesuffix("Z")
        stamps = [e["ts"][11:16] for e in read_audit() if e.get("run") == run_id]
        assert stamps[0] <= since <= stamps[-1], (since, stamps)


def test_the_apps_runbooks_reach_aws_with_its_profile_and_region(
    tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mignurse --profile P --region R`: a runbook the app starts builds its AWS clients
    from that profile and region (moto answers for the region the request was signed in)."""
    from moto.server import ThreadedMotoServer

    from mignurse.cli import build_parser
    from mignurse.cli.common import access_for
    from mignurse.tui.launcher import RunRequest, launcher_for

    config = tmp_path / "aws-config"
    config.write_text(
        "[profile oncall]\nregion = us-east-2\n"
        "aws_access_key_id = AKIAONCALLEXAMPLE\naws_secret_access_key = not-a-secret\n"
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # what a profile-less run would use
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        host, port = server.get_host_and_port()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        client = ClusterClient.connect(kubeconfig=str(sim.write_kubeconfig(tmp_path / "config")))
        args = build_parser().parse_args(["--profile", "oncall", "--region", "eu-central-1"])
        source = LiveSource(
            client, simulated="dcgm-repair-loop ×0", clock=sim.now, access=access_for(args)
        )
        source.check()
        launcher = launcher_for(source)
        node = next(n["metadata"]["name"] for n in sim.objects("nodes"))
        runner = launcher.runner(RunRequest(launcher.books()["replace-instance"], {"node": node}))
        assert runner.aws is not None
        ec2 = runner.aws("ec2")
        assert ec2.meta.region_name == "eu-central-1"  # --region over the profile's own
        assert ec2._request_signer._credentials.access_key == "AKIAONCALLEXAMPLE"
        zones = ec2.describe_availability_zones()["AvailabilityZones"]
        assert zones and {z["RegionName"] for z in zones} == {"eu-central-1"}
    finally:
        sim.stop()
        server.stop()


async def test_the_audit_screen_names_a_planted_link_instead_of_crashing(
    repair_loop: tuple[SimCluster, MigNurseApp], state_home: Path, tmp_path: Path
) -> None:
    _sim, app = repair_loop
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("")
    folder = state_home / "mignurse"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.jsonl").unlink(missing_ok=True)
    (folder / "audit.jsonl").symlink_to(outside)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.refreshes > 0)
        await pilot.press("A")
        await until(lambda: isinstance(app.screen, AuditScreen))
        await until(lambda: "is a symlink" in screen_text(app))
        assert "audit.jsonl" in screen_text(app)
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])
    assert outside.read_text() == ""
