from __future__ import annotations

from pathlib import Path

from mignurse.evidence import parse_cgroup_fs, parse_os_release

FIXTURES = Path(__file__).parent / "fixtures"


def test_cgroup_versions() -> None:
    assert parse_cgroup_fs("cgroup2fs\n").version == 2
    v1 = parse_cgroup_fs("tmpfs\n")
    assert (v1.version, v1.fs_type, v1.problems) == (1, "tmpfs", ())


def test_cgroup_odd_outputs() -> None:
    empty = parse_cgroup_fs("")
    assert (empty.version, empty.problems) == (None, ("empty cgroup-fs output",))
    failed = parse_cgroup_fs(
        "stat: cannot read file system information for '/sys/fs/cgroup': No such file\n"
    )
    assert failed.version is None and failed.fs_type == ""
    assert failed.problems[0].startswith("unrecognised filesystem type")
    extra = parse_cgroup_fs("cgroup2fs\nsomething else\n")
    assert extra.version == 2
    assert extra.problems == ("unexpected extra output: 'something else'",)


def test_al2023() -> None:
    release = parse_os_release((FIXTURES / "os-release-al2023").read_text())
    assert release.problems == ()
    assert (release.id, release.version_id) == ("amzn", "2023")
    assert release.pretty_name == "Amazon Linux 2023.9.20251110"
    assert release.is_al2023 and not release.is_bottlerocket and not release.is_al2
    assert release.fields["PLATFORM_ID"] == "platform:al2023"


def test_bottlerocket() -> None:
    release = parse_os_release((FIXTURES / "os-release-bottlerocket").read_text())
    assert release.problems == ()
    assert release.is_bottlerocket
    assert release.variant_id == "aws-k8s-1.33-nvidia"
    assert release.version_id == "1.50.0"
    assert release.pretty_name == "Bottlerocket OS 1.50.0 (aws-k8s-1.33-nvidia)"


def test_quotes_comments_and_escapes() -> None:
    text = (
        "# written by hand\n"
        "\n"
        "ID='amzn'\n"
        'VERSION_ID="2"\n'
        'PRETTY_NAME="Say \\"hi\\" for \\$5"  \n'
        "  # indented comment\n"
        "NAME=Plain\\ Value\n"
    )
    release = parse_os_release(text)
    assert release.problems == ()
    assert release.is_al2
    assert release.pretty_name == 'Say "hi" for $5'
    assert release.fields["NAME"] == "Plain\\ Value"


def test_bad_lines_empty_and_missing_id() -> None:
    release = parse_os_release('garbage line\nVERSION_ID="2023\n')
    assert release.version_id == "2023"
    assert release.problems == (
        "line 1: not KEY=value: 'garbage line'",
        "line 2: VERSION_ID: unterminated quote",
        "no ID field",
    )
    assert parse_os_release("").problems == ("empty os-release",)
