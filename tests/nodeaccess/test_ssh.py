"""SSHShell against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mignurse.nodeaccess.base import CANCELLED
from mignurse.nodeaccess.ssh import STDERR_TAIL_BYTES, SSHShell

from .sshd import Sshd, free_port, running_sshd

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's ssh-agent would offer extra keys and hide authentication failures.
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def _known_hosts(tmp_path: Path, server: Sshd, key: str | None = None) -> Path:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{server.host}]:{server.port} {key or server.host_key_pub}\n")
    return kh


def _shell(server: Sshd, tmp_path: Path, **kw: object) -> SSHShell:
    args: dict[str, object] = {
        "user": server.user,
        "port": server.port,
        "key_filename": str(server.client_key),
        "ssh_config": None,
        "connect_timeout": 5.0,
    }
    args.update(kw)
    if "known_hosts" not in kw:
        args["known_hosts"] = str(_known_hosts(tmp_path, server))
    return SSHShell("node-a", server.host, **args)  # type: ignore[arg-type]


class _Sink(io.RawIOBase):
    """Counts and hashes instead of holding 50 MB."""

    def __init__(self) -> None:
        self.n = 0
        self.h = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.n += len(b)
        self.h.update(b)
        return len(b)


def test_stdout_and_rc_zero(sshd: Sshd, tmp_path: Path) -> None:
    out = io.BytesIO()
    script = 'echo hello\nprintf \'%s\\n\' "it\'s \\"quoted\\" \\$HOME"\n'
    r = _shell(sshd, tmp_path).run(script, timeout=20, stdout=out)
    assert r.error == "" and r.rc == 0 and r.ok, r
    assert out.getvalue() == b'hello\nit\'s "quoted" $HOME\n'
    assert r.bytes_out == len(out.getvalue())
    assert r.transport == "ssh" and r.node == "node-a"


def test_commands_reading_stdin_do_not_eat_the_script(sshd: Sshd, tmp_path: Path) -> None:
    out = io.BytesIO()
    r = _shell(sshd, tmp_path).run("cat\necho after\n", timeout=20, stdout=out)
    assert r.rc == 0, r
    assert out.getvalue() == b"after\n"


def test_nonzero_rc_keeps_stderr_tail(sshd: Sshd, tmp_path: Path) -> None:
    out = io.BytesIO()
    script = "head -c 20000 /dev/zero | tr '\\0' x >&2\necho LAST >&2\nexit 3\n"
    r = _shell(sshd, tmp_path).run(script, timeout=20, stdout=out)
    assert r.rc == 3 and not r.ok and r.error == "", r
    assert r.stderr_tail.endswith("xLAST\n")
    assert len(r.stderr_tail) == STDERR_TAIL_BYTES


def test_large_stdout_and_stderr_do_not_deadlock(sshd: Sshd, tmp_path: Path) -> None:
    sink = _Sink()
    # stderr first: a reader that only drains stdout would stall once stderr's window fills.
    script = (
        "head -c 5242880 /dev/zero | tr '\\0' e >&2\nhead -c 52428800 /dev/zero\necho done >&2\n"
    )
    r = _shell(sshd, tmp_path).run(script, timeout=45, stdout=sink)  # type: ignore[arg-type]
    assert r.rc == 0 and not r.timed_out, r
    assert sink.n == r.bytes_out == 50 * 1024 * 1024
    assert sink.h.hexdigest() == hashlib.sha256(bytes(50 * 1024 * 1024)).hexdigest()
    assert r.stderr_tail.endswith("eeedone\n")


def test_timeout_returns_promptly(sshd: Sshd, tmp_path: Path) -> None:
    out = io.BytesIO()
    t0 = time.monotonic()
    r = _shell(sshd, tmp_path).run("echo started\nsleep 90\necho never\n", timeout=1.5, stdout=out)
    assert time.monotonic() - t0 < 30  # at the timeout, not when the 90 s sleep ends
    assert r.timed_out and r.rc is None and not r.ok, r
    assert out.getvalue() == b"started\n"


def test_timeout_stops_the_remote_script(sshd: Sshd, tmp_path: Path) -> None:
    marker = f"sleep 3{time.monotonic_ns() % 1000}.5"  # unique, so pgrep sees only ours
    r = _shell(sshd, tmp_path).run(f"{marker}\n", timeout=1.0, stdout=io.BytesIO())
    assert r.timed_out, r
    for _ in range(120):  # the node-side timeout fires ~2 s after ours
        if subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode != 0:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"remote `{marker}` still running after the timeout")


class _CancelOnStart(io.BytesIO):
    """A sink that presses Ctrl-C (sets `cancel`) once the script has said it started."""

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__()
        self.cancel = cancel

    def write(self, data: Any) -> int:
        written = super().write(data)
        if b"started\n" in self.getvalue():
            self.cancel.set()
        return written


def test_ctrl_c_hangs_up_on_the_remote_script(sshd: Sshd, tmp_path: Path) -> None:
    cancel = threading.Event()
    out = _CancelOnStart(cancel)  # Ctrl-C once the remote script runs, however slow the login
    t0 = time.monotonic()
    r = _shell(sshd, tmp_path).run(
        "echo started\nsleep 90\necho never\n", timeout=120, stdout=out, cancel=cancel
    )
    assert time.monotonic() - t0 < 30  # at Ctrl-C, not when the 90 s sleep ends
    assert r.error == CANCELLED and r.rc is None and not r.timed_out, r
    assert out.getvalue() == b"started\n"


def test_unknown_host_key_refused_by_default(sshd: Sshd, tmp_path: Path) -> None:
    kh = tmp_path / "empty_known_hosts"
    r = _shell(sshd, tmp_path, known_hosts=str(kh)).run("echo x", timeout=10, stdout=io.BytesIO())
    assert r.rc is None and "\n" not in r.error
    assert f"[127.0.0.1]:{sshd.port}" in r.error
    assert "--accept-new-host-keys" in r.error and "ssh-keyscan" in r.error
    assert not kh.exists()


def test_unknown_host_key_accepted_and_saved(sshd: Sshd, tmp_path: Path) -> None:
    kh = tmp_path / "sub" / "known_hosts"
    shell = _shell(sshd, tmp_path, known_hosts=str(kh), accept_new_host_keys=True)
    r = shell.run("echo x", timeout=10, stdout=io.BytesIO())
    assert r.ok, r
    assert kh.read_text() == f"[127.0.0.1]:{sshd.port} {sshd.host_key_pub}\n"
    # Saved for real: a strict shell now trusts it.
    again = _shell(sshd, tmp_path, known_hosts=str(kh)).run("true", timeout=10, stdout=io.BytesIO())
    assert again.ok, again


def test_changed_host_key_refused_even_with_accept_new(sshd: Sshd, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    kh = _known_hosts(tmp_path, sshd, key=wrong)
    before = kh.read_text()
    shell = _shell(sshd, tmp_path, known_hosts=str(kh), accept_new_host_keys=True)
    r = shell.run("echo x", timeout=10, stdout=io.BytesIO())
    assert r.rc is None and "\n" not in r.error, r
    assert "CHANGED" in r.error and "ssh-keygen -R" in r.error
    assert kh.read_text() == before


def test_refused_port_is_one_line_error(sshd: Sshd, tmp_path: Path) -> None:
    r = _shell(sshd, tmp_path, port=free_port()).run("true", timeout=10, stdout=io.BytesIO())
    assert r.rc is None and "refused" in r.error and "\n" not in r.error, r


def test_wrong_key_is_one_line_error(sshd: Sshd, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(bad)], check=True)
    r = _shell(sshd, tmp_path, key_filename=str(bad)).run("true", timeout=10, stdout=io.BytesIO())
    assert r.rc is None and "authentication failed" in r.error and "\n" not in r.error, r


def test_unresolvable_host_is_one_line_error(tmp_path: Path) -> None:
    shell = SSHShell("n", "no-such-node.invalid", ssh_config=None, known_hosts=None)
    r = shell.run("true", timeout=10, stdout=io.BytesIO())
    assert r.rc is None and r.error and "\n" not in r.error, r


def test_ssh_config_supplies_host_port_user_identity(sshd: Sshd, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host gpu-node-7\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n"
    )
    kh = _known_hosts(tmp_path, sshd)
    shell = SSHShell("gpu-node-7", "gpu-node-7", ssh_config=str(cfg), known_hosts=str(kh))
    out = io.BytesIO()
    r = shell.run("echo via-config", timeout=10, stdout=out)
    assert r.ok, r
    assert out.getvalue() == b"via-config\n"


def test_ssh_config_proxyjump(sshd: Sshd, tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host bastion\n  HostName {sshd.host}\n  Port {sshd.port}\n"
        f"Host inner\n  HostName {sshd.host}\n  ProxyJump bastion\n"
        f"Host *\n  User {sshd.user}\n  Port {sshd.port}\n  IdentityFile {sshd.client_key}\n"
    )
    kh = _known_hosts(tmp_path, sshd)
    shell = SSHShell("inner", "inner", ssh_config=str(cfg), known_hosts=str(kh))
    out = io.BytesIO()
    r = shell.run("echo jumped", timeout=15, stdout=out)
    assert r.ok, r
    assert out.getvalue() == b"jumped\n"


_RELAY = """\
import os, socket, sys, threading
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def up():
    while data := os.read(0, 65536):
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while data := s.recv(65536):
    os.write(1, data)
"""


def test_ssh_config_proxycommand(sshd: Sshd, tmp_path: Path) -> None:
    relay = tmp_path / "relay.py"
    relay.write_text(_RELAY)
    cfg = tmp_path / "config"
    cfg.write_text(
        f"Host proxied\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  ProxyCommand {sys.executable} {relay} %h %p\n"
    )
    kh = _known_hosts(tmp_path, sshd)
    shell = SSHShell("proxied", "proxied", ssh_config=str(cfg), known_hosts=str(kh))
    out = io.BytesIO()
    r = shell.run("echo proxied", timeout=15, stdout=out)
    assert r.ok, r
    assert out.getvalue() == b"proxied\n"
