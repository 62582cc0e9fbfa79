"""Flags and settings that make no sense are refused in one line (exit 2) before anything is
printed, connected to or changed: a negative timeout, a window of 10^23 days, a
state folder that is a file. The SSH hint names the known_hosts entry as OpenSSH wrote it."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from mignurse.nodeaccess.ssh import SSHShell
from mignurse.sim import SimCluster

from .inputs import mignurse, one_line_error


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_collect_timeout_must_be_positive_seconds(value: str) -> None:
    err = one_line_error(mignurse("collect", "--timeout", value, "some-node"))
    assert f"--timeout {value}" in err and "positive number of seconds" in err


def test_a_journal_window_past_a_year_is_refused() -> None:
    err = one_line_error(mignurse("collect", "--since", "99999999999999999999999d", "n"))
    assert "--since 99999999999999999999999d is over a year" in err
    err = one_line_error(mignurse("collect", "--since", "366d", "n"))
    assert "at most 365d" in err


def test_watch_progress_every_nan_is_refused() -> None:
    err = one_line_error(mignurse("watch", "--progress-every", "nan"))
    assert "--progress-every nan" in err


def test_a_state_home_that_is_a_file_is_refused_before_the_plan(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = healthy
    state_file = tmp_path / "state"
    state_file.write_text("not a folder\n")
    env = {"XDG_STATE_HOME": str(state_file), "HOME": str(tmp_path)}
    node = sim.objects("nodes")[0]["metadata"]["name"]
    k = ("--kubeconfig", str(kubeconfig))
    run = mignurse(*k, "run", "cordon", "--node", node, "--dry-run", env=env)
    err = one_line_error(run)
    assert run.stdout == "" and "XDG_STATE_HOME" in err and f"{state_file} is not a folder" in err
    assert "XDG_STATE_HOME" in one_line_error(mignurse("runs", env=env))
    watch = one_line_error(mignurse(*k, "watch", env=env))
    assert "XDG_STATE_HOME" in watch and "history" in watch
    # A usable one: the same dry run shows its plan.
    env["XDG_STATE_HOME"] = str(tmp_path / "fine")
    ok = mignurse(*k, "run", "cordon", "--node", node, "--dry-run", "-o", "json", env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "dry-run"


def test_the_changed_key_hint_names_the_known_hosts_entry_with_its_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodeaccess.sshd import running_sshd

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    with running_sshd(tmp_path / "sshd") as server:
        wrong = " ".join(Path(f"{other}.pub").read_text().split()[:2])
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(f"[{server.host}]:{server.port} {wrong}\n")
        shell = SSHShell(
            "node-a",
            server.host,
            user=server.user,
            port=server.port,
            key_filename=str(server.client_key),
            ssh_config=None,
            known_hosts=str(known_hosts),
            connect_timeout=5.0,
        )
        result = shell.run("true", timeout=10, stdout=io.BytesIO())
    assert "CHANGED" in result.error
    assert f"ssh-keygen -R '[{server.host}]:{server.port}' -f {known_hosts}" in result.error
    assert f"ssh-keyscan -p {server.port} {server.host}" in result.error
