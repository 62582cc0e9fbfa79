from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from mignurse.evidence import (
    classify_unit_message,
    parse_journal,
    systemd_unit_actions,
    xid_errors,
)

FIXTURES = Path(__file__).parent / "fixtures"
HOST = "ip-10-0-37-142.us-west-2.compute.internal"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_entry_fields_from_a_real_kubelet_line() -> None:
    parsed = parse_journal(_read("kubelet.log"), "journal:kubelet")
    assert parsed.problems == ()
    assert parsed.source == "journal:kubelet"
    started = parsed.entries[4]
    assert started.time == datetime(2026, 11, 29, 3, 1, 2, 345678, tzinfo=UTC)
    assert started.time.tzinfo is UTC
    assert started.host == HOST
    assert started.ident == "kubelet"
    assert started.pid == 2345
    assert started.message == 'I1129 03:01:02.345000    2345 server.go:1234] "Started kubelet"'
    assert (started.boot, started.line, started.source) == (0, 5, "journal:kubelet")


def test_offsets_are_normalised_to_utc() -> None:
    text = (
        f"2026-11-29T03:01:02.5Z {HOST} kubelet[1]: a\n"
        f"2026-11-29T03:01:02.500000+00:00 {HOST} kubelet[1]: b\n"
        f"2026-11-29T04:01:02.500000+0100 {HOST} kubelet[1]: c\n"
        f"2026-11-29T03:01:02 {HOST} kubelet[1]: d\n"
    )
    parsed = parse_journal(text, "journal:kubelet")
    assert parsed.problems == ()
    times = [e.time for e in parsed.entries]
    assert times[:3] == [datetime(2026, 11, 29, 3, 1, 2, 500000, tzinfo=UTC)] * 3
    assert times[3] == datetime(2026, 11, 29, 3, 1, 2, tzinfo=UTC)
    assert all(t.utcoffset() == timedelta(0) for t in times)


def test_identifier_without_pid_and_empty_message() -> None:
    text = (
        f"2026-11-29T03:14:27.880151+0000 {HOST} kernel: NVRM: Xid (PCI:0000:53:00): 79, pid=0, "
        "GPU has fallen off the bus.\n"
        f"2026-11-29T03:14:28.000000+0000 {HOST} kubelet[2345]:\n"
    )
    kernel, empty = parse_journal(text, "journal:kernel").entries
    assert (kernel.ident, kernel.pid) == ("kernel", None)
    assert kernel.message.startswith("NVRM: Xid (PCI:0000:53:00): 79")
    assert (empty.ident, empty.pid, empty.message) == ("kubelet", 2345, "")


def test_boot_separators_number_the_boots() -> None:
    parsed = parse_journal(_read("kernel.log"), "journal:kernel")
    assert parsed.problems == ()
    assert parsed.boots == ("", "9d2c4b6a8e0f41d3a5c7e9b1d3f5a7c9")
    assert [e.boot for e in parsed.entries] == [0] * 8 + [1] * 2
    assert parsed.entries[8].line == 10  # the separator itself is line 9


def test_a_leading_boot_separator_names_boot_zero() -> None:
    text = (
        "-- Journal begins at Sun 2026-11-29 02:58:01 UTC, ends at Sun 2026-11-29 03:20:00 UTC."
        " --\n"
        "-- Boot 3f2a9c1e --\n"
        f"2026-11-29T03:01:02.000000+0000 {HOST} kernel: one\n"
        "-- Reboot --\n"
        f"2026-11-29T03:05:02.000000+0000 {HOST} kernel: two\n"
    )
    parsed = parse_journal(text, "journal:kernel")
    assert parsed.problems == ()
    assert parsed.boots == ("3f2a9c1e", "")
    assert [(e.message, e.boot) for e in parsed.entries] == [("one", 0), ("two", 1)]


def test_no_entries_is_not_a_problem() -> None:
    parsed = parse_journal("-- No entries --\n", "journal:nodeadm")
    assert parsed.entries == ()
    assert parsed.no_entries
    assert parsed.problems == ()


def test_continuation_lines_join_the_entry_before() -> None:
    parsed = parse_journal(_read("containerd.log"), "journal:containerd")
    assert parsed.problems == ()
    warning = next(e for e in parsed.entries if "cleanup warnings" in e.message)
    assert warning.message.endswith('\\"\nruntime=io.containerd.runc.v2')
    assert warning.line == 8
    assert parsed.entries[-1].line == 10


def test_garbled_lines_are_problems_with_line_numbers() -> None:
    text = (
        f"2026-11-29T03:01:02.000000+0000 {HOST} kubelet[1]: fine\n"
        "--output truncated--\n"
        f"2026-13-45T03:01:02.000000+0000 {HOST} kubelet[1]: impossible date\n"
        "2026-11-29T03:01:0\n"
    )
    parsed = parse_journal(text, "journal:kubelet")
    assert [e.message for e in parsed.entries] == ["fine"]
    assert parsed.problems[0] == "line 2: no timestamp: '--output truncated--'"
    assert parsed.problems[1].startswith("line 3: bad timestamp")
    assert parsed.problems[2].startswith("line 4: no timestamp")


def test_continuation_after_a_bad_line_is_not_misattributed() -> None:
    text = (
        f"2026-11-29T03:01:02.000000+0000 {HOST} kubelet[1]: good\n"
        "garbage\n"
        "    indented tail of the garbage\n"
    )
    parsed = parse_journal(text, "journal:kubelet")
    assert parsed.entries[0].message == "good"
    assert parsed.problems[1].startswith("line 3: continuation line without an entry")


def test_continuation_before_any_entry_and_missing_identifier() -> None:
    text = "   orphan continuation\n2026-11-29T03:01:02.000000+0000 lonely-words-no-colon\n"
    parsed = parse_journal(text, "journal:kubelet")
    assert parsed.problems[0].startswith("line 1: continuation line without an entry")
    assert parsed.problems[1] == "line 2: no host and identifier after the timestamp"
    assert parsed.entries[0].message == "lonely-words-no-colon"
    assert parsed.entries[0].ident == ""


def test_empty_and_junk_inputs_say_so() -> None:
    assert parse_journal("", "journal:kubelet").problems == ("empty journal output",)
    junk = parse_journal("\n".join(f"garbage {i}" for i in range(500)), "journal:kubelet")
    assert junk.entries == ()
    assert len(junk.problems) == 52  # 50 line problems, a count of the rest, and a summary
    assert junk.problems[50] == "450 more line problems not listed"
    assert junk.problems[-1] == "no journal entries could be read"


def test_crlf_and_blank_lines() -> None:
    text = f"\r\n2026-11-29T03:01:02.000000+0000 {HOST} kubelet[1]: crlf\r\n\r\n"
    parsed = parse_journal(text, "journal:kubelet")
    assert parsed.problems == ()
    assert [(e.message, e.line) for e in parsed.entries] == [("crlf", 2)]


# -- what the mig-hook-kubelet-restart rule needs ------------------------------------------


def test_kubelet_stopped_and_restarted_40s_after_first_start() -> None:
    kubelet = parse_journal(_read("kubelet.log"), "journal:kubelet")
    actions = systemd_unit_actions(kubelet.entries)
    assert [a.action for a in actions] == [
        "starting", "started", "stopping", "stopped", "starting", "started",
    ]  # fmt: skip
    first_start, stopping = actions[1].time, actions[2].time
    assert 39 <= (stopping - first_start).total_seconds() <= 41
    restarted = actions[-1].time

    # containerd loses its cgroups after the restart.
    containerd = parse_journal(_read("containerd.log"), "journal:containerd")
    cgroup_errors = [
        e
        for e in containerd.entries
        if e.ident == "containerd"
        and e.time > restarted
        and "level=error" in e.message
        and "cgroup" in e.message
    ]
    assert len(cgroup_errors) == 3
    assert cgroup_errors[0].pid == 1234
    assert systemd_unit_actions(containerd.entries, "containerd") == [
        (containerd.entries[0].time, "starting"),
        (containerd.entries[3].time, "started"),
    ]


def test_unit_messages_across_systemd_versions() -> None:
    cases = {
        "Stopping kubelet.service - Kubernetes Kubelet...": "stopping",
        "Stopped kubelet.service - Kubernetes Kubelet.": "stopped",
        "Starting kubelet.service - Kubernetes Kubelet...": "starting",
        "Started kubelet.service - Kubernetes Kubelet.": "started",
        "Stopping kubelet.service...": "stopping",
        "Started kubelet.service.": "started",
        "Stopping Kubernetes Kubelet...": "stopping",
        "Started Kubernetes Kubelet.": "started",
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE": "failed",
        "kubelet.service: Main process exited, code=killed, status=9/KILL": "failed",
        "kubelet.service: Main process exited, code=exited, status=0/SUCCESS": None,
        "kubelet.service: Failed with result 'exit-code'.": "failed",
        "Failed to start kubelet.service - Kubernetes Kubelet.": "failed",
        "kubelet.service: Scheduled restart job, restart counter is at 3.": "restart-scheduled",
        "kubelet.service: Deactivated successfully.": None,
        "kubelet.service: Consumed 3.412s CPU time.": None,
        "Started containerd.service - containerd container runtime.": None,
        "Started kubelet-eks.service - something else.": None,
    }
    for message, expected in cases.items():
        assert classify_unit_message(message) == expected, message


def test_a_crash_loop_counts_each_failure_once() -> None:
    messages = [
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
        "kubelet.service: Failed with result 'exit-code'.",
        "kubelet.service: Scheduled restart job, restart counter is at 1.",
        "Stopped kubelet.service - Kubernetes Kubelet.",
        "Starting kubelet.service - Kubernetes Kubelet...",
        "Started kubelet.service - Kubernetes Kubelet.",
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
        "kubelet.service: Failed with result 'exit-code'.",
    ]
    text = "".join(
        f"2026-11-29T03:0{i}:00.000000+0000 {HOST} systemd[1]: {m}\n"
        for i, m in enumerate(messages)
    )
    # kubelet's own "Started kubelet" is not systemd talking about the unit.
    text += f'2026-11-29T03:09:00.000000+0000 {HOST} kubelet[9]: "Started kubelet.service."\n'
    actions = [a.action for a in systemd_unit_actions(parse_journal(text, "j").entries)]
    assert actions == [
        "failed", "restart-scheduled", "stopped", "starting", "started", "failed",
    ]  # fmt: skip


def test_xid_errors_from_the_kernel_log() -> None:
    parsed = parse_journal(_read("kernel.log"), "journal:kernel")
    xids = xid_errors(parsed.entries)
    assert [(x.pci, x.xid) for x in xids] == [("0000:53:00", 79), ("0000:64:00", 13)]
    when, pci, code, text = xids[0]
    assert when == datetime(2026, 11, 29, 3, 14, 27, 880151, tzinfo=UTC)
    assert (pci, code) == ("0000:53:00", 79)
    assert text == "NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus."


def test_xid_old_driver_form_and_non_xid_lines() -> None:
    text = (
        f"2026-11-29T03:00:00.000000+0000 {HOST} kernel: NVRM: Xid (0000:3b:00): 48, "
        "An uncorrectable double bit error\n"
        f"2026-11-29T03:00:01.000000+0000 {HOST} kernel: NVRM: Xid is not a number here\n"
    )
    xids = xid_errors(parse_journal(text, "journal:kernel").entries)
    assert [(x.pci, x.xid) for x in xids] == [("0000:3b:00", 48)]


def _big_journal(lines: int) -> str:
    out = []
    for i in range(lines):
        s, us = i // 1000, (i * 37) % 1_000_000
        stamp = f"2026-11-29T{3 + s // 3600:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{us:06d}+0000"
        out.append(f'{stamp} {HOST} kubelet[2345]: I1129 03:01:02.345000 2345 x.go:1] "line {i}"')
    return "\n".join(out) + "\n"


def test_a_long_journal_parses_whole() -> None:
    # Speed is measured in benchmarks/bench_journal.py, not here.
    parsed = parse_journal(_big_journal(20_000), "journal:kubelet")
    assert len(parsed.entries) == 20_000
    assert parsed.problems == ()
