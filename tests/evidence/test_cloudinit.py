from __future__ import annotations

import json
from pathlib import Path

from mignurse.evidence import parse_cloud_init_files, parse_cloud_init_status

FIXTURES = Path(__file__).parent / "fixtures"


def test_done_with_recoverable_errors_is_not_a_failure() -> None:
    # cloud-init ≥ 23.4 exits 2 here; the node bootstrapped (canonical/cloud-init 23.4
    # cloudinit/cmd/status.py).
    status = parse_cloud_init_status((FIXTURES / "cloud-init-status-degraded.json").read_text())
    assert status.problems == ()
    assert (status.status, status.extended_status) == ("done", "degraded done")
    assert not status.failed
    assert status.done and status.degraded
    assert status.errors == ()
    assert dict(status.recoverable_errors) == {
        "WARNING": (
            "Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)",
        )
    }
    assert status.boot_status_code == "enabled-by-generator"
    assert status.datasource == "ec2local"
    assert status.detail == "DataSourceEc2Local"
    # Since 24.2 the stage times are seconds since boot, and cloud-init prints them as 1970.
    assert status.last_update == "Thu, 01 Jan 1970 00:00:41 +0000"
    assert status.stage == ""
    assert status.form == "status-json"


def test_error_is_a_failure_with_its_messages() -> None:
    status = parse_cloud_init_status((FIXTURES / "cloud-init-status-error.json").read_text())
    assert status.problems == ()
    assert status.failed and not status.done
    assert status.extended_status == "error - done"
    assert status.errors == (
        "('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))",
    )
    assert list(status.stage_errors) == ["modules-final"]


def test_older_cloud_init_without_extended_status() -> None:
    old = {
        "boot_status_code": "enabled-by-generator",
        "datasource": "ec2",
        "detail": "DataSourceEc2Local",
        "errors": [],
        "last_update": "Sun, 29 Nov 2026 03:00:56 +0000",
        "status": "done",
        "stage": None,
    }
    status = parse_cloud_init_status(json.dumps(old, indent=1))
    assert status.problems == ()
    assert status.extended_status == "done"
    assert dict(status.recoverable_errors) == {}
    assert not status.failed and not status.degraded


def test_running_and_disabled() -> None:
    running = parse_cloud_init_status(
        '{"status": "running", "extended_status": "running", "stage": "modules-final", '
        '"errors": [], "recoverable_errors": {}}'
    )
    assert (running.status, running.stage, running.failed) == ("running", "modules-final", False)
    disabled = parse_cloud_init_status(
        '{"status": "disabled", "boot_status_code": "disabled-by-generator", "errors": []}'
    )
    assert disabled.status == "disabled" and not disabled.failed


def test_empty_text_and_junk_are_problems() -> None:
    empty = parse_cloud_init_status("")
    assert empty.problems == ("empty cloud-init status output",)
    assert empty.status == "" and not empty.failed and not empty.readable
    junk = parse_cloud_init_status("sh: cloud-init: command not found\n")
    assert junk.status == ""
    assert junk.problems == ("not cloud-init status output: 'sh: cloud-init: command not found'",)
    broken = parse_cloud_init_status('{"status": "done", "errors": [')
    assert broken.status == ""
    assert broken.problems[0].startswith("invalid JSON")


def test_truncated_ssm_output_keeps_what_parsed() -> None:
    text = '{"status": "done", "extended_status": "done", "errors": []}\n--output truncated--\n'
    status = parse_cloud_init_status(text)
    assert status.status == "done"
    assert status.problems == ("text after the JSON: '--output truncated--'",)


def test_plain_text_form_is_an_answer_too() -> None:
    text = (
        "status: done\nextended_status: degraded done\nboot_status_code: enabled-by-generator\n"
        "last_update: Sun, 29 Nov 2026 03:00:56 +0000\ndetail: DataSourceEc2Local\n"
    )
    status = parse_cloud_init_status(text)
    assert (status.status, status.extended_status) == ("done", "degraded done")
    assert status.degraded and not status.failed
    assert (status.detail, status.datasource, status.form) == (
        "DataSourceEc2Local",
        "ec2local",
        "status-text",
    )
    assert status.problems == ()


def test_odd_shapes_do_not_crash() -> None:
    status = parse_cloud_init_status(
        '{"status": "weird", "errors": "one string", "recoverable_errors": ["not", "a", "map"]}'
    )
    assert status.errors == ("one string",)
    assert status.problems == (
        "unknown status 'weird'",
        "recoverable_errors: expected an object of level → messages",
    )
    assert parse_cloud_init_status("[1, 2]").problems == ("not cloud-init status output: '[1, 2]'",)
    assert parse_cloud_init_status('{"a": 1').problems[0].startswith("invalid JSON")
    nested = parse_cloud_init_status('{"v1": {"stage": null, "init": {"errors": ["x"]}}}')
    assert nested.errors == ("x",)
    assert nested.form == "status-files" and nested.problems == ()


# -- every release's answer, from the corpus ------------------------------------------------

CORPUS = Path(__file__).parents[1] / "corpus" / "cloud-init"
ERR = "('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"
WARN = "Failed to run module scripts_user (scripts in /var/lib/cloud/instance/scripts)"


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def test_al2023_cloud_init_22_2_2_long_text_reads_as_done() -> None:
    # AL2023 ships 22.2.2: no --format json, only `status --long` text with "detail:" on its own.
    status = parse_cloud_init_status(_corpus("status-long-22.2.2-done.txt"))
    assert status.problems == ()
    assert (status.status, status.extended_status, status.form) == ("done", "done", "status-text")
    assert status.done and not status.failed and not status.degraded
    assert (status.detail, status.datasource) == ("DataSourceEc2Local", "ec2local")
    assert status.last_update == "Sun, 29 Nov 2026 03:00:52 +0000"


def test_22_2_2_error_lists_its_errors_as_the_detail() -> None:
    status = parse_cloud_init_status(_corpus("status-long-22.2.2-error.txt"))
    assert status.problems == ()
    assert status.failed and status.errors == (ERR,)
    assert status.datasource == ""  # the detail is the errors, not the datasource


def test_the_usage_error_of_format_json_says_what_happened() -> None:
    status = parse_cloud_init_status(_corpus("status-format-json-22.2.2-stderr.txt"))
    assert not status.readable
    assert status.problems == (
        "this cloud-init has no `status --format json` (before 22.4): "
        "`cloud-init status --long` answers",
    )


def test_23_1_and_23_4_long_text() -> None:
    old = parse_cloud_init_status(_corpus("status-long-23.1.txt"))
    assert old.problems == ()
    assert (old.status, old.boot_status_code, old.detail) == (
        "done",
        "enabled-by-generator",
        "DataSourceEc2Local",
    )
    degraded = parse_cloud_init_status(_corpus("status-long-23.4-degraded.txt"))
    assert degraded.problems == ()
    assert (degraded.status, degraded.extended_status) == ("done", "degraded done")
    assert degraded.errors == () and not degraded.failed
    assert dict(degraded.recoverable_errors) == {"WARNING": (WARN,)}


def test_26_2_long_text_with_detail_on_one_line_and_error_items() -> None:
    status = parse_cloud_init_status(_corpus("status-long-26.2-error.txt"))
    assert status.problems == ()
    assert (status.status, status.extended_status) == ("error", "error - done")
    assert status.failed and status.errors == (ERR,)
    assert dict(status.recoverable_errors) == {"WARNING": (WARN,)}
    assert (status.detail, status.datasource) == ("DataSourceEc2Local", "ec2local")
    assert status.last_update == "Thu, 01 Jan 1970 00:00:39 +0000"


def test_json_of_22_4_and_23_4() -> None:
    first = parse_cloud_init_status(_corpus("status-json-22.4.json"))
    assert first.problems == ()
    assert (first.status, first.extended_status, first.datasource) == ("done", "done", "ec2local")
    degraded = parse_cloud_init_status(_corpus("status-json-23.4-degraded.json"))
    assert degraded.problems == ()
    assert degraded.degraded and degraded.done and not degraded.failed
    assert dict(degraded.recoverable_errors) == {"WARNING": (WARN,)}
    assert dict(degraded.stage_errors) == {}


def test_status_and_result_files_of_22_2_2() -> None:
    status = parse_cloud_init_files(
        _corpus("run-status-22.2.2-error.json"), _corpus("run-result-22.2.2-error.json")
    )
    assert status.problems == ()
    assert (status.status, status.extended_status, status.form) == (
        "error",
        "error - done",
        "status-files",
    )
    assert status.errors == (ERR,)
    assert dict(status.stage_errors) == {"modules-final": (ERR,)}
    assert (status.datasource, status.detail) == ("ec2local", "DataSourceEc2Local")
    # 22.2.2 stamps stages with time.time(): the latest one is the last update.
    assert status.last_update == "Sun, 29 Nov 2026 03:00:52 +0000"
    result_only = parse_cloud_init_files(None, _corpus("run-result-22.2.2-error.json"))
    assert (result_only.status, result_only.errors) == ("error", (ERR,))


def test_status_file_without_result_is_still_running() -> None:
    # 26.2 stamps stages with seconds since boot: no last_update is made up from them.
    status = parse_cloud_init_files(_corpus("run-status-26.2-running.json"), None)
    assert status.problems == ()
    assert (status.status, status.extended_status, status.stage) == (
        "running",
        "degraded running",
        "init",
    )
    assert status.detail == "Running in stage: init" and status.last_update == ""
    assert dict(status.recoverable_errors) == {
        "WARNING": ("Failed to bring up network interface ens5: timed out",)
    }
    # The same file handed to parse_cloud_init_status alone reads the same way.
    alone = parse_cloud_init_status(_corpus("run-status-26.2-running.json"))
    assert (alone.status, alone.stage) == ("running", "init")


def test_unreadable_status_files_are_problems() -> None:
    assert parse_cloud_init_files(None, None).problems == ("neither status.json nor result.json",)
    broken = parse_cloud_init_files("{", '{"v2": {}}')
    assert not broken.readable
    assert broken.problems[0].startswith("status.json is not JSON")
    assert broken.problems[1] == "result.json has no v1 object"
