"""A throwaway OpenSSH server on 127.0.0.1 for the SSH transport tests.

Use `with running_sshd(tmp_dir) as server:` (test_ssh.py wraps it in a module fixture).

Real sshd, not a paramiko stub: the deadlock and host-key behaviour under test live in the
interaction with OpenSSH's channel windows and key exchange.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    host: str
    port: int
    user: str
    client_key: Path  # private key accepted by the server
    host_key_pub: str  # "ssh-ed25519 AAAA..." of the server
    tmp: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _wait_banner(port: int, proc: subprocess.Popen[bytes], log: Path, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        # Wait for the banner, not just accept(): sshd may accept before it is ready to talk.
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5) as s:
            s.settimeout(1.0)
            if s.recv(4).startswith(b"SSH-"):
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not answer on 127.0.0.1:{port}")


@contextlib.contextmanager
def running_sshd(tmp: Path) -> Iterator[Sshd]:
    if not os.path.exists(SSHD):
        pytest.skip("openssh-server is not installed (.ci/run installs it)")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (.ci/run installs openssh-server)")
    # sshd refuses to start without its privilege-separation directory.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    host_key = tmp / "host_ed25519"
    client_key = tmp / "client_ed25519"
    _keygen(host_key)
    _keygen(client_key)
    authorized = tmp / "authorized_keys"
    authorized.write_text(Path(f"{client_key}.pub").read_text())
    authorized.chmod(0o600)
    # The port is free when chosen, but another test process may take it before sshd binds:
    # sshd then exits at once, and another port is tried.
    for attempt in range(5):
        port = free_port()
        proc, log = _start(tmp, port, host_key, authorized)
        try:
            _wait_banner(port, proc, log)
            break
        except RuntimeError:
            exited = proc.poll() is not None
            _stop(proc)
            if attempt == 4 or not exited or "bind" not in log.read_text().lower():
                raise
    try:
        yield Sshd(
            host="127.0.0.1",
            port=port,
            user=_current_user(),
            client_key=client_key,
            host_key_pub=" ".join(Path(f"{host_key}.pub").read_text().split()[:2]),
            tmp=tmp,
        )
    finally:
        _stop(proc)


def _start(
    tmp: Path, port: int, host_key: Path, authorized: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    config = tmp / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {tmp / 'sshd.pid'}",
                f"AuthorizedKeysFile {authorized}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin yes",
                "UsePAM no",
                "StrictModes no",
                "AllowTcpForwarding yes",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    log = tmp / "sshd.log"
    # A file, not a pipe: a pipe nobody reads would stall sshd once it fills.
    with open(log, "wb") as log_f:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_f,
            stderr=subprocess.STDOUT,
        )
    return proc, log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
