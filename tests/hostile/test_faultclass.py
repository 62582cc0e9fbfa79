"""The fault trials' judge on made-up ends: each class, and each way a report can lie, from
the words `mignurse run` prints and a target read back (no cluster here)."""

from __future__ import annotations

from .faultclass import (
    CONTRADICTION,
    INSTRUCTION_WORKS,
    KNOWN_GOOD,
    MANUAL_REPAIR,
    Found,
    Said,
    instructions,
    judge,
)

NODE = "ip-10-0-12-186.us-west-2.compute.internal"
REPLACE = ("run", "replace-instance", "--node", NODE)
AS_DONE = Found(off_before=("node gone",))
HALFWAY = Found(off_before=("node cordoned",), off_done=("node not replaced",))

SUCCEEDED = """run 0635bf4e: succeeded
  collect: verified: mignurse-ip-10-0-12-186-20261120T120054Z.tar.gz
  cordon: verified
  drain: verified
  delete-nodeclaim: verified
  terminate: skipped
  wait-replacement: verified
"""
INTERRUPTED = """run 0635bf4e: interrupted: interrupted during step drain
  collect: verified: mignurse-ip-10-0-12-186-20261120T120054Z.tar.gz
  cordon: verified
  drain: interrupted: interrupted
  delete-nodeclaim: pending
  terminate: pending
  wait-replacement: pending
step drain stopped after announcing a change, which may have been made: resume and undo both \
read the cluster to settle it
nothing was undone
next: `mignurse run --resume 0635bf4e` continues from step drain (4 of 6 steps left)
next: `mignurse run --undo 0635bf4e` undoes drain, cordon (newest first)
"""
NOTHING_OFFERED = """run 0635bf4e: interrupted: interrupted during step apply-layout
  apply-layout: interrupted: interrupted
nothing was undone
resume is not offered: step apply-layout cannot run: the node is NotReady
undo is not offered: cannot be undone past step apply-layout: the GPUs of the node changed
"""


def said(stdout: str, code: int, *argv: str, **kw: object) -> Said:
    return Said(argv or REPLACE, code, stdout, "", **kw)  # type: ignore[arg-type]


def test_a_clean_success_whose_target_is_done_is_known_good() -> None:
    assert judge([(said(SUCCEEDED, 0), AS_DONE)]).cls == KNOWN_GOOD


def test_succeeded_while_the_replacement_is_not_ready_is_a_contradiction() -> None:
    notready = Found(off_before=("node gone",), off_done=("replacement ip-10-0-6-151 is NotReady",))

    verdict = judge([(said(SUCCEEDED, 0), notready)])

    assert verdict.cls == CONTRADICTION
    assert verdict.why == (
        f"`mignurse {' '.join(REPLACE)}`: says succeeded, but replacement ip-10-0-6-151 is "
        "NotReady",
    )


def test_following_the_printed_resume_to_the_end_is_instruction_works() -> None:
    resumed = said(SUCCEEDED, 0, "run", "--resume", "0635bf4e", followed=True, promise="continues")

    verdict = judge([(said(INTERRUPTED, 130), HALFWAY), (resumed, AS_DONE)])

    assert verdict.cls == INSTRUCTION_WORKS
    assert verdict.why == ("followed `mignurse run --resume 0635bf4e`",)


def test_a_report_true_and_good_from_the_start_stays_known_good_whatever_follows() -> None:
    nothing_yet = Found(off_done=("node not replaced",))
    resumed = said(SUCCEEDED, 0, "run", "--resume", "0635bf4e", followed=True)

    assert judge([(said(INTERRUPTED, 130), nothing_yet), (resumed, AS_DONE)]).cls == KNOWN_GOOD


def test_a_killed_run_the_operator_resumes_on_their_own_is_known_good() -> None:
    killed = Said(REPLACE, -9, "", "> drain: Evict the node's pods\n")
    resumed = said(SUCCEEDED, 0, "run", "--resume", "0635bf4e")

    assert judge([(killed, HALFWAY), (resumed, AS_DONE)]).cls == KNOWN_GOOD


def test_a_half_changed_node_with_nothing_to_run_is_manual_repair() -> None:
    paused = Found(
        off_before=("node cordoned", "label nvidia.com/gpu.deploy.device-plugin paused"),
        off_done=("GPUs: 0 instances",),
    )

    verdict = judge([(said(NOTHING_OFFERED, 130), paused)])

    assert verdict.cls == MANUAL_REPAIR
    assert "not as before: node cordoned; label nvidia.com/gpu.deploy.device-plugin paused" in (
        verdict.why
    )
    assert verdict.why[-1] == f"after `mignurse {' '.join(REPLACE)}`, no command"


def test_a_lock_left_with_no_command_is_manual_repair_even_when_the_node_is_back() -> None:
    locked = Found(off_done=("node schedulable",), leftovers=("lock of run 0635bf4e on node",))

    verdict = judge([(said(NOTHING_OFFERED, 130), locked)])

    assert verdict.cls == MANUAL_REPAIR
    assert verdict.why[0] == "left: lock of run 0635bf4e on node"


def test_undone_while_the_cordon_stays_is_a_contradiction() -> None:
    undo = said("run 0635bf4e: undone\n  cordon: undone\n", 0, "run", "--undo", "0635bf4e")

    verdict = judge([(said(INTERRUPTED, 130), HALFWAY), (undo, HALFWAY)])

    assert verdict.cls == CONTRADICTION
    assert "says undone, but node cordoned" in verdict.why[0]


def test_nothing_changed_while_the_node_was_cordoned_is_a_contradiction() -> None:
    declined = said(
        "run 0635bf4e: declined: interrupted before the first change: nothing changed\n", 1
    )
    cordoned = Found(off_before=("node cordoned",), changed=("node.unschedulable: False → True",))

    verdict = judge([(declined, cordoned)])

    assert verdict.cls == CONTRADICTION
    assert (
        "refused (interrupted before the first change: nothing changed), but it changed"
        in (verdict.why[0])
    )


def test_no_replacement_while_one_came_is_a_contradiction() -> None:
    failed = said(
        "run 0635bf4e: failed: step wait-replacement failed: no replacement node became Ready "
        "in NodePool gpu-train within 300 s (no new node yet)\n  wait-replacement: failed\n",
        1,
    )
    came = Found(off_before=("node gone",), replacement="ip-10-0-6-151")

    verdict = judge([(failed, came)])

    assert verdict.cls == CONTRADICTION
    assert "says no replacement, but ip-10-0-6-151 is Ready in the pool" in verdict.why[0]


def test_an_offered_resume_that_is_refused_is_a_contradiction() -> None:
    refused = Said(
        ("run", "--resume", "0635bf4e"),
        2,
        "",
        "mignurse: error: run 0635bf4e is still running (pid 4242 on vm)\n",
        followed=True,
        promise="continues from step drain (4 of 6 steps left)",
    )

    verdict = judge([(said(INTERRUPTED, 130), HALFWAY), (refused, HALFWAY)])

    assert verdict.cls == CONTRADICTION
    assert verdict.why == (
        "`mignurse run --resume 0635bf4e`: `mignurse run --resume 0635bf4e` was offered "
        "(continues from step drain (4 of 6 steps left)), then refused: run 0635bf4e is still "
        "running (pid 4242 on vm)",
    )


def test_a_report_that_offers_resume_and_refuses_it_disagrees_with_itself() -> None:
    both = INTERRUPTED + "resume is not offered: run 0635bf4e is still running\n"

    verdict = judge([(said(both, 130), HALFWAY)])

    assert verdict.cls == CONTRADICTION
    assert "offers `mignurse run --resume` and says resume is not offered" in verdict.why[0]


def test_succeeded_with_a_failed_exit_or_an_unfinished_step_disagrees() -> None:
    assert "says succeeded but exits 1" in judge([(said(SUCCEEDED, 1), AS_DONE)]).why[0]
    pending = SUCCEEDED.replace("wait-replacement: verified", "wait-replacement: pending")
    verdict = judge([(said(pending, 0), AS_DONE)])
    assert verdict.cls == CONTRADICTION
    assert "its report shows wait-replacement: pending" in verdict.why[0]


def test_a_stale_lock_cleared_by_the_printed_unlock_is_instruction_works() -> None:
    blocked = said(
        f"run 1a2b3c4d: blocked: node {NODE} is locked by alice@laptop (run dead0001, pid 99 on "
        f"vm: gone, last renewed 10 min ago); if that run is dead, `mignurse unlock {NODE}` "
        "clears it\n",
        1,
        "run",
        "cordon",
        "--node",
        NODE,
    )
    locked = Found(leftovers=("lock of run dead0001 on node",))
    unlock = Said(
        ("unlock", NODE, "--yes"),
        0,
        f"node {NODE}: unlocked (the lock of run dead0001 is removed)\n",
        "",
        followed=True,
        promise="clears it",
    )

    verdict = judge([(blocked, locked), (unlock, Found())])

    assert verdict.cls == INSTRUCTION_WORKS
    assert judge([(blocked, locked), (unlock, locked)]).cls == CONTRADICTION  # "unlocked": no


def test_instructions_are_the_printed_commands_in_order_without_placeholders() -> None:
    text = INTERRUPTED + "HIGH HARM (undo: `mignurse run --undo RUN`). Type the node name\n"

    found = instructions(Said(REPLACE, 130, text, f"clears it: `mignurse unlock {NODE}`"))

    assert [(i.kind, i.argv) for i in found] == [
        ("resume", ("run", "--resume", "0635bf4e")),
        ("undo", ("run", "--undo", "0635bf4e")),
        ("unlock", ("unlock", NODE)),
    ]
    assert found[0].promise == "continues from step drain (4 of 6 steps left)"


def test_a_command_with_no_report_claims_nothing() -> None:
    killed = Said(REPLACE, -9, "", "> cordon: Cordon the node\n")

    verdict = judge([(killed, HALFWAY)])

    assert verdict.cls == MANUAL_REPAIR
    assert verdict.why[-1] == f"after `mignurse {' '.join(REPLACE)}`, no command"
