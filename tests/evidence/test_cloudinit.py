from __future__ import annotations

import json
from pathlib import Path

from mignurse.evidence import parse_cloud_init_status

FIXTURES = Path(__file__).parent / "fixtures"


def test_done_with_recoverable_errors_is_not_a_failure() -> None:
    # cloud-init ≥ 23.4 exits 2 here; the node bootstrapped (domain.md §4.5).
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
    assert status.datasource == "ec2"
    assert status.detail == "DataSourceEc2Local"
    assert status.last_update == "Sun, 29 Nov 2026 03:00:56 +0000"
    assert status.stage == ""


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


def test_plain_text_form_is_read_with_a_problem() -> None:
    text = (
        "status: done\nextended_status: degraded done\nboot_status_code: enabled-by-generator\n"
        "last_update: Sun, 29 Nov 2026 03:00:56 +0000\ndetail: DataSourceEc2Local\n"
    )
    status = parse_cloud_init_status(text)
    assert (status.status, status.extended_status) == ("done", "degraded done")
    assert status.degraded and not status.failed
    assert status.problems == ("not JSON; read the plain `cloud-init status` form",)


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
    assert "status.json" in nested.problems[0]
