"""Run the collection script on a node over SSH (paramiko), honouring ~/.ssh/config.

The script goes to `sh -s` on standard input, so no quoting of it ever reaches a remote
shell. Standard output and standard error are drained together under one deadline: paramiko's
`recv_exit_status()` has no timeout and deadlocks once either stream's ~2 MiB window fills.
Every failure becomes a `CommandResult` with a one-line `error`; nothing here raises.
"""

from __future__ import annotations

import getpass
import math
import os
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import paramiko

from mignurse.nodeaccess.base import CANCELLED, CommandResult

STDERR_TAIL_BYTES = 8 * 1024
_READ_CHUNK = 64 * 1024
_POLL_S = 0.05  # stderr data does not wake select() on a paramiko channel, so poll this often
_REMOTE_GRACE_S = 2  # the node's own timeout fires this long after ours, so ours reports first
_SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"

# Threads of the collector may accept keys for different nodes at once; one appender at a time.
_KNOWN_HOSTS_LOCK = threading.Lock()


class UnknownHostKeyError(paramiko.SSHException):
    """The server's key is in no known_hosts file and accepting new keys is off."""

    def __init__(self, name: str, key: paramiko.PKey) -> None:
        super().__init__(f"unknown host key for {name}")
        self.name = name
        self.key = key


def _fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, or (OpenSSH `accept-new`) keep them and append them to known_hosts.

    paramiko only calls this for a host with no key of the offered type; a key that differs
    from the stored one raises BadHostKeyException before any policy runs."""

    def __init__(self, accept_new: bool, known_hosts: str | None) -> None:
        self.accept_new = accept_new
        self.known_hosts = known_hosts

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.accept_new:
            raise UnknownHostKeyError(hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
        if self.known_hosts:
            # Append like OpenSSH does; save_host_keys() would rewrite the file and drop comments.
            line = paramiko.hostkeys.HostKeyEntry([hostname], key).to_line()
            with _KNOWN_HOSTS_LOCK:
                os.makedirs(os.path.dirname(self.known_hosts) or ".", mode=0o700, exist_ok=True)
                with open(self.known_hosts, "a", encoding="utf-8") as f:
                    f.write(line)


@dataclass
class _Target:
    """Where to connect, after ~/.ssh/config has been applied."""

    alias: str
    hostname: str
    port: int
    user: str
    key_files: list[str] = field(default_factory=list)
    proxycommand: str | None = None
    proxyjump: str | None = None
    identities_only: bool = False


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (only the first hop of a comma list is used)."""
    first = spec.split(",")[0].strip()
    if first.startswith("ssh://"):
        first = first[len("ssh://") :]
    user: str | None = None
    if "@" in first:
        user, first = first.rsplit("@", 1)
    port: int | None = None
    if first.startswith("["):  # [v6addr]:port
        host, _, rest = first[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        return user, host, port
    if first.count(":") == 1:
        host, _, p = first.partition(":")
        if p.isdigit():
            return user, host, int(p)
    return user, first, port


def _remote_command(seconds: float) -> str:
    """`sh -s` under coreutils `timeout` when the node has it: closing the channel does not
    stop a hung command (sshd refuses `signal` requests for root), so the node stops it itself
    a moment after our own deadline."""
    limit = math.ceil(max(seconds, 0.0)) + _REMOTE_GRACE_S
    return (
        "if command -v timeout >/dev/null 2>&1; "
        f"then exec timeout -k 5 {limit} sh -s; else exec sh -s; fi"
    )


class SSHShell:
    """One node reached over SSH. Each `run` opens and closes its own connection, so an
    instance holds no connection state and may be used from several threads."""

    transport = "ssh"

    def __init__(
        self,
        node: str,
        host: str,
        *,
        user: str | None = None,
        port: int | None = None,
        key_filename: str | None = None,
        ssh_config: str | None = "~/.ssh/config",
        known_hosts: str | None = "~/.ssh/known_hosts",
        accept_new_host_keys: bool = False,
        connect_timeout: float = 10.0,
    ) -> None:
        self.node = node
        self.host = host
        self.user = user
        self.port = port
        self.key_filename = os.path.expanduser(key_filename) if key_filename else None
        self.ssh_config = os.path.expanduser(ssh_config) if ssh_config else None
        self.known_hosts = os.path.expanduser(known_hosts) if known_hosts else None
        self.accept_new_host_keys = accept_new_host_keys
        self.connect_timeout = connect_timeout

    # ----------------------------------------------------------------- configuration

    def _config(self) -> paramiko.SSHConfig | None:
        if not self.ssh_config or not os.path.isfile(self.ssh_config):
            return None
        return paramiko.SSHConfig.from_path(self.ssh_config)

    def _resolve(
        self,
        config: paramiko.SSHConfig | None,
        alias: str,
        user: str | None,
        port: int | None,
        key_filename: str | None,
    ) -> _Target:
        opts: dict[str, Any] = dict(config.lookup(alias)) if config else {}
        keys = [key_filename] if key_filename else list(opts.get("identityfile") or [])
        return _Target(
            alias=alias,
            hostname=str(opts.get("hostname") or alias),
            port=port or int(opts.get("port") or 22),
            user=user or str(opts.get("user") or getpass.getuser()),
            key_files=[os.path.expanduser(k) for k in keys],
            proxycommand=opts.get("proxycommand"),
            proxyjump=(
                None
                if str(opts.get("proxyjump") or "none").lower() == "none"
                else str(opts["proxyjump"])
            ),
            identities_only=str(opts.get("identitiesonly", "no")).lower() == "yes",
        )

    def _new_client(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if os.path.isfile(_SYSTEM_KNOWN_HOSTS):
            client.load_system_host_keys(_SYSTEM_KNOWN_HOSTS)  # read-only: never saved back
        if self.known_hosts and os.path.isfile(self.known_hosts):
            client.load_host_keys(self.known_hosts)
        client.set_missing_host_key_policy(
            _HostKeyPolicy(self.accept_new_host_keys, self.known_hosts)
        )
        return client

    def _connect(self, client: paramiko.SSHClient, t: _Target, sock: Any, deadline: float) -> None:
        budget = max(0.1, min(self.connect_timeout, deadline - time.monotonic()))
        existing = [k for k in t.key_files if os.path.isfile(k)]
        if t.key_files and not existing:
            raise FileNotFoundError(f"identity file not found: {', '.join(t.key_files)}")
        try:
            client.connect(
                t.hostname,
                port=t.port,
                username=t.user,
                key_filename=existing or None,
                # Named keys are what the user meant; trying every ~/.ssh/id_* as well risks
                # "too many authentication failures" on sshd's MaxAuthTries.
                look_for_keys=not existing,
                allow_agent=not t.identities_only,
                timeout=budget,
                banner_timeout=budget,
                auth_timeout=budget,
                channel_timeout=budget,
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            # paramiko names the bare host; known_hosts (and ssh-keygen -R) say [host]:port.
            exc.hostname = t.hostname if t.port == 22 else f"[{t.hostname}]:{t.port}"
            raise

    # ----------------------------------------------------------------- running

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdout: BinaryIO,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        start = time.monotonic()
        deadline = start + timeout
        state = _RunState()
        target_desc = self.host
        clients: list[paramiko.SSHClient] = []
        sock: Any = None
        try:
            config = self._config()
            target = self._resolve(config, self.host, self.user, self.port, self.key_filename)
            target_desc = f"{target.user}@{target.hostname}:{target.port}"
            if target.proxyjump:
                j_user, j_host, j_port = _parse_jump(target.proxyjump)
                jump = self._resolve(config, j_host, j_user, j_port, None)
                jump_client = self._new_client()
                clients.append(jump_client)
                target_desc = f"{target_desc} via {jump.user}@{jump.hostname}:{jump.port}"
                self._connect(jump_client, jump, None, deadline)
                jump_transport = jump_client.get_transport()
                assert jump_transport is not None
                sock = jump_transport.open_channel(
                    "direct-tcpip",
                    (target.hostname, target.port),
                    ("127.0.0.1", 0),
                    timeout=max(0.1, deadline - time.monotonic()),
                )
            elif target.proxycommand:
                sock = paramiko.ProxyCommand(target.proxycommand)
            client = self._new_client()
            clients.append(client)
            self._connect(client, target, sock, deadline)
            self._exec(client, script, deadline, stdout, state, cancel)
        except Exception as exc:  # noqa: BLE001 -- one unreachable node must not stop the others
            state.error = _describe(exc, target_desc, self.known_hosts)
            state.timed_out = time.monotonic() >= deadline
        finally:
            for c in reversed(clients):
                c.close()
            if sock is not None:
                sock.close()  # a ProxyCommand child outlives a connect() that failed early
        if state.timed_out and not state.error:
            state.error = f"timed out after {timeout:g}s on {target_desc}"
        return CommandResult(
            node=self.node,
            transport=self.transport,
            rc=None if (state.timed_out or state.error) else state.rc,
            seconds=time.monotonic() - start,
            bytes_out=state.bytes_out,
            timed_out=state.timed_out,
            error=state.error,
            stderr_tail=state.stderr_tail.decode("utf-8", "replace"),
        )

    def _exec(
        self,
        client: paramiko.SSHClient,
        script: str,
        deadline: float,
        stdout: BinaryIO,
        state: _RunState,
        cancel: threading.Event | None,
    ) -> None:
        transport = client.get_transport()
        assert transport is not None
        chan = transport.open_session(timeout=max(0.1, deadline - time.monotonic()))
        try:
            chan.set_combine_stderr(False)
            chan.settimeout(max(0.1, deadline - time.monotonic()))
            chan.exec_command(_remote_command(deadline - time.monotonic()))
            # A brace group is parsed whole before it runs, so commands in the script that read
            # stdin get /dev/null instead of swallowing the rest of the script.
            chan.sendall(("{\n" + script + "\n} </dev/null\n").encode())
            chan.shutdown_write()
            chan.settimeout(0.0)
            self._drain(chan, deadline, stdout, state, cancel)
        finally:
            chan.close()  # on Ctrl-C too: sshd then hangs up on the remote command

    @staticmethod
    def _drain(
        chan: paramiko.Channel,
        deadline: float,
        stdout: BinaryIO,
        state: _RunState,
        cancel: threading.Event | None,
    ) -> None:
        while True:
            if cancel is not None and cancel.is_set():
                state.error = CANCELLED
                return
            progressed = False
            if chan.recv_ready():
                data = chan.recv(_READ_CHUNK)
                if data:
                    stdout.write(data)
                    state.bytes_out += len(data)
                    progressed = True
            if chan.recv_stderr_ready():
                err = chan.recv_stderr(_READ_CHUNK)
                if err:
                    state.stderr_tail = (state.stderr_tail + err)[-STDERR_TAIL_BYTES:]
                    progressed = True
            if not progressed:
                if (chan.eof_received or chan.closed) and not (
                    chan.recv_ready() or chan.recv_stderr_ready()
                ):
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    state.timed_out = True
                    return
                select.select([chan], [], [], min(_POLL_S, remaining))
            elif time.monotonic() >= deadline:
                state.timed_out = True
                return
        # Both streams are at EOF, so waiting for the status can no longer deadlock.
        remaining = deadline - time.monotonic()
        if not chan.status_event.wait(max(0.0, remaining)):
            state.timed_out = True
            return
        status = chan.recv_exit_status()
        if status == -1:
            state.error = "the remote shell ended without an exit status (killed by a signal?)"
        else:
            state.rc = status


@dataclass
class _RunState:
    rc: int | None = None
    bytes_out: int = 0
    timed_out: bool = False
    error: str = ""
    stderr_tail: bytes = b""


def _describe(exc: BaseException, target: str, known_hosts: str | None) -> str:
    """One line an on-call engineer can act on."""
    kh = known_hosts or "~/.ssh/known_hosts"
    if isinstance(exc, UnknownHostKeyError):
        host, port = _split_name(exc.name)
        scan = f"ssh-keyscan{f' -p {port}' if port != 22 else ''} {host} >> {kh}"
        return (
            f"host key for {exc.name} is not known ({_fingerprint(exc.key)}); rerun with "
            f"--accept-new-host-keys or add it: {scan}"
        )
    if isinstance(exc, paramiko.BadHostKeyException):
        name = exc.hostname
        host, port = _split_name(name)
        return (
            f"host key for {name} CHANGED (known {_fingerprint(exc.expected_key)}, offered "
            f"{_fingerprint(exc.key)}); if the node was replaced, check with "
            f"`ssh-keyscan{f' -p {port}' if port != 22 else ''} {host}` and remove the old one "
            f"with `ssh-keygen -R '{name}' -f {kh}`; otherwise this may be an attack"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed for {target}: {_one_line(str(exc))}"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return f"connection refused by {target}"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {target}: {_one_line(exc.strerror or str(exc))}"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused by {target}"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"timed out talking to {target}"
    if isinstance(exc, paramiko.ChannelException):
        return f"channel refused on {target}: {_one_line(exc.text)}"
    if isinstance(exc, paramiko.SSHException):
        return f"ssh error on {target}: {_one_line(str(exc)) or type(exc).__name__}"
    if isinstance(exc, OSError):
        return f"{target}: {_one_line(str(exc)) or type(exc).__name__}"
    return f"{target}: {type(exc).__name__}: {_one_line(str(exc))}"


def _split_name(name: str) -> tuple[str, int]:
    """known_hosts name `[host]:port` or `host` → (host, port)."""
    if name.startswith("[") and "]:" in name:
        host, _, port = name[1:].partition("]:")
        if port.isdigit():
            return host, int(port)
    return name, 22
