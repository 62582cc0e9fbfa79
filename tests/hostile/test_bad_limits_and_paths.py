"""Values a user sets that no consumer can take, and paths that cannot be what they are named
for: a `MIGNURSE_*` limit past what a read or a `select` accepts, a duration past what a
datetime holds, a state folder the OS will not make, a `--kubeconfig-out` that is a folder
or a FIFO, a runbook that is a link out of its folder, a context name full of escapes. Each
is one `mignurse: error:` line (exit 2) or one skipped-runbook warning, never an internal
error, a hang, or a read or write through a link."""

from __future__ import annotations

import os
import selectors
import stat
import sys
from pathlib import Path

import pytest
import yaml

from mignurse import untrusted
from mignurse.cluster import fleet
from mignurse.paths import StateFileError, private_dir
from mignurse.runner.schema import (
    RunbookError,
    duration_seconds,
    load_runbooks,
    resolve_params,
)
from mignurse.sim import SimCluster
from mignurse.untrusted import Limit, LimitError, read_regular_file

from .inputs import mignurse, one_line_error

SHIPPED = Path(__file__).parent.parent.parent / "runbooks"
CORDON = (SHIPPED / "cordon.yaml").read_text()
BAIT = b"someone else's file\n"
YEAR = 365 * 86400  # the longest duration taken, as `collect --since`


def _offline_kubeconfig(tmp_path: Path, user: dict[str, object] | None = None) -> Path:
    """A kubeconfig whose server nobody listens on: what is refused is refused before."""
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "prod",
                "clusters": [{"name": "prod", "cluster": {"server": "https://127.0.0.1:9"}}],
                "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "prod"}}],
                "users": [{"name": "prod", "user": user or {"token": "t0ken"}}],
            }
        )
    )
    return path


# -- 1. a MIGNURSE_* limit has a largest value ------------------------------------------------


def _limits() -> list[Limit]:
    """Every Limit the code defines (`Limit(` is used in these two modules only)."""
    found = [v for v in vars(untrusted).values() if isinstance(v, Limit)]
    found += [v for v in vars(fleet).values() if isinstance(v, Limit)]
    return found


@pytest.mark.parametrize("limit", _limits(), ids=lambda limit: limit.env)
def test_every_limit_refuses_a_value_past_its_largest_in_one_line(
    limit: Limit, monkeypatch: pytest.MonkeyPatch
) -> None:
    most = getattr(limit, "most", None)
    assert isinstance(most, int) and most >= limit.default, f"{limit.env} has no largest value"
    monkeypatch.setenv(limit.env, str(most))
    assert limit.value() == most
    for over in (str(most + 1), "99999999999999999999999", "9" * 5000):
        monkeypatch.setenv(limit.env, over)
        with pytest.raises(LimitError) as caught:
            limit.value()
        line = str(caught.value)
        assert line.startswith(f"{limit.env}=") and "give at most" in line, line
        assert "\n" not in line and len(line) < 200, line


@pytest.mark.parametrize(
    "limit", [lim for lim in _limits() if lim.unit == "seconds"], ids=lambda lim: lim.env
)
def test_the_largest_seconds_are_a_timeout_select_takes(
    limit: Limit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential plugin's pipes are waited on with `select` (epoll: milliseconds in a C
    int); a fleet waits a command's seconds plus the plugin's."""
    monkeypatch.setenv(limit.env, str(getattr(limit, "most", 10**12)))
    reader, writer = os.pipe()
    try:
        os.write(writer, b"x")  # ready at once: the timeout is only checked, never waited
        with selectors.DefaultSelector() as selector:
            selector.register(reader, selectors.EVENT_READ)
            assert selector.select(limit.value() * 2 + 5)
    finally:
        os.close(reader)
        os.close(writer)


def test_a_read_cap_at_its_largest_costs_no_memory_a_small_file_does_not_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"apiVersion: v1\n")
    limit = untrusted.KUBECONFIG_BYTES
    monkeypatch.setenv(limit.env, "1T")
    assert read_regular_file(small, limit, "kubeconfig") == b"apiVersion: v1\n"


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ("MIGNURSE_MAX_KUBECONFIG_BYTES", ("nodes",)),
        ("MIGNURSE_MAX_RUNBOOK_BYTES", ("runbooks",)),
        ("MIGNURSE_CREDENTIAL_PLUGIN_SECONDS", ("nodes",)),
        ("MIGNURSE_REQUEST_TIMEOUT", ("nodes",)),
    ],
)
def test_a_huge_limit_is_one_line_naming_it_and_its_largest(
    tmp_path: Path, env: str, args: tuple[str, ...]
) -> None:
    plugin: dict[str, object] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", "print('{}')"],
        }
    }
    config = _offline_kubeconfig(tmp_path, plugin if "PLUGIN" in env else None)
    huge = "3000000" if env.endswith(("SECONDS", "TIMEOUT")) else "99999999999999999999999"
    result = mignurse("--kubeconfig", str(config), *args, env={env: huge}, timeout=60)
    err = one_line_error(result)
    assert f"{env}='{huge}' is over the largest value it takes: give at most " in err, err


# -- 2. a duration has a largest value --------------------------------------------------------


@pytest.mark.parametrize("horizon", ["99999999999d", "999999999d", "366d", "9" * 5000 + "d"])
def test_a_radar_horizon_past_a_year_is_one_line(tmp_path: Path, horizon: str) -> None:
    config = _offline_kubeconfig(tmp_path)
    result = mignurse("--kubeconfig", str(config), "radar", "--horizon", horizon, timeout=60)
    err = one_line_error(result)
    assert err.startswith("mignurse: error: --horizon: '"), err
    assert err.endswith("' is over a year: give at most 365d"), err


def test_a_duration_is_at_most_a_year() -> None:
    assert duration_seconds("365d") == YEAR
    for text in ("366d", "8761h", "525601m", "31536001s", "99999999999d", "9" * 5000 + "s"):
        with pytest.raises(ValueError, match=r"is over a year: give at most 365d"):
            duration_seconds(text)


def test_a_duration_param_past_a_year_is_refused_naming_the_param() -> None:
    book = load_runbooks(SHIPPED)["cordon-and-collect"]
    with pytest.raises(RunbookError, match=r"^cordon-and-collect: since: '99999999999d' is over"):
        resolve_params(book, {"node": "ip-10-0-1-2", "since": "99999999999d"})


def test_a_step_timeout_past_a_year_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    step = "    action: cordon\n"
    head = "title: T\ntarget: node\nparams:\n  node: {type: node, required: true}\n"
    (folder / "inf.yaml").write_text(
        f"name: inf\n{head}steps:\n  - id: c\n{step}    timeout: .inf\n"
    )
    (folder / "secs.yaml").write_text(
        f"name: secs\n{head}  secs: {{type: int, default: 60}}\n"
        f"steps:\n  - id: c\n{step}    timeout: secs\n"
    )
    problems: dict[str, str] = {}
    books = load_runbooks(folder, problems)
    assert "over a year" in problems.get("inf", ""), problems
    with pytest.raises(RunbookError, match=r"^secs: secs: 99999999999999999999 s is over a year"):
        resolve_params(books["secs"], {"node": "n", "secs": "99999999999999999999"})


# -- 3. a state folder the OS will not make ----------------------------------------------------


def _dangling(tmp_path: Path) -> tuple[Path, Path]:
    link = tmp_path / "state-link"
    nowhere = tmp_path / "nowhere"
    link.symlink_to(nowhere)
    return link, nowhere


def test_a_state_folder_under_a_dangling_link_is_refused_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    link, nowhere = _dangling(tmp_path)
    with pytest.raises(StateFileError, match=r"state-link is a symlink; .* remove it$"):
        private_dir(link / "history")
    assert not nowhere.exists()


@pytest.mark.parametrize(
    "where",
    ["dangling", "/proc/mignurse-x", "/sys/mignurse-x", "long", "under-a-file"],
)
def test_watch_with_a_state_dir_that_cannot_be_made_is_one_line(
    healthy: tuple[SimCluster, Path], tmp_path: Path, where: str
) -> None:
    _sim, kubeconfig = healthy
    if where == "dangling":
        state, nowhere = _dangling(tmp_path)
    elif where == "long":
        state = tmp_path / ("a" * 300)
    elif where == "under-a-file":
        (tmp_path / "file").write_bytes(BAIT)
        state = tmp_path / "file" / "state"
    else:
        state = Path(where)
    result = mignurse(
        "--kubeconfig", str(kubeconfig), "watch", "--state-dir", str(state), timeout=60
    )
    err = one_line_error(result)
    if where == "dangling":
        assert f"{state} is a symlink; mignurse never follows links" in err, err
        assert err.endswith("remove it"), err
        assert not nowhere.exists()
    else:
        assert str(state)[:40] in err, err


def test_a_run_with_a_state_home_the_os_refuses_is_one_line_and_changes_nothing(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = healthy
    node = sorted(n["metadata"]["name"] for n in sim.objects("nodes"))[0]
    result = mignurse(
        "--kubeconfig", str(kubeconfig), "run", "cordon", "--node", node, "--yes",
        env={"XDG_STATE_HOME": "/proc/mignurse-xx", "HOME": str(tmp_path)},
        timeout=60,
    )  # fmt: skip
    err = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and "internal error" not in result.stderr, result.stderr
    assert err.startswith("mignurse: error: cannot make the state folder /proc/mignurse-xx"), err
    assert err.endswith("set XDG_STATE_HOME to a folder you can write in"), err
    node_now = next(n for n in sim.objects("nodes") if n["metadata"]["name"] == node)
    assert not node_now["spec"].get("unschedulable")


# -- 4. sim serve --kubeconfig-out --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink"])
def test_sim_serve_refuses_a_kubeconfig_out_that_is_not_a_file(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "kubeconfig"
    bait = tmp_path / "bait"
    bait.write_bytes(BAIT)
    if kind == "folder":
        out.mkdir()
    elif kind == "fifo":
        os.mkfifo(out)  # no reader: writing it would wait forever
    else:
        out.symlink_to(bait)
    result = mignurse(
        "sim", "serve", "--scenario", "healthy", "--kubeconfig-out", str(out), timeout=60
    )
    err = one_line_error(result)
    assert err.startswith(f"mignurse: error: cannot write {out}: it is "), err
    assert "--kubeconfig-out takes a regular file" in err, err
    assert result.stdout == ""  # refused before anything was served
    assert bait.read_bytes() == BAIT


def test_the_simulator_writes_its_kubeconfig_0600_and_never_through_a_link(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, _kubeconfig = healthy
    old = tmp_path / "old"
    old.write_bytes(b"x")
    old.chmod(0o644)
    sim.write_kubeconfig(old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert yaml.safe_load(old.read_text())["kind"] == "Config"
    bait = tmp_path / "bait"
    bait.write_bytes(BAIT)
    (tmp_path / "link").symlink_to(bait)
    with pytest.raises(StateFileError, match="is a symlink"):
        sim.write_kubeconfig(tmp_path / "link")
    assert bait.read_bytes() == BAIT


# -- 5. a runbook that is a link --------------------------------------------------------------


def test_a_runbook_that_is_a_link_is_skipped_unread_under_the_name_it_has_in_the_folder(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "link.yaml").write_text(CORDON.replace("name: cordon", "name: link"))
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "cordon.yaml").write_text(CORDON)
    (folder / "link.yaml").symlink_to(outside / "link.yaml")
    (folder / "passwd.yaml").symlink_to("/etc/passwd")

    problems: dict[str, str] = {}
    books = load_runbooks(folder, problems)
    assert sorted(books) == ["cordon"]
    assert problems["link"].endswith("runbooks/link.yaml is a symlink: not followed")
    assert problems["passwd"].endswith("runbooks/passwd.yaml is a symlink: not followed")

    env = {"MIGNURSE_RUNBOOKS": str(folder), "XDG_STATE_HOME": str(tmp_path / "state")}
    result = mignurse("runbooks", env=env, timeout=60)
    assert result.returncode == 1, result.stderr
    assert sorted(result.stderr.splitlines()) == [
        "mignurse: warning: runbook skipped: runbooks/link.yaml is a symlink: not followed",
        "mignurse: warning: runbook skipped: runbooks/passwd.yaml is a symlink: not followed",
    ]


# -- 6. a context name is escaped once -------------------------------------------------------------


@pytest.mark.parametrize("glob", ["", "*"])
def test_a_context_name_with_escapes_is_shown_inert_once(tmp_path: Path, glob: str) -> None:
    config = _offline_kubeconfig(tmp_path)
    name = "x\x1b]0;T\x07\u202e" + glob
    result = mignurse("--kubeconfig", str(config), "--context", name, "nodes", timeout=60)
    err = one_line_error(result)
    assert f"context 'x\\x1b]0;T\\x07<U+202E>{glob}' not found in " in err, err
    assert "\\\\" not in err and "\x1b" not in err and "\u202e" not in err, err


def test_a_current_context_the_file_does_not_define_is_shown_as_a_named_one_is(
    tmp_path: Path,
) -> None:
    """The kubeconfig's own current-context took another path, and printed repr()'s escapes."""
    config = _offline_kubeconfig(tmp_path)
    config.write_text(
        config.read_text().replace("current-context: prod", 'current-context: "x\\e]0;T\\a\\u202E"')
    )
    result = mignurse("--kubeconfig", str(config), "nodes", timeout=60)
    err = one_line_error(result)
    assert f"context 'x\\x1b]0;T\\x07<U+202E>' not found in {config}" in err, err
