from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mignurse.evidence import (
    JournalParse,
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
    # the fixture's own timestamps (no clock read): stopped 40.341383 s after it started
    assert (stopping - first_start).total_seconds() == 40.341383
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
        "kubelet.service: Deactivated successfully.": "stopped",
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


# -- every journalctl output format, syslog files and dmesg (tests/corpus/journal) ------------

CORPUS = Path(__file__).parents[1] / "corpus" / "journal"
AL2 = "ip-10-0-12-34.ec2.internal"
AL23 = "ip-10-0-21-77.us-west-2.compute.internal"
REFERENCE = datetime(2026, 12, 1, tzinfo=UTC)  # when the year-less files were collected
XID79 = ("0000:75:00", 79)


def _corpus(name: str, reference: datetime | None = REFERENCE) -> JournalParse:
    text = (CORPUS / name).read_text(encoding="utf-8")
    return parse_journal(text, f"corpus:{name}", reference=reference)


def test_al2_default_short_output_with_systemd_219_wording() -> None:
    # `journalctl -u kubelet` on AL2: no year, systemd 219's own words for a crash loop.
    parsed = _corpus("kubelet-short-al2.log")
    assert parsed.problems == ()
    assert parsed.format == "short"
    assert parsed.boots == ("", "")  # "-- Reboot --" names no boot id
    first = parsed.entries[0]
    assert (first.time, first.host, first.ident, first.pid) == (
        datetime(2026, 11, 29, 3, 0, 41, tzinfo=UTC),
        AL2,
        "systemd",
        1,
    )
    assert first.message == "Starting Kubernetes Kubelet..."
    actions = [a.action for a in systemd_unit_actions(parsed.entries)]
    assert actions == [
        "starting", "started", "failed", "restart-scheduled", "stopped", "starting", "started",
        "failed", "starting", "started",
    ]  # fmt: skip
    assert [e.boot for e in parsed.entries][-2:] == [1, 1]


def test_systemd_219_and_252_unit_wording() -> None:
    cases = {
        # systemd 219 (AL2): src/core/service.c, unit.c, job.c at v219
        "kubelet.service: main process exited, code=exited, status=255/n/a": "failed",
        "kubelet.service: main process exited, code=exited, status=0/SUCCESS": None,
        "Unit kubelet.service entered failed state.": "failed",
        "kubelet.service failed.": "failed",
        "kubelet.service holdoff time over, scheduling restart.": "restart-scheduled",
        "kubelet.service has no holdoff time, scheduling restart.": "restart-scheduled",
        "start request repeated too quickly for kubelet.service": "failed",
        "Stopped (with error) Kubernetes Kubelet.": "stopped",
        "Timed out starting Kubernetes Kubelet.": "failed",
        "Dependency failed for Kubernetes Kubelet.": "failed",
        # systemd 252 (AL2023)
        "kubelet.service: Service RestartSec=5s expired, scheduling restart.": "restart-scheduled",
        "kubelet.service: Service has no hold-off time (RestartSec=0), scheduling restart.": (
            "restart-scheduled"
        ),
        "kubelet.service: Start request repeated too quickly.": "failed",
        "kubelet.service: Unit entered failed state.": "failed",
        "kubelet.service: Main process exited, code=killed, status=9/KILL": "failed",
        "Stopped kubelet.service - Kubernetes Kubelet with error.": "stopped",
        # other units and near misses
        "containerd.service failed.": None,
        "Unit kubelet-eks.service entered failed state.": None,
        "kubelet.service: Failed to open /run/systemd/transient/kubelet.service: ENOENT": None,
    }
    for message, expected in cases.items():
        assert classify_unit_message(message) == expected, message


def test_al2023_short_precise_restart_and_crash_loop() -> None:
    parsed = _corpus("kubelet-short-precise-al2023.log")
    assert parsed.problems == ()
    assert parsed.format == "short"
    assert parsed.boots == ("", "e81f3b5c9d2a4e6f8b0c1d3e5f7a9b2c")
    assert parsed.entries[0].time == datetime(2026, 11, 29, 3, 0, 41, 118220, tzinfo=UTC)
    actions = systemd_unit_actions([e for e in parsed.entries if e.boot == 0])
    # "Deactivated successfully" + "Stopped", "RestartSec expired" + "Scheduled restart job":
    # one event each.
    assert [a.action for a in actions] == [
        "starting", "started", "stopping", "stopped", "starting", "started", "failed",
        "restart-scheduled", "stopped", "starting", "started",
    ]  # fmt: skip
    assert (actions[2].time - actions[1].time).total_seconds() == 37.889  # the fixture's stamps


def test_local_time_offsets_become_utc() -> None:
    local = _corpus("kubelet-short-iso-local-time.log")
    utc = _corpus("kubelet-short-precise-al2023.log")
    assert local.problems == () and local.format == "short-iso"
    # short-iso has whole seconds: the same instants as the precise file, truncated.
    assert [e.time for e in local.entries] == [
        e.time.replace(microsecond=0) for e in utc.entries[: len(local.entries)]
    ]
    assert all(e.time.utcoffset() == timedelta(0) for e in local.entries)
    colon = parse_journal(f"2026-11-29T04:01:02+01:00 {HOST} kubelet[1]: systemd 256\n", "j")
    assert colon.entries[0].time == datetime(2026, 11, 29, 3, 1, 2, tzinfo=UTC)


def test_short_full_with_zones() -> None:
    parsed = _corpus("kubelet-short-full.log")
    assert parsed.problems == () and parsed.format == "short-full"
    assert parsed.entries[0].time == datetime(2026, 11, 29, 3, 0, 41, tzinfo=UTC)
    assert parsed.entries[0].message == "Starting kubelet.service - Kubernetes Kubelet..."
    text = (
        f"Sun 2026-11-29 04:01:02 +01 {HOST} systemd[1]: numeric zone\n"
        f"Sun 2026-11-29 03:01:02 CET {HOST} systemd[1]: named zone\n"
        f"Sun 2026-11-29 03:01:03 CET {HOST} systemd[1]: named zone again\n"
    )
    zoned = parse_journal(text, "j")
    assert [e.time.hour for e in zoned.entries] == [3, 3, 3]
    assert zoned.problems == ("time zone 'CET' has no known offset: its times are read as UTC",)


def test_year_less_times_take_the_year_that_is_not_after_the_reference() -> None:
    after_new_year = _corpus("kernel-short-precise-new-year.log", datetime(2027, 1, 2, tzinfo=UTC))
    assert [e.time.date().isoformat() for e in after_new_year.entries] == [
        "2026-12-31", "2027-01-01", "2027-01-01",
    ]  # fmt: skip
    # Collected just before midnight, the first minute of the new year is within a day ahead.
    before = _corpus(
        "kernel-short-precise-new-year.log", datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)
    )
    assert [e.time.year for e in before.entries] == [2026, 2027, 2027]
    # Read months later, they stay in the winter they happened.
    later = _corpus("kernel-short-precise-new-year.log", datetime(2027, 7, 1, tzinfo=UTC))
    assert [e.time.year for e in later.entries] == [2026, 2027, 2027]
    leap = parse_journal(
        f"Feb 29 10:00:00 {HOST} kernel: leap\n", "j", reference=datetime(2027, 3, 1, tzinfo=UTC)
    )
    assert leap.entries[0].time == datetime(2024, 2, 29, 10, tzinfo=UTC)
    impossible = parse_journal(f"Nov 31 10:00:00 {HOST} kernel: no\n", "j", reference=REFERENCE)
    assert impossible.entries == () and impossible.problems[0].startswith("line 1: bad timestamp")


def test_year_less_times_default_to_now() -> None:
    parsed = parse_journal(f"Jan 01 00:00:00 {HOST} kernel: x\n", "j")
    assert parsed.entries[0].time <= datetime.now(UTC) + timedelta(days=1)
    assert parsed.entries[0].time > datetime.now(UTC) - timedelta(days=367)


def test_json_output_of_systemd_252() -> None:
    parsed = _corpus("kubelet-json.jsonl")
    assert parsed.format == "json"
    assert parsed.boots == ("4c0e2a9d6b1f47e3a8d5c2b9f0e1a7d3", "e81f3b5c9d2a4e6f8b0c1d3e5f7a9b2c")
    first = parsed.entries[0]
    assert (first.time, first.host, first.ident, first.pid, first.line) == (
        datetime(2026, 11, 29, 3, 0, 41, 118220, tzinfo=UTC),
        AL23,
        "systemd",
        1,
        1,
    )
    # Over 4096 bytes without --all: journalctl wrote null. Not UTF-8: a byte array.
    assert parsed.entries[3].message == ""
    assert parsed.problems == (
        "line 4: MESSAGE left out (over 4096 bytes: journalctl -o json needs --all)",
    )
    assert parsed.entries[4].message.endswith('name="caf\ufffd"')
    assert [e.boot for e in parsed.entries] == [0] * 7 + [1, 1]
    actions = [a.action for a in systemd_unit_actions(parsed.entries)]
    assert actions == ["starting", "started", "stopping", "stopped", "starting", "started"]


def test_json_pretty_and_systemd_219_json_find_the_xid() -> None:
    pretty = _corpus("kernel-json-pretty.json")
    assert pretty.problems == () and pretty.format == "json"
    assert pretty.entries[1].line == 15  # the line its object opens on
    assert [(x.pci, x.xid) for x in xid_errors(pretty.entries)] == [XID79]
    al2 = _corpus("kernel-json-al2.jsonl")
    assert al2.problems == () and al2.format == "json"
    assert al2.entries[0].host == AL2
    assert [(x.pci, x.xid) for x in xid_errors(al2.entries)] == [XID79]


def test_json_sse_and_seq_and_odd_lines() -> None:
    doc = '{"__REALTIME_TIMESTAMP":"1795921241118220","MESSAGE":"a","SYSLOG_IDENTIFIER":"k"}'
    sse = parse_journal(f"data: {doc}\n\ndata: {doc}\n\n", "j")
    seq = parse_journal(f"\x1e{doc}\n\x1e{doc}\n", "j")
    for parsed in (sse, seq):
        assert parsed.problems == ()
        assert [e.message for e in parsed.entries] == ["a", "a"]
    odd = parse_journal(
        f"{doc}\n--output truncated--\n{doc[:-9]}\n" + '{"MESSAGE": "no time"}\n[1, 2]\n', "j"
    )
    assert [e.message for e in odd.entries] == ["a"]
    assert odd.problems[0] == "line 2: not a JSON object: '--output truncated--'"
    assert odd.problems[1].startswith("line 3: invalid JSON")
    assert odd.problems[2:] == (
        "line 4: no __REALTIME_TIMESTAMP",
        "line 5: not a JSON object: '[1, 2]'",
    )


def test_syslog_files_find_the_xid() -> None:
    for name in ("messages-al2", "messages-rfc3339"):
        parsed = _corpus(name, datetime(2026, 12, 8, tzinfo=UTC))
        assert parsed.problems == (), name
        xids = xid_errors(parsed.entries)
        assert [(x.pci, x.xid) for x in xids] == [("0000:00:1e", 48), ("0000:00:1e", 63)], name
        assert xids[0].time.replace(microsecond=0) == datetime(2026, 12, 7, 3, 17, 46, tzinfo=UTC)
    assert _corpus("messages-al2").format == "short"
    assert _corpus("messages-rfc3339").format == "short-iso"
    # Read with the reference of a week earlier, December 7 is last year's.
    assert xid_errors(_corpus("messages-al2").entries)[0].time.year == 2025


def test_dmesg_counts_seconds_since_boot() -> None:
    parsed = _corpus("dmesg.txt")
    assert parsed.format == "dmesg" and parsed.since_boot
    assert parsed.problems == ("dmesg times are seconds since boot: dated from 1970-01-01",)
    assert {(e.host, e.ident) for e in parsed.entries} == {("", "kernel")}
    xid = xid_errors(parsed.entries)
    assert [(x.pci, x.xid) for x in xid] == [XID79]
    assert xid[0].time == datetime(1970, 1, 1, 0, 17, 5, 716561, tzinfo=UTC)
    # The indented second line of a multi-line record belongs to it.
    adapter = next(e for e in parsed.entries if "RmInitAdapter" in e.message)
    assert adapter.message.endswith("rm_init_adapter failed, device minor number 2")
    decoded = parse_journal(
        "kern  :warn  : [ 1025.716561] NVRM: Xid (PCI:0000:75:00): 79, pid=0, GPU off the bus.\n"
        "<4>[ 1025.716573] NVRM: GPU 0000:75:00.0: GPU has fallen off the bus.\n",
        "j",
    )
    assert [(x.pci, x.xid) for x in xid_errors(decoded.entries)] == [XID79]
    assert len(decoded.entries) == 2


def test_dmesg_ctime_and_iso() -> None:
    parsed = _corpus("dmesg-T.txt")
    assert parsed.problems == () and parsed.format == "dmesg-ctime" and not parsed.since_boot
    xid = xid_errors(parsed.entries)
    assert [(x.pci, x.xid, x.time) for x in xid] == [
        (*XID79, datetime(2026, 11, 29, 3, 15, 6, tzinfo=UTC))
    ]
    iso = parse_journal(
        "2026-11-29T04:15:06,716561+01:00 NVRM: Xid (PCI:0000:75:00): 79, pid=0, GPU off.\n", "j"
    )
    assert iso.format == "dmesg-iso" and iso.problems == ()
    assert iso.entries[0].time == datetime(2026, 11, 29, 3, 15, 6, 716561, tzinfo=UTC)


def test_journal_short_unix_and_monotonic() -> None:
    unix = _corpus("kernel-short-unix.log")
    assert unix.problems == () and unix.format == "short-unix"
    assert xid_errors(unix.entries)[0].time == datetime(2026, 11, 29, 3, 15, 6, 716561, tzinfo=UTC)
    mono = _corpus("kernel-short-monotonic.log")
    assert mono.format == "short-monotonic" and mono.since_boot
    assert mono.problems == ("short-monotonic times are seconds since boot: dated from 1970-01-01",)
    assert mono.entries[-1].host == AL23
    assert mono.boots == ("", "e81f3b5c9d2a4e6f8b0c1d3e5f7a9b2c")
    assert [(x.pci, x.xid) for x in xid_errors(mono.entries)] == [XID79]
    assert {x.pci for x in xid_errors(mono.entries)} == {"0000:75:00"}


# `journalctl --no-hostname` (systemd-stable v252 and v255 src/shared/logs-show.c
# output_short: OUTPUT_NO_HOSTNAME drops the host, the identifier follows the time)
NO_HOSTNAME_STAMPS = {
    "short": ("Nov 29 03:01:02", "Nov 29 03:01:03"),
    "short-precise": ("Nov 29 03:01:02.123456", "Nov 29 03:01:03.000001"),
    "short-iso": ("2026-11-29T03:01:02+0000", "2026-11-29T03:01:03+0000"),
    "short-iso-precise": ("2026-11-29T03:01:02.123456+00:00", "2026-11-29T03:01:03.1+00:00"),
    "short-full": ("Sun 2026-11-29 03:01:02 UTC", "Sun 2026-11-29 03:01:03 UTC"),
    "short-unix": ("1795921262.123456", "1795921263.000001"),
    # as dmesg's, but the kernel's lines say `kernel:`, which dmesg never prints
    "short-monotonic": ("[    5.123456]", "[   12.000001]"),
}


@pytest.mark.parametrize("output", list(NO_HOSTNAME_STAMPS))
def test_no_hostname_output_keeps_the_identifier_and_the_xid(output: str) -> None:
    first, second = NO_HOSTNAME_STAMPS[output]
    text = (
        f"{first} kernel: NVRM: Xid (PCI:0000:53:00): 79, pid=0, GPU has fallen off the bus.\n"
        f"{second} systemd[1]: kubelet.service: Main process exited, code=exited, "
        "status=1/FAILURE\n"
    )
    parsed = parse_journal(text, "journal:kernel", REFERENCE)
    since_boot = "short-monotonic times are seconds since boot: dated from 1970-01-01"
    assert parsed.problems == ((since_boot,) if output == "short-monotonic" else ())
    kernel, systemd = parsed.entries
    assert (kernel.host, kernel.ident, kernel.pid) == ("", "kernel", None)
    assert (systemd.host, systemd.ident, systemd.pid) == ("", "systemd", 1)
    assert [(x.pci, x.xid) for x in xid_errors(parsed.entries)] == [("0000:53:00", 79)]
    assert [a.action for a in systemd_unit_actions(parsed.entries)] == ["failed"]


def test_dmesg_with_a_program_s_kmsg_line_stays_dmesg() -> None:
    """systemd writes to /dev/kmsg at boot, so dmesg shows a few `systemd[1]:` lines among
    the kernel's own (util-linux v2.37.4 sys-utils/dmesg.c prints the text as it is)."""
    text = (
        "[    0.000000] Linux version 6.1.112-124.190.amzn2023.x86_64\n"
        "[    3.123000] systemd[1]: Detected architecture x86-64.\n"
        "[    5.123456] NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "[    6.000000] nvidia-nvlink: Nvlink Core is being initialized\n"
    )
    parsed = parse_journal(text, "dmesg")
    assert parsed.format == "dmesg"
    assert [(x.pci, x.xid) for x in xid_errors(parsed.entries)] == [("0000:53:00", 79)]


def test_short_delta_keeps_a_boot_s_first_line() -> None:
    """short-delta writes 16 blanks where a line with an entry before it in its boot has
    ` <delta>` (v255 src/shared/logs-show.c output_timestamp_monotonic, `%16s`)."""
    text = (
        f"[  123.456789                ] {AL23} kernel: NVRM: Xid (PCI:0000:75:00): 79, pid=0, "
        "GPU has fallen off the bus.\n"
        f"[  124.000001 <    0.543212 >] {AL23} kernel: NVRM: GPU 0000:75:00.0: GPU has fallen "
        "off the bus.\n"
    )
    parsed = parse_journal(text, "journal:kernel")
    assert parsed.format == "short-monotonic" and len(parsed.entries) == 2
    assert [(x.pci, x.xid) for x in xid_errors(parsed.entries)] == [("0000:75:00", 79)]
    assert parsed.entries[0].time == datetime(1970, 1, 1, 0, 2, 3, 456789, tzinfo=UTC)


def test_detection_tolerates_a_few_odd_lines() -> None:
    text = (CORPUS / "kubelet-short-al2.log").read_text(encoding="utf-8")
    lines = text.splitlines()
    noisy = "\n".join(
        ["Hint: You are currently not seeing messages from other users and the system.",
         *lines[:5], "--output truncated--", *lines[5:]]
    )  # fmt: skip
    parsed = parse_journal(noisy, "j", reference=REFERENCE)
    assert parsed.format == "short"
    assert len(parsed.entries) == len(_corpus("kubelet-short-al2.log").entries)
    assert [p.split(":")[0] for p in parsed.problems] == ["line 1", "line 7"]
    no_host = parse_journal("Nov 29 03:00:41 kubelet[3866]: no hostname\n", "j", REFERENCE)
    assert no_host.problems == ()
    assert (no_host.entries[0].ident, no_host.entries[0].pid) == ("kubelet", 3866)


def test_xid_attributed_to_a_mig_instance() -> None:
    text = (
        f"2026-11-29T02:20:14.902124+0000 {HOST} kernel: NVRM: Xid (PCI:0000:ca:00 GPU-I:05): 94, "
        "pid=51320, name=python3, Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
        f"2026-11-29T02:20:15.117430+0000 {HOST} kernel: NVRM: Xid (PCI:0000:ca:00 GPU-I:05 "
        "GPU-CI:00): 43, pid=51320, name=python3, Ch 00000018\n"
    )
    xids = xid_errors(parse_journal(text, "journal:kernel").entries)
    assert [(x.pci, x.xid) for x in xids] == [("0000:ca:00", 94), ("0000:ca:00", 43)]
