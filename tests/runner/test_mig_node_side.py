"""What the MIG steps run on the node and how they read its answers (mignurse/runner/steps/mig/
nodecmd.py, layout.py, preflight.py): mig-parted's fatal line as the reason, the order of the
mig-parted calls and where each failure stops the step, the GPUs recorded before the first
write and what undo compares them with, GPU processes left on the node, and the host
nvidia-mig-manager.service only asked about. A scripted way into the node answers each command
as the real tools do (NVIDIA/mig-parted v0.15.0's logrus lines, nvidia-smi's CSV), in process.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import pytest

from mignurse.model import (
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    PROBE_ERROR,
    GpuMigState,
    MigDevice,
    MigState,
)
from mignurse.nodeaccess.base import CommandResult
from mignurse.runner.engine import Runner
from mignurse.runner.step import Cancelled, StepContext, StepFailed, StepPlan
from mignurse.runner.steps.mig.cdi import MANAGEMENT_SPEC
from mignurse.runner.steps.mig.layout import (
    ApplyMigLayout,
    VerifyMigLayout,
    compare_layout,
    gpu_record,
    read_mig_state,
)
from mignurse.runner.steps.mig.nodecmd import (
    AUDIT_OUTPUT_CHARS,
    NodeOutput,
    run_argv,
    run_script,
    shell_words,
)
from mignurse.runner.steps.mig.preflight import (
    ConfirmNoGpuProcesses,
    MigPreflight,
    gpu_processes,
)
from mignurse.sim.nodes import NodeSandbox, SandboxShell

from .enginehelpers import Cluster
from .interrupthelpers import book, shells
from .mighelpers import ready_mig_node

NODE = "ip-10-0-7-21.us-west-2.compute.internal"
CONFIG = "all-1g.10gb"
# What NVIDIA/mig-parted v0.15.0 prints through logrus when it gives up (cmd/nvidia-mig-parted).
FATAL = (
    'time="2026-11-20T12:00:01Z" level=debug msg="Walking MigConfig for (devices=all)"\n'
    'time="2026-11-20T12:00:02Z" level=fatal msg="error setting MIG mode: '
    'device \\"GPU 3\\" is in use"\n'
)


@dataclass
class Reply:
    rc: int | None = 0
    stdout: str = ""
    stderr: str = ""
    error: str = ""


@dataclass
class ScriptedNode:
    """A way into one node: each script gets the reply of the first key it contains (a list
    of replies is used up in order, its last one kept); everything it ran is kept."""

    replies: dict[str, Reply | list[Reply]] = field(default_factory=dict)
    ran: list[tuple[str, float]] = field(default_factory=list)
    transport: str = "sim"
    node: str = NODE

    def run(
        self, script: str, *, timeout: float, stdout: BinaryIO, cancel: Any = None
    ) -> CommandResult:
        self.ran.append((script, timeout))
        reply = Reply()
        for key, answer in self.replies.items():
            if key in script:
                if isinstance(answer, list):
                    reply = answer.pop(0) if len(answer) > 1 else answer[0]
                else:
                    reply = answer
                break
        stdout.write(reply.stdout.encode())
        return CommandResult(
            self.node, self.transport, reply.rc, 0.01, error=reply.error, stderr_tail=reply.stderr
        )

    def scripts(self) -> list[str]:
        """Each script without the preamble every one of them starts with."""
        return [script.split("\n", 1)[1].strip() for script, _timeout in self.ran]


@dataclass
class Seen:
    """What a step told the operator and wrote to the audit log."""

    log: list[str] = field(default_factory=list)
    journal: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [fields for event, fields in self.journal if event == kind]


def node_ctx(shell: ScriptedNode | SandboxShell, seen: Seen, **kw: Any) -> StepContext:
    """A step context whose only way out is the node: no cluster is read by these steps."""
    return StepContext(
        client=cast(Any, None),
        params={"node": NODE},
        shell_for=lambda name: shell,
        log=seen.log.append,
        journal=lambda event, fields: seen.journal.append((event, json.loads(json.dumps(fields)))),
        run_id="run-1",
        **kw,
    )


def gpu(index: int, mode: str = MIG_ENABLED, *profiles: str) -> GpuMigState:
    uuid = f"GPU-{index:08d}-0000-0000-0000-000000000000"
    devices = tuple(
        MigDevice(f"MIG-{index}-{n}", n + 1, 0, profile) for n, profile in enumerate(profiles)
    )
    return GpuMigState(index, "NVIDIA H100 80GB HBM3", uuid, "", mode, mode, devices)


def probe_json(*gpus: GpuMigState, status: str = "ok", detail: str = "") -> str:
    return json.dumps(MigState("nvml", status, detail, "570.172.08", gpus).to_json())


SEVEN = ("1g.10gb",) * 7


# -- nodecmd: the reason, the words, the audit ---------------------------------------------


def test_a_mig_parted_failure_is_told_by_its_fatal_line_unescaped() -> None:
    out = NodeOutput(1, "", FATAL)
    assert out.reason() == 'error setting MIG mode: device "GPU 3" is in use'
    two = FATAL + 'time="x" level=fatal msg="the last one"\n'
    assert NodeOutput(1, "", two).reason() == "the last one"


def test_without_a_fatal_line_the_reason_is_the_last_line_printed() -> None:
    assert NodeOutput(1, "applying\n", "warn: A\nerror: B\n\n").reason() == "applying"
    assert NodeOutput(1, "", "warn: A\nerror: B\n  \n").reason() == "error: B"
    assert NodeOutput(2, "out only\n", "").reason() == "out only"
    assert NodeOutput(3, "\n", " \n").reason() == "exit status 3"


def test_node_paths_of_mignurse_and_the_devices_are_rooted_the_rest_quoted() -> None:
    words = shell_words(
        ("nvidia-mig-parted", "-f", "/var/lib/mignurse/mig/config.yaml", "-c", "my config")
    )
    assert words == "nvidia-mig-parted -f \"$R\"/var/lib/mignurse/mig/config.yaml -c 'my config'"
    assert shell_words(("lsof", "/dev/nvidia0", "/etc/x")) == 'lsof "$R"/dev/nvidia0 /etc/x'


def test_each_node_command_goes_to_the_audit_with_its_exit_and_output_tail() -> None:
    long = "x" * (AUDIT_OUTPUT_CHARS + 500) + "END"
    node = ScriptedNode({"nvidia-smi": Reply(4, long, "e" * 3000 + "ERR")})
    seen = Seen()
    out = run_script(node_ctx(node, seen), "nvidia-smi -L\n", "nvidia-smi -L", timeout=7)
    assert (out.rc, out.stdout) == (4, long)
    [record] = seen.events("node-command")
    assert record["node"] == NODE and record["what"] == "nvidia-smi -L" and record["rc"] == 4
    assert len(record["stdout"]) == 2000 and record["stdout"].endswith("END")
    assert len(record["stderr"]) == 2000 and record["stderr"].endswith("ERR")
    assert record["error"] is None
    # every script first sets the sandbox root the rooted paths use
    assert node.ran == [('R="${MIGNURSE_ROOT:-}"\nnvidia-smi -L\n', 7)]


def test_a_node_that_never_answered_fails_the_step_naming_why() -> None:
    node = ScriptedNode({"": Reply(None, error="SSM agent is not online (ConnectionLost)")})
    seen = Seen()
    with pytest.raises(StepFailed) as failed:
        run_script(node_ctx(node, seen), "true\n", "lsof")
    assert str(failed.value) == f"lsof on {NODE}: SSM agent is not online (ConnectionLost)"
    assert seen.events("node-command")[0]["error"] == "SSM agent is not online (ConnectionLost)"
    with pytest.raises(StepFailed, match=f"lsof on {NODE}: no exit status"):
        run_script(node_ctx(ScriptedNode({"": Reply(None)}), Seen()), "true\n", "lsof")


def test_without_a_way_into_the_node_nothing_runs() -> None:
    seen = Seen()
    ctx = node_ctx(ScriptedNode(), seen)
    ctx.shell_for = None
    with pytest.raises(StepFailed, match="no way into the node is configured"):
        run_script(ctx, "true\n", "true")


def test_a_cancelled_step_runs_nothing_more_on_the_node() -> None:
    node = ScriptedNode()
    ctx = node_ctx(node, Seen())
    ctx.cancel.set()
    with pytest.raises(Cancelled):
        run_script(ctx, "nvidia-mig-parted apply\n", "apply")
    assert not node.ran


def test_a_node_command_without_its_own_limit_gets_the_steps_time_left() -> None:
    node = ScriptedNode()
    run_script(node_ctx(node, Seen(), timeout=120.0), "true\n", "true")
    run_script(node_ctx(node, Seen(), timeout=1.0), "true\n", "true")
    assert 110 < node.ran[0][1] <= 120 and node.ran[1][1] == 5.0


def test_a_command_shows_its_last_three_lines_and_its_failure() -> None:
    node = ScriptedNode({"nvidia-smi": Reply(9, "a\nb\nc\nd\n", 'level=fatal msg="gone"')})
    seen = Seen()
    argv = ("nvidia-smi", "-q", "-x", "-i", "0", "-f", "/tmp/x", "--extra")
    run_argv(node_ctx(node, seen), argv, timeout=60)
    assert seen.log == ["$ " + " ".join(argv), "  b", "  c", "  d", "  exit 9: gone"]
    assert seen.events("node-command")[0]["what"] == "nvidia-smi -q -x -i 0 -f"
    seen = Seen()
    run_argv(node_ctx(ScriptedNode({"": Reply(0, "one\n")}), seen), ("true",))
    assert seen.log == ["$ true", "  one"]  # a success adds no exit line


# -- apply-mig-layout ------------------------------------------------------------------------

ASSERT = f'nvidia-mig-parted assert -f "$R"/var/lib/mignurse/mig/config.yaml -c {CONFIG}'
APPLY_MODE = "nvidia-mig-parted -d apply --mode-only"
ASSERT_MODE = "nvidia-mig-parted -d assert --mode-only"
APPLY = "nvidia-mig-parted -d apply -f"
MODES = "--query-gpu=index,mig.mode.current,mig.mode.pending"
PROBE = "mignurse probe -o json"
CDI_READ = "spec=absent"  # in the read of the management CDI spec, and only there


def layout_plan() -> StepPlan:
    yaml = f"version: v1\nmig-configs:\n  {CONFIG}:\n  - devices: all\n    mig-enabled: true\n"
    return StepPlan(data={"config": CONFIG, "configYaml": yaml})


def mig_off_node(**replies: Reply | list[Reply]) -> ScriptedNode:
    """Two H100s with MIG off, mignurse's probe installed; `replies` by command."""
    answers: dict[str, Reply | list[Reply]] = {
        PROBE: Reply(0, probe_json(gpu(0, MIG_DISABLED), gpu(1, MIG_DISABLED))),
        CDI_READ: Reply(0, "spec=absent\n"),
    }
    names = {"assert_": ASSERT, "apply_mode": APPLY_MODE, "assert_mode": ASSERT_MODE,
             "apply": APPLY, "modes": MODES, "listing": "nvidia-smi -L", "cdi": CDI_READ,
             "ctk_nodes": "create-device-nodes", "ctk_generate": "cdi generate"}  # fmt: skip
    for name, reply in replies.items():
        answers[names[name]] = reply
    return ScriptedNode(answers)


def commands(node: ScriptedNode) -> list[str]:
    shown = []
    for script in node.scripts():
        first = script.splitlines()[0]
        if first.startswith("mkdir"):
            shown.append("write files")
        elif first.startswith("spec="):
            shown.append("read the CDI spec")
        elif "nvidia-ctk" in first:
            shown.append(" ".join(first.split()[1:3]))
        elif "nvidia-mig-parted" in first:
            shown.append(" ".join(w for w in first.split()[3:6] if not w.startswith('"$R"')))
        else:
            shown.append(script.splitlines()[-1].split(" -")[0])
    return shown


def test_a_layout_already_in_place_is_left_as_it_is() -> None:
    node = mig_off_node(assert_=Reply(0))
    seen = Seen()
    applied = ApplyMigLayout().apply(node_ctx(node, seen), layout_plan())
    assert applied == {"config": CONFIG, "alreadyApplied": True, "cdiSpec": "absent"}
    assert commands(node) == [
        "read the CDI spec",
        "write files",
        "nvidia-mig-parted assert -f",
        "nvidia-smi",
    ]
    assert node.scripts()[-1] == "nvidia-smi -L" and node.ran[-1][1] == 60
    assert [e["change"] for e in seen.events("intent")] == [
        f"write /var/lib/mignurse/mig/config.yaml and an empty /var/lib/mignurse/mig/hooks.yaml"
        f" on {NODE}"
    ]
    assert f"{CONFIG} is already applied on {NODE}" in seen.log


def test_the_layout_is_applied_in_mig_parteds_order_after_recording_the_gpus() -> None:
    node = mig_off_node(assert_=[Reply(1), Reply(0)])
    seen = Seen()
    applied = ApplyMigLayout().apply(node_ctx(node, seen), layout_plan())
    assert applied == {"config": CONFIG, "alreadyApplied": False, "cdiSpec": "absent"}
    assert commands(node) == [
        "read the CDI spec",
        "write files",
        "nvidia-mig-parted assert -f",
        "mignurse probe",
        "nvidia-mig-parted -d apply",
        "nvidia-mig-parted -d assert",
        "nvidia-mig-parted -d apply",
        "nvidia-mig-parted assert -f",
        "nvidia-smi",
    ]
    written = node.scripts()[1]
    assert "version: v1\nmig-configs:\n  all-1g.10gb:" in written and "hooks: {}" in written
    intents = seen.events("intent")
    assert [e["change"].split(" on ")[0] for e in intents] == [
        "write /var/lib/mignurse/mig/config.yaml and an empty /var/lib/mignurse/mig/hooks.yaml",
        f"nvidia-mig-parted apply --mode-only -c {CONFIG}",
        f"nvidia-mig-parted apply -c {CONFIG}",
    ]
    record = {"mode": MIG_DISABLED, "counts": {}}
    assert intents[1]["prior"] == {"gpus": {"0": record, "1": record}}
    assert node.scripts()[-1] == "nvidia-smi -L" and node.ran[-1][1] == 60


def test_a_resumed_apply_keeps_the_gpus_recorded_before_its_first_write() -> None:
    """Killed after mig-parted began: the GPUs now are half-made, the record is the one from
    before, and reading them again would take the half-made layout for the starting point."""
    before = {"0": {"mode": MIG_DISABLED, "counts": {}}}
    node = mig_off_node(assert_=[Reply(1), Reply(0)])
    seen = Seen()
    ctx = node_ctx(node, seen, prior={"gpus": before})
    ApplyMigLayout().apply(ctx, layout_plan())
    assert "mignurse probe" not in commands(node)
    assert seen.events("intent")[1]["prior"]["gpus"] == before


def test_a_mode_change_the_host_refused_stops_naming_the_gpus_to_reboot() -> None:
    modes = (
        "0, Disabled, Enabled\n"
        "1, Enabled, Enabled\n"
        "2, Disabled, [N/A]\n"
        "3, Disabled\n"
        "4, Enabled, Disabled\n"
    )
    node = mig_off_node(assert_=Reply(1), assert_mode=Reply(1), modes=Reply(0, modes))
    with pytest.raises(StepFailed) as failed:
        ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    assert str(failed.value) == (
        f"the MIG mode change of GPU 0 (Disabled → Enabled), GPU 4 (Enabled → Disabled) on "
        f"{NODE} waits for a GPU reset the host refused: reboot the node (Ampere keeps the new "
        "mode), then run reapply-mig-no-hooks again"
    )
    assert node.scripts()[-1].startswith(
        "nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader"
    )
    assert node.ran[-1][1] == 60


def test_a_mode_change_that_failed_otherwise_says_mig_parteds_reason() -> None:
    node = mig_off_node(
        assert_=Reply(1),
        apply_mode=Reply(1, "", FATAL),
        assert_mode=Reply(1),
        modes=Reply(0, "0, Disabled, Disabled\n"),
    )
    with pytest.raises(StepFailed) as failed:
        ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    assert str(failed.value) == (
        'nvidia-mig-parted apply --mode-only failed: error setting MIG mode: device "GPU 3" is '
        "in use"
    )
    assert "nvidia-mig-parted -d apply -f" not in "\n".join(node.scripts())


@pytest.mark.parametrize(
    ("replies", "said", "ran"),
    [
        ({"apply": Reply(1, "", FATAL)},
         f"nvidia-mig-parted apply failed on {NODE}: error setting MIG mode: device \"GPU 3\" is "
         "in use", 7),
        ({"assert_": [Reply(1), Reply(1, "", 'level=fatal msg="config mismatch"')]},
         f"{CONFIG} is not in place after apply: config mismatch", 8),
        ({"listing": Reply(6, "", "Failed to initialize NVML: Unknown Error\n")},
         f"nvidia-smi -L failed on {NODE}: Failed to initialize NVML: Unknown Error", 9),
    ],
)  # fmt: skip
def test_each_failing_mig_parted_call_stops_the_step_with_its_reason(
    replies: dict[str, Reply | list[Reply]], said: str, ran: int
) -> None:
    answers: dict[str, Reply | list[Reply]] = {"assert_": [Reply(1), Reply(0)]}
    node = mig_off_node(**{**answers, **replies})
    with pytest.raises(StepFailed) as failed:
        ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    assert str(failed.value) == said
    assert len(node.ran) == ran


def test_verify_asserts_the_layout_once_more() -> None:
    plan = layout_plan()
    good = mig_off_node(assert_=Reply(0))
    assert ApplyMigLayout().verify(node_ctx(good, Seen()), plan, {}) is None
    assert commands(good) == ["nvidia-mig-parted assert -f"] and good.ran[0][1] == 60
    bad = mig_off_node(assert_=Reply(1, "", 'level=fatal msg="GPU 1 has 3 instances"'))
    said = ApplyMigLayout().verify(node_ctx(bad, Seen()), plan, {})
    assert said == "nvidia-mig-parted assert: GPU 1 has 3 instances"


# -- what undo compares ------------------------------------------------------------------------


def test_the_gpu_record_keeps_mode_and_counts_and_refuses_an_unreadable_node() -> None:
    state = MigState("nvml", gpus=(gpu(0, MIG_ENABLED, "3g.40gb", "1g.10gb", "1g.10gb"),
                                   gpu(1, MIG_DISABLED, "1g.10gb")))  # fmt: skip
    assert gpu_record(state) == {
        "0": {"mode": MIG_ENABLED, "counts": {"3g.40gb": 1, "1g.10gb": 2}},
        "1": {"mode": MIG_DISABLED, "counts": {}},
    }
    with pytest.raises(StepFailed) as failed:
        gpu_record(MigState("nvidia-smi", PROBE_ERROR, "Failed to initialize NVML"))
    assert str(failed.value) == (
        "cannot read the MIG state of the GPUs before changing them (nvidia-smi: error Failed "
        "to initialize NVML)"
    )


def barrier(now: MigState | str, before: dict[str, Any] | None) -> tuple[str | None, ScriptedNode]:
    text = now if isinstance(now, str) else json.dumps(now.to_json())
    node = ScriptedNode({PROBE: Reply(0, text)})
    applied = {"config": CONFIG} if before is None else {"config": CONFIG, "gpus": before}
    said = ApplyMigLayout().undo_barrier(node_ctx(node, Seen()), layout_plan(), applied)
    return said, node


def off(*indexes: int) -> dict[str, Any]:
    return {str(i): {"mode": MIG_DISABLED, "counts": {}} for i in indexes}


def test_undo_is_free_when_no_mig_parted_write_was_attempted() -> None:
    said, node = barrier(MigState("nvml", gpus=(gpu(0, MIG_ENABLED, *SEVEN),)), None)
    assert said is None and not node.ran
    said, node = barrier(MigState("nvml", gpus=(gpu(0, MIG_ENABLED, *SEVEN),)), {})
    assert said is None and not node.ran


def test_undo_is_free_when_the_gpus_are_as_they_were() -> None:
    now = MigState("nvml", gpus=(gpu(0, MIG_DISABLED), gpu(1, MIG_DISABLED)))
    said, node = barrier(now, off(0, 1))
    assert said is None and node.ran


def test_changed_gpus_stop_the_undo_naming_each_change() -> None:
    now = MigState("nvml", gpus=(gpu(0, MIG_ENABLED, *SEVEN), gpu(1, MIG_ENABLED),
                                 gpu(2, MIG_DISABLED)))  # fmt: skip
    before = {**off(0, 1, 2), "3": {"mode": MIG_ENABLED, "counts": {"7g.80gb": 1}}}
    said, _node = barrier(now, before)
    assert said == (
        f"the GPUs of {NODE} no longer match their layout before the run (GPU 0: MIG Enabled, "
        "7×1g.10gb (was MIG Disabled); GPU 1: MIG Enabled, no instances (was MIG Disabled); "
        "GPU 3: not seen (was MIG Enabled, 1×7g.80gb)): undoing the labels and the cordon "
        "would return them to service; the node stays cordoned with its GPU operands paused"
    )


@pytest.mark.parametrize(("changed", "more"), [(4, ""), (5, "; 1 more"), (11, "; 7 more")])
def test_many_changed_gpus_are_named_four_then_counted(changed: int, more: str) -> None:
    now = MigState("nvml", gpus=tuple(gpu(i, MIG_ENABLED) for i in range(changed)))
    said, _node = barrier(now, off(*range(changed)))
    assert said is not None
    named = said.split(" (", 1)[1].split("): undoing")[0]
    assert named.count("GPU ") == 4 and named.startswith("GPU 0:")
    assert named.endswith("(was MIG Disabled)" + more)


# -- reading the GPUs --------------------------------------------------------------------------


def test_the_nvml_probe_is_read_first_even_when_it_exits_one() -> None:
    """`mignurse probe` exits 1 when it found a problem with a GPU; its JSON is still the
    state."""
    for rc in (0, 1):
        text = probe_json(gpu(0, MIG_ENABLED, *SEVEN))
        node = ScriptedNode({PROBE: Reply(rc, text), "nvidia-smi": Reply(127)})
        seen = Seen()
        state = read_mig_state(node_ctx(node, seen))
        assert state.source == "nvml" and state.gpus[0].profile_counts() == {"1g.10gb": 7}
        assert len(node.ran) == 1 and node.ran[0][1] == 60


@pytest.fixture
def sandbox(tmp_path: Path) -> NodeSandbox:
    """A p5 node's sandbox with MIG on, 3g.40gb + 2 × 1g.10gb per GPU, without mignurse."""
    box = NodeSandbox(tmp_path, node=NODE, scenario_facts={"story": "mig-hook"})
    box.set_mig_knobs(mignurse_probe=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: true\n"
        '    mig-devices:\n      "3g.40gb": 1\n      "1g.10gb": 2\n'
    )
    made = SandboxShell(box).run(
        f"env -u MIG_PARTED_HOOKS_FILE nvidia-mig-parted apply -f {cfg} -c x\n",
        timeout=30,
        stdout=io.BytesIO(),
    )
    assert made.rc == 0, made.stderr_tail
    return box


def test_without_the_probe_nvidia_smi_tells_the_same_layout(sandbox: NodeSandbox) -> None:
    seen = Seen()
    state = read_mig_state(node_ctx(SandboxShell(sandbox), seen))
    assert state.source == "nvidia-smi" and len(state.gpus) == 8
    assert {g.mig_current for g in state.gpus} == {MIG_ENABLED}
    assert all(g.profile_counts() == {"3g.40gb": 1, "1g.10gb": 2} for g in state.gpus)
    # the MIG devices' UUIDs (what the DRA check compares) come from nvidia-smi -L
    assert all(d.uuid.startswith("MIG-") for g in state.gpus for d in g.devices)


@pytest.mark.parametrize(
    ("probe", "note"),
    [
        (Reply(127), ""),
        (Reply(0, "  \n"), ""),
        (Reply(2, probe_json(gpu(0))), ""),
        (Reply(0, probe_json(status="driver-not-loaded", detail="NVML: Driver Not Loaded")),
         "NVML probe: driver-not-loaded NVML: Driver Not Loaded; reading nvidia-smi instead"),
    ],
)  # fmt: skip
def test_a_probe_that_is_missing_or_failed_falls_back_to_nvidia_smi(
    probe: Reply, note: str
) -> None:
    node = ScriptedNode({PROBE: probe, "nvidia-smi -q -x": Reply(0, "")})
    seen = Seen()
    state = read_mig_state(node_ctx(node, seen))
    assert state.source != "nvml" and state.status == PROBE_ERROR
    assert len(node.ran) == 2 and node.ran[1][1] == 60
    assert node.scripts()[1].startswith("nvidia-smi -q -x; echo =====MIGNURSE=====")
    assert [line for line in seen.log if line.startswith("NVML probe")] == ([note] if note else [])


def target_of(layout: dict[str, int] | None, gpus: int | None = 2) -> Any:
    from mignurse.gpu.profiles import Layout
    from mignurse.runner.steps.mig.target import MigTarget

    return MigTarget(
        node=cast(Any, None), raw={}, config=CONFIG, family=cast(Any, None), gpus=gpus,
        layout=Layout(layout is not None, layout or {}), strategy="mixed",
    )  # fmt: skip


def test_compare_layout_names_each_gpu_that_is_not_the_target() -> None:
    want = target_of({"1g.10gb": 7})
    good = MigState("nvml", gpus=(gpu(0, MIG_ENABLED, *SEVEN), gpu(1, MIG_ENABLED, *SEVEN)))
    assert compare_layout(good, want) == []
    mixed = MigState("nvml", gpus=(gpu(0, MIG_ENABLED, "3g.40gb"), gpu(1, MIG_DISABLED, "x"),
                                   gpu(2, MIG_NOT_SUPPORTED)))  # fmt: skip
    assert compare_layout(mixed, want) == [
        "GPU 0: 1×3g.40gb, expected 7×1g.10gb",
        "GPU 1: MIG Disabled, expected Enabled",
    ]
    three = MigState("nvml", gpus=tuple(gpu(i, MIG_ENABLED, *SEVEN) for i in range(3)))
    assert compare_layout(three, want) == ["3 MIG-capable GPUs seen, 2 expected"]
    assert compare_layout(three, target_of({"1g.10gb": 7}, gpus=None)) == []


def test_compare_layout_with_mig_off_wants_every_gpu_disabled() -> None:
    want = target_of(None)
    assert compare_layout(MigState("nvml", gpus=(gpu(0, MIG_DISABLED), gpu(1, MIG_DISABLED))),
                          want) == []  # fmt: skip
    assert compare_layout(MigState("nvml", gpus=(gpu(0, MIG_DISABLED), gpu(1, MIG_ENABLED))),
                          want) == ["GPU 1: MIG Enabled, expected Disabled"]  # fmt: skip


def test_compare_layout_of_an_unreadable_or_mig_less_node() -> None:
    want = target_of({"1g.10gb": 7})
    assert compare_layout(MigState("nvidia-smi", PROBE_ERROR, "no XML"), want) == [
        "nvidia-smi reading: error no XML"
    ]
    only = MigState("nvml", gpus=(gpu(0, MIG_NOT_SUPPORTED),))
    assert compare_layout(only, want) == ["no MIG-capable GPU found"]


# -- GPU processes ----------------------------------------------------------------------------

APPS = "nvidia-smi --query-compute-apps"


# `lsof -w +c 15 -F pc /dev/nvidia0 /dev/nvidia1` as lsof 4.94 (AL2023) writes it: a process
# line, its comm line, and a line per file it holds (lsof(8) OUTPUT FOR OTHER PROGRAMS)
LSOF_FIELDS = (
    "p1187\ncnvidia-persiste\nf3\nf4\n"  # nvidia-persistenced: beside every MIG change
    "p2210\ncnv-fabricmanage\nf5\n"  # nv-fabricmanager: so is it
    "p4242\ncpython3\nf7\n"  # a compute app nvidia-smi named already
    "p5151\ncnv-hostengine\nf9\nf10\n"  # DCGM: mig-manager stops it first; so must the user
    "warning\n"
)


def test_gpu_processes_are_named_from_nvidia_smi_and_lsof_once_each() -> None:
    node = ScriptedNode({
        APPS: Reply(0, "4242, python3, 10240 MiB\n[N/A], [N/A], [N/A]\n\n77\n88, bash\n"),
        "lsof": Reply(0, LSOF_FIELDS),
    })  # fmt: skip
    found = gpu_processes(node_ctx(node, Seen()))
    assert found == [
        "pid 4242 (python3)",
        "pid 77 (?)",
        "pid 88 (bash)",
        "pid 5151 (nv-hostengine, holds a /dev/nvidia device)",
    ]
    assert [t for _s, t in node.ran] == [60, 60]


def test_the_daemons_that_hold_the_gpus_beside_every_mig_change_do_not_block_it() -> None:
    """nvidia-persistenced runs on every EKS AL2023 GPU node and holds each /dev/nvidiaN:
    counted, it failed every run of the MIG runbook on a node with a host driver."""
    beside = "p1187\ncnvidia-persiste\nf3\np2210\ncnv-fabricmanage\nf5\n"
    node = ScriptedNode({APPS: Reply(0, ""), "lsof": Reply(0, beside)})
    assert gpu_processes(node_ctx(node, Seen())) == []


def test_gpu_processes_that_cannot_be_listed_fail_the_step() -> None:
    node = ScriptedNode({APPS: Reply(9, "", "NVIDIA-SMI has failed because it couldn't "
                                            "communicate with the NVIDIA driver.\n")})  # fmt: skip
    with pytest.raises(StepFailed) as failed:
        gpu_processes(node_ctx(node, Seen()))
    assert str(failed.value) == (
        f"cannot list GPU processes on {NODE}: NVIDIA-SMI has failed because it couldn't "
        "communicate with the NVIDIA driver."
    )


class Clock:
    """A step clock that the step's own sleeps move."""

    def __init__(self, ctx: StepContext) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        ctx.time_left = lambda: ctx.timeout - self.now  # type: ignore[method-assign]
        ctx.sleep = self.sleep  # type: ignore[method-assign]

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_processes_that_exit_while_waited_for_leave_the_gpus_free() -> None:
    node = ScriptedNode({APPS: [Reply(0, "4242, python3, 1 MiB\n"), Reply(0, "")]})
    seen = Seen()
    ctx = node_ctx(node, seen, timeout=60.0)
    clock = Clock(ctx)
    assert ConfirmNoGpuProcesses().apply(ctx, StepPlan()) == {"processes": []}
    assert clock.slept == [2.0] and f"no process uses the GPUs of {NODE}" in seen.log


def test_processes_that_stay_fail_the_step_at_its_timeout_naming_them() -> None:
    node = ScriptedNode({APPS: Reply(0, "4242, python3, 1 MiB\n")})
    ctx = node_ctx(node, Seen(), timeout=6.0)
    clock = Clock(ctx)
    with pytest.raises(StepFailed) as failed:
        ConfirmNoGpuProcesses().apply(ctx, StepPlan())
    assert str(failed.value) == (
        f"1 process(es) still use the GPUs of {NODE}: pid 4242 (python3); stop them (their "
        "pods, or the processes on the node) and run again"
    )
    # read at 0, 2 and 4 s: with 2 s left a wait would end at the deadline, so it refuses
    assert clock.slept == [2.0, 2.0] and len(node.ran) == 6


# -- mig-preflight: the host service, only asked about ----------------------------------------

HOST = "systemctl is-active nvidia-mig-manager.service"


def preflight_ctx(c: Cluster, node: str, host: Reply, seen: Seen) -> tuple[Any, ScriptedNode]:
    shell = ScriptedNode({HOST: host, CDI_READ: Reply(0, "spec=absent\n")}, node=node)
    ctx = c.ctx(node, shell_for=lambda name: shell, log=seen.log.append)
    return ctx, shell


@pytest.mark.parametrize("state", ["active", "activating", "reloading"])
def test_a_running_host_mig_manager_refuses_the_run_before_any_write(
    cluster_for: Callable[..., Cluster], state: str
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    ctx, shell = preflight_ctx(c, node, Reply(0, f"{state}\n|\nenabled\n"), Seen())
    expected = (
        f"the host nvidia-mig-manager.service is {state}: it applies its own MIG selection (at "
        "every boot) and would undo this layout; disable it first with `sudo systemctl disable "
        "--now nvidia-mig-manager.service` (mignurse never changes systemd units)"
    )
    assert MigPreflight().check(ctx) == expected
    with pytest.raises(StepFailed) as failed:
        MigPreflight().apply(ctx, StepPlan())
    assert str(failed.value) == expected
    assert [t for _s, t in shell.ran] == [30, 30]
    assert all("systemctl is-active" in s and "is-enabled" in s for s in shell.scripts())


def test_a_stopped_but_enabled_host_mig_manager_is_noted_for_the_next_boot(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    seen = Seen()
    ctx, _shell = preflight_ctx(c, node, Reply(0, "inactive\n|\nenabled\n"), seen)
    assert MigPreflight().check(ctx) is None
    applied = MigPreflight().apply(ctx, StepPlan())
    assert applied["hostService"] == {"active": "inactive", "enabled": "enabled"}
    assert applied["config"] == "all-1g.10gb" and applied["perGpu"] == {"1g.10gb": 7}
    assert seen.log == [
        "host nvidia-mig-manager.service: inactive, enabled",
        "note: nvidia-mig-manager.service is enabled: at the next boot it applies its own "
        "selection",
    ]
    seen = Seen()
    ctx, _shell = preflight_ctx(c, node, Reply(0, "\n|\n\n"), seen)
    applied = MigPreflight().apply(ctx, StepPlan())
    assert applied["hostService"] == {"active": "unknown", "enabled": "not installed"}
    assert seen.log == ["host nvidia-mig-manager.service: unknown, not installed"]


def test_the_preflight_plan_shows_the_layout_and_only_read_only_questions(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    ctx, shell = preflight_ctx(c, node, Reply(0, "inactive\n|\ndisabled\n"), Seen())
    plan = MigPreflight().plan(ctx)
    assert [cmd.argv for cmd in plan.commands] == [
        ("systemctl", "is-active", "nvidia-mig-manager.service"),
        ("systemctl", "is-enabled", "nvidia-mig-manager.service"),
        ("test", "-f", MANAGEMENT_SPEC),
    ]
    assert plan.notes[0] == (
        "config all-1g.10gb on 8 × H100-80GB: per GPU 7×1g.10gb "
        "(from NVIDIA's default mig-parted file (mig-parted v0.15.0))"
    )
    assert plan.notes[1] == "MIG strategy mixed: expect allocatable nvidia.com/mig-1g.10gb=56"
    assert not shell.ran


def test_apply_mig_layout_plans_every_command_and_refuses_an_unknown_config(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    step = ApplyMigLayout()
    assert step.check(c.ctx(node)) is None
    plan = step.plan(c.ctx(node))
    config = ("-f", "/var/lib/mignurse/mig/config.yaml", "-c", CONFIG)
    hooks = ("-k", "/var/lib/mignurse/mig/hooks.yaml")
    parted = ("env", "-u", "MIG_PARTED_HOOKS_FILE", "nvidia-mig-parted")
    assert [cmd.argv for cmd in plan.commands] == [
        ("sh", "-c", "mkdir -p /var/lib/mignurse/mig && cat > /var/lib/mignurse/mig/config.yaml"),
        ("sh", "-c", "cat > /var/lib/mignurse/mig/hooks.yaml"),
        (*parted, "assert", *config),
        (*parted, "-d", "apply", "--mode-only", *config, *hooks),
        (*parted, "-d", "assert", "--mode-only", *config),
        (*parted, "-d", "apply", *config, *hooks),
        (*parted, "assert", *config),
        ("nvidia-smi", "-L"),
        ("test", "-f", MANAGEMENT_SPEC),
        ("<toolkit>/nvidia-ctk", "system", "create-device-nodes", "--control-devices"),
        ("<toolkit>/nvidia-ctk", "cdi", "generate", "--mode=management",
         f"--output={MANAGEMENT_SPEC}"),
    ]  # fmt: skip
    assert plan.notes[0] == (
        f"every GPU instance on {node} is destroyed and recreated as 7×1g.10gb per GPU"
    )
    assert plan.data["config"] == CONFIG and '"1g.10gb": 7' in plan.data["configYaml"]
    refused = step.check(c.ctx(node, params={"config": "all-3g.20gb"}))
    assert refused is not None and refused.startswith("unknown MIG config 'all-3g.20gb' for ")


# -- verify-mig-layout --------------------------------------------------------------------------


def verify_ctx(c: Cluster, node: str, *gpus: GpuMigState) -> tuple[Any, ScriptedNode]:
    shell = ScriptedNode({PROBE: Reply(0, probe_json(*gpus))}, node=node)
    return c.ctx(node, shell_for=lambda name: shell), shell


def test_verify_mig_layout_reads_each_gpu_and_keeps_the_mig_devices_made(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    gpus = [gpu(i, MIG_ENABLED, *SEVEN) for i in range(8)]
    ctx, _shell = verify_ctx(c, node, *gpus, gpu(8, MIG_NOT_SUPPORTED))
    applied = VerifyMigLayout().apply(ctx, StepPlan())
    assert applied["source"] == "nvml" and applied["gpus"] == 8
    assert applied["perGpu"] == {"1g.10gb": 7}
    assert applied["migUuids"] == sorted(f"MIG-{i}-{n}" for i in range(8) for n in range(7))
    gpus[5] = gpu(5, MIG_ENABLED, *SEVEN[:3])
    ctx, _shell = verify_ctx(c, node, *gpus)
    with pytest.raises(StepFailed) as failed:
        VerifyMigLayout().apply(ctx, StepPlan())
    assert str(failed.value) == (
        f"all-1g.10gb is not what the GPUs of {node} show (nvml): GPU 5: 3×1g.10gb, "
        "expected 7×1g.10gb"
    )


def test_the_reapply_plan_marks_the_steps_that_only_read(
    cluster_for: Callable[..., Cluster], state_home: Path, tmp_path: Path
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    runner = Runner(book("reapply-mig-no-hooks", tmp_path), {"node": node}, client=c.client,
                    shell_for=shells(c, tmp_path / "nodes"), yes=True)  # fmt: skip
    heads = [line for line in runner.plan().text().splitlines() if re.match(r"^\d+\. ", line)]
    assert [h.split(" ")[1] for h in heads if h.endswith("[read-only]")] == [
        "preflight", "no-gpu-processes", "verify-layout"
    ]  # fmt: skip


# -- the management CDI spec ---------------------------------------------------------------------

# What the read prints on a node with CDI on: the validator's roots (gpu-operator@v26.7.0
# cmd/nvidia-validator/main.go createStatusFile) and the hook the toolkit's spec calls
# (nvidia-container-toolkit@v1.20.0 cmd/nvidia-ctk-installer/toolkit/toolkit.go)
CDI_ON = (
    "spec=present\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\nNVIDIA_DEV_ROOT=/run/nvidia/driver\n"
    "hook=/usr/local/nvidia/toolkit/nvidia-cdi-hook\n"
)


@pytest.mark.parametrize("in_place", [False, True])
def test_with_cdi_on_the_management_spec_is_made_again_after_the_apply(in_place: bool) -> None:
    """As mig-manager after a reconfigure; a layout found in place too (a resumed run)."""
    asserts = [Reply(0)] if in_place else [Reply(1), Reply(0)]
    node = mig_off_node(assert_=asserts, cdi=Reply(0, CDI_ON))
    seen = Seen()
    applied = ApplyMigLayout().apply(node_ctx(node, seen), layout_plan())
    assert applied["cdiSpec"] == "regenerated" and applied["alreadyApplied"] is in_place
    assert commands(node)[0] == "read the CDI spec"
    assert commands(node)[-3:] == ["nvidia-smi", "system create-device-nodes", "cdi generate"]
    ctk = '"$R"/usr/local/nvidia/toolkit/nvidia-ctk'
    assert node.scripts()[-2] == (
        f"{ctk} system create-device-nodes --control-devices --dev-root=/run/nvidia/driver"
    )
    assert node.scripts()[-1] == (
        f"{ctk} cdi generate --mode=management --driver-root=/run/nvidia/driver "
        "--dev-root=/run/nvidia/driver --vendor=management.nvidia.com --class=gpu "
        "--nvidia-cdi-hook-path=/usr/local/nvidia/toolkit/nvidia-cdi-hook "
        f"--output={MANAGEMENT_SPEC}"
    )
    assert seen.events("intent")[-1]["change"] == f"regenerate {MANAGEMENT_SPEC} on {NODE}"


def test_an_old_toolkits_hook_is_nvidia_ctk_itself_and_named_by_its_old_flag() -> None:
    old = "spec=present\nNVIDIA_DRIVER_ROOT=/\nhook=/usr/bin/nvidia-ctk\n"
    node = mig_off_node(assert_=Reply(0), cdi=Reply(0, old))
    ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    generate = node.scripts()[-1]
    assert generate.startswith('"$R"/usr/bin/nvidia-ctk cdi generate --mode=management')
    assert "--dev-root" not in generate  # none recorded: nvidia-ctk takes the driver root
    assert "--nvidia-ctk-path=/usr/bin/nvidia-ctk" in generate


@pytest.mark.parametrize(
    ("read", "said"),
    [
        ("spec=present\nhook=/usr/local/nvidia/toolkit/nvidia-cdi-hook\n",
         "/run/nvidia/validations/driver-ready gives no usable driver root (none)"),
        ("spec=present\nNVIDIA_DRIVER_ROOT=$(reboot)\nhook=/usr/local/nvidia/toolkit/nvidia-cdi-hook\n",
         "gives no usable driver root ('$(reboot)')"),
        ("spec=present\nNVIDIA_DRIVER_ROOT=/\nNVIDIA_DEV_ROOT=/a/../b\n"
         "hook=/usr/local/nvidia/toolkit/nvidia-cdi-hook\n",
         "gives NVIDIA_DEV_ROOT='/a/../b'"),
        ("spec=present\nNVIDIA_DRIVER_ROOT=/\n", "names no nvidia-cdi-hook or nvidia-ctk"),
        ("spec=present\nNVIDIA_DRIVER_ROOT=/\nhook=/tmp/../usr/bin/nvidia-cdi-hook\n",
         "by a plain path ('/tmp/../usr/bin/nvidia-cdi-hook')"),
        ("", "cannot tell whether"),
    ],
)  # fmt: skip
def test_a_spec_that_cannot_be_made_again_stops_the_step_before_any_write(
    read: str, said: str
) -> None:
    node = mig_off_node(assert_=[Reply(1), Reply(0)], cdi=Reply(0, read))
    with pytest.raises(StepFailed) as failed:
        ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    assert said in str(failed.value)
    assert "\n" not in str(failed.value)
    assert commands(node) == ["read the CDI spec"]


def test_a_failed_regeneration_says_nvidia_ctks_reason_and_what_the_node_holds() -> None:
    fatal = 'time="2026-12-07T10:00:00Z" level=error msg="failed to generate CDI spec"\n'
    node = mig_off_node(
        assert_=[Reply(1), Reply(0)], cdi=Reply(0, CDI_ON), ctk_generate=Reply(1, "", fatal)
    )
    with pytest.raises(StepFailed) as failed:
        ApplyMigLayout().apply(node_ctx(node, Seen()), layout_plan())
    assert str(failed.value) == (
        f'cdi generate failed on {NODE}: time="2026-12-07T10:00:00Z" level=error msg="failed to '
        f'generate CDI spec"; the GPUs hold the new layout, {MANAGEMENT_SPEC} still the old one'
    )


def test_preflight_refuses_a_node_whose_spec_cannot_be_made_again(
    cluster_for: Callable[..., Cluster],
) -> None:
    c = cluster_for("mig-hook-notready")
    node = ready_mig_node(c)
    ctx, shell = preflight_ctx(c, node, Reply(0, "inactive\n|\ndisabled\n"), Seen())
    shell.replies[CDI_READ] = Reply(0, "spec=present\n")
    refusal = MigPreflight().check(ctx)
    assert refusal is not None and "gives no usable driver root (none)" in refusal
    with pytest.raises(StepFailed, match="gives no usable driver root"):
        MigPreflight().apply(ctx, StepPlan())
    shell.replies[CDI_READ] = Reply(0, CDI_ON)
    assert MigPreflight().check(ctx) is None
    assert MigPreflight().apply(ctx, StepPlan())["cdiSpec"] == "present"


def test_in_the_sandbox_the_regenerated_spec_lists_the_new_layouts_devices(
    sandbox: NodeSandbox,
) -> None:
    """End to end through the sandbox's nvidia-ctk: the spec the toolkit wrote lists the
    capability nodes of the layout then; after the apply it lists the new layout's too, and
    nothing restarted a unit."""
    sandbox.set_mig_knobs(cdi_spec=True)
    before = sandbox.management_spec_file.read_text()
    yaml = (
        f"version: v1\nmig-configs:\n  {CONFIG}:\n  - devices: all\n    mig-enabled: true\n"
        '    mig-devices:\n      "1g.10gb": 7\n'
    )
    applied = ApplyMigLayout().apply(
        node_ctx(SandboxShell(sandbox), Seen()),
        StepPlan(data={"config": CONFIG, "configYaml": yaml}),
    )
    assert applied["cdiSpec"] == "regenerated"
    after = sandbox.management_spec_file.read_text()
    caps = sorted(p.name for p in (sandbox.fs / "dev/nvidia-caps").iterdir())
    assert all(f"path: /dev/nvidia-caps/{cap}\n" in after for cap in caps)
    assert any(f"/dev/nvidia-caps/{cap}\n" not in before for cap in caps)
    assert "path: /usr/local/nvidia/toolkit/nvidia-cdi-hook" in after
    tools = [(c.command, c.args[:2]) for c in sandbox.calls()]
    assert ("nvidia-ctk", ("cdi", "generate")) in tools
    asked = (("is-active",), ("is-enabled",))
    assert not [c for c in sandbox.calls() if c.command == "systemctl" and c.args[:1] not in asked]
