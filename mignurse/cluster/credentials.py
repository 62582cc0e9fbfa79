"""Credential plugins (a kubeconfig user's `exec`: `aws eks get-token`,
`aws-iam-authenticator token`) run as kubectl runs them, within bounds.

The kubernetes client's own runner (kubernetes/config/exec_provider.py in
kubernetes-client/python v37.0.1) waits on the plugin without a timeout and reads all it
writes, and hands it the terminal when there is one. Here a plugin gets no standard input,
`MIGNURSE_CREDENTIAL_PLUGIN_SECONDS` to answer and `MIGNURSE_MAX_CREDENTIAL_PLUGIN_BYTES` of
output; past either it is stopped, with its children, and the failure is one line. The
request and answer are the ExecCredential of
https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mignurse.inert import inert
from mignurse.untrusted import (
    CREDENTIAL_PLUGIN_BYTES,
    CREDENTIAL_PLUGIN_SECONDS,
    human_bytes,
)

if TYPE_CHECKING:  # subprocess loads when a plugin runs: most kubeconfigs name none
    import subprocess

_STDERR_KEPT = 64 * 1024  # the end of what a plugin says on stderr, for its error line
# A credential is renewed this long before it expires, so a request never carries one that
# lapses on the way.
_RENEW_BEFORE = timedelta(seconds=60)
# How often a failing renewal is tried again, and how often a tokenFile is read again
# (client-go re-reads it each minute: kubernetes/client-go transport/token_source.go).
RETRY_AFTER = timedelta(seconds=60)

# What the aws CLI (v2, and v1 with the same botocore) prints when the SSO login behind a
# profile has to be renewed, as aws/aws-cli branch v2 has it (tag 2.36.7, commit
# 73fb33bb171ace3e9eaa03308f76e5de50c21393):
# - awscli/botocore/exceptions.py `UnauthorizedSSOTokenError`: the SSO session expired or was
#   revoked (raised by awscli/botocore/credentials.py `SSOCredentialFetcher._get_credentials`
#   when the cached token is past its expiresAt or GetRoleCredentials refuses it);
# - awscli/botocore/exceptions.py `SSOTokenLoadError`, "Error loading SSO Token: Token for NAME
#   does not exist" or "... is invalid" (awscli/botocore/utils.py `SSOTokenLoader`): no login
#   in the cache, or a damaged one;
# - awscli/botocore/tokens.py `DeferredRefreshableToken._protected_refresh`, a
#   `TokenRetrievalError` "Token has expired and refresh failed": an sso-session's token
#   that could not be refreshed.
# `aws sso login` cures each. Anything else it says is another failure, and is said as it is:
# `ProfileNotFound` (awscli/botocore/exceptions.py), "The config profile (NAME) could not be
# found", is no expired login, and logging in again would not help.
_SSO_LOGIN_NEEDED = (
    "The SSO session associated with this profile has expired or is otherwise invalid",
    "Error loading SSO Token:",
    "Token has expired and refresh failed",
)
# The aws CLI's own error line from v2.34 on (awscli/errorformat.py `format_error_message`);
# before, the message alone (awscli/utils.py `write_exception`).
_AWS_ERROR_PREFIX = "aws: [ERROR]:"


class CredentialError(Exception):
    """A plugin that failed, hung, or answered no credential; str() is one line. `kind`:
    "expired" (it exited non-zero because its login has to be renewed: `failure_kind`),
    "timeout" (stopped unanswered), else "error" (not found, a missing profile, an answer
    that is no credential, ...)."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(inert(message))
        self.kind = kind
        self.plugin: Plugin | None = None  # the plugin that failed, once known


@dataclass(frozen=True, slots=True)
class Credential:
    token: str = ""
    client_certificate_data: str = ""
    client_key_data: str = ""
    expires: datetime | None = None


@dataclass(frozen=True, slots=True)
class Plugin:
    """A kubeconfig user's `exec` block, checked."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    cluster: dict[str, Any] | None  # what provideClusterInfo passes on
    install_hint: str

    @classmethod
    def from_config(cls, block: object, *, base: str, cluster: dict[str, Any] | None) -> Plugin:
        """ValueError (one line) for a block kubectl would refuse too. A relative command
        with a slash in it is relative to `base`, the folder of the kubeconfig that names
        it, as client-go resolves it (kubernetes/client-go tools/clientcmd/loader.go,
        GetAuthInfoFileReferences); a bare name is looked up on PATH."""
        if not isinstance(block, dict):
            raise ValueError("exec must be a mapping with command and apiVersion")
        command, api_version = block.get("command"), block.get("apiVersion")
        if not isinstance(command, str) or not command:
            raise ValueError("exec has no command")
        if not isinstance(api_version, str) or not api_version:
            raise ValueError("exec has no apiVersion")
        args = block.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ValueError("exec args must be a list of strings")
        env: list[tuple[str, str]] = []
        entries = block.get("env") or []
        if not isinstance(entries, list):
            raise ValueError("exec env must be a list of entries with name and value")
        for item in entries:
            if not (isinstance(item, dict) and isinstance(item.get("name"), str)):
                raise ValueError("exec env must be a list of entries with name and value")
            env.append((item["name"], str(item.get("value") or "")))
        if block.get("interactiveMode") == "Always":
            raise ValueError(
                f"credential plugin `{_shown(command, args)}` asks for a terminal "
                "(interactiveMode: Always), which mignurse never gives it: run the plugin once "
                "in a shell, or set interactiveMode: Never"
            )
        hint = block.get("installHint")
        if os.sep in command and not os.path.isabs(command):
            command = os.path.normpath(os.path.join(base, command))
        return cls(
            command=command,
            args=tuple(str(a) for a in args),
            env=tuple(env),
            api_version=api_version,
            cluster=cluster if block.get("provideClusterInfo") is True else None,
            install_hint=" ".join(hint.split())[:200] if isinstance(hint, str) else "",
        )

    @property
    def shown(self) -> str:
        return _shown(self.command, self.args)


def _shown(command: str, args: list[Any] | tuple[str, ...]) -> str:
    """`aws eks get-token`: the command and its words, without options and their values
    (a plugin's options may carry a role, a profile or a secret)."""
    words = [os.path.basename(command)]
    skip_value = False
    for arg in (str(a) for a in args):
        if skip_value:
            skip_value = False
            continue
        if arg.startswith("-"):
            skip_value = "=" not in arg
            continue
        words.append(arg)
        if len(words) == 4:
            break
    return " ".join(inert(w[:40]) for w in words)


def login_command(plugin: Plugin) -> str:
    """The command that renews what a failed plugin needs: `aws sso login --profile P` for
    `aws eks get-token` with a profile (its `--profile`, else AWS_PROFILE in the exec block's
    env; the aws CLI's own advice when the SSO session expired, botocore
    botocore/exceptions.py `UnauthorizedSSOTokenError`, boto/botocore 1.44.18), else the
    plugin's command line as the kubeconfig writes it, to run in a shell."""
    import shlex

    args = list(plugin.args)
    if _is_eks_get_token(plugin):
        profile = dict(plugin.env).get("AWS_PROFILE", "")
        for index, arg in enumerate(args):
            if arg == "--profile" and index + 1 < len(args):
                profile = args[index + 1]
            elif arg.startswith("--profile="):
                profile = arg.partition("=")[2]
        if profile:
            return inert(f"aws sso login --profile {shlex.quote(profile)}"[:300])
    line = shlex.join([plugin.command, *args])
    return inert(line if len(line) <= 300 else line[:299] + "…")


def _is_eks_get_token(plugin: Plugin) -> bool:
    return os.path.basename(plugin.command) == "aws" and {"eks", "get-token"} <= set(plugin.args)


def failure_kind(plugin: Plugin, stderr: str) -> str:
    """The CredentialError kind of a plugin that exited non-zero having said `stderr`:
    "expired" when its login has to be renewed, else "error". What `aws eks get-token` says
    is known (_SSO_LOGIN_NEEDED): only an SSO login to renew is "expired". Any other plugin's
    words are not known, so its failure is taken for an expired login, whose hint is the
    plugin's own command line: run in a shell, it says what it needs."""
    if not _is_eks_get_token(plugin):
        return "expired"
    said = " ".join(stderr.split())
    return "expired" if any(text in said for text in _SSO_LOGIN_NEEDED) else "error"


def token_problem(token: str) -> str:
    """Why `token` cannot go in an Authorization header ("" when it can); never the token."""
    if not token:
        return "is empty"
    if not (token.isascii() and token.isprintable()) or " " in token:
        return "is not one line of printable ASCII without spaces"
    return ""


def _waits_longer(timeout: int) -> str:
    more = CREDENTIAL_PLUGIN_SECONDS.more_than(timeout)
    return f" ({more} waits longer)" if more else ""


def run_plugin(plugin: Plugin) -> Credential:
    """The credential the plugin answers, or CredentialError."""
    import subprocess

    timeout = CREDENTIAL_PLUGIN_SECONDS.value()
    cap = CREDENTIAL_PLUGIN_BYTES.value()
    spec: dict[str, Any] = {"interactive": False}
    if plugin.cluster is not None:
        spec["cluster"] = plugin.cluster
    env = dict(os.environ)
    env.update(plugin.env)
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec},
        default=str,  # a YAML timestamp in the cluster's extensions
    )
    who = f"credential plugin `{plugin.shown}`"
    try:
        process = subprocess.Popen(
            [plugin.command, *plugin.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: stopped with its children
        )
    except FileNotFoundError:
        hint = f": {plugin.install_hint}" if plugin.install_hint else ""
        raise CredentialError(f"{who} was not found (is it installed and on PATH?){hint}") from None
    except OSError as exc:
        raise CredentialError(f"{who} could not start: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte in an argument, `=` in an env name
        raise CredentialError(f"{who} could not start: {exc}") from None
    stopped = "interrupted"
    try:
        out, err, stopped = _communicate(process, timeout, cap)
    finally:
        _stop(process, everything=bool(stopped))
    if stopped == "timeout":
        raise CredentialError(
            f"{who} gave no answer in {timeout} s: it was stopped; check that it runs on its "
            f"own in a shell{_waits_longer(timeout)}",
            "timeout",
        )
    if stopped == "output":
        raise CredentialError(
            f"{who} wrote more than {human_bytes(cap)}: it was stopped "
            f"({CREDENTIAL_PLUGIN_BYTES.env} raises the limit)"
        )
    if process.returncode != 0:
        said = _error_line(err)
        raise CredentialError(
            f"{who} failed (exit {process.returncode})" + (f": {said}" if said else ""),
            failure_kind(plugin, err.decode("utf-8", "replace")),
        )
    return _credential(out, plugin, who)


def _communicate(
    process: subprocess.Popen[bytes], timeout: float, cap: int
) -> tuple[bytes, bytes, str]:
    """stdout (at most `cap` bytes), the end of stderr, and "" or why the plugin was cut
    short ("timeout", "output")."""
    import selectors
    import subprocess

    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, out)
        selector.register(process.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _events in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
                if buffer is out and len(out) > cap:
                    return bytes(out), bytes(err), "output"
                if buffer is err and len(err) > _STDERR_KEPT:
                    del err[:-_STDERR_KEPT]
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(out), bytes(err), "timeout"
    return bytes(out), bytes(err), ""


def _stop(process: subprocess.Popen[bytes], *, everything: bool) -> None:
    """Its pipes closed and the plugin gone; `everything`: when it was cut short, whatever
    it started in its process group too (a child that holds its pipes)."""
    import signal
    import subprocess

    if everything:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    if process.poll() is None:
        process.kill()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _error_line(err: bytes) -> str:
    """What a failed plugin said on stderr, as one inert line: the aws CLI's own error line
    where it wrote one (its details, warnings and notes around it left out), else the last
    lines, where a command writes its error."""
    lines = [" ".join(line.split()) for line in err.decode("utf-8", "replace").splitlines()]
    for line in lines:
        if line.startswith(_AWS_ERROR_PREFIX) or any(t in line for t in _SSO_LOGIN_NEEDED):
            return inert(line)[:300]
    said = " ".join(line for line in lines[-3:] if line)
    return inert(said)[-300:]


def _credential(out: bytes, plugin: Plugin, who: str) -> Credential:
    try:
        answer = json.loads(out)
    except (ValueError, RecursionError):
        raise CredentialError(f"{who} answered something that is not JSON") from None
    if not isinstance(answer, dict):
        raise CredentialError(f"{who} answered JSON that is not an ExecCredential")
    if answer.get("kind") != "ExecCredential":
        raise CredentialError(f"{who} answered JSON that is not an ExecCredential")
    if answer.get("apiVersion") != plugin.api_version:
        raise CredentialError(
            f"{who} answered apiVersion {inert(str(answer.get('apiVersion')))[:80]}, "
            f"not the {plugin.api_version} its kubeconfig asks for"
        )
    status = answer.get("status")
    if not isinstance(status, dict):
        raise CredentialError(f"{who} answered an ExecCredential without a status")
    expires = None
    stamp = status.get("expirationTimestamp")
    if stamp is not None:
        try:
            expires = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialError(
                f"{who} answered an expirationTimestamp that is no RFC 3339 time"
            ) from None
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
    token = status.get("token")
    if isinstance(token, str) and token:
        problem = token_problem(token)
        if problem:
            raise CredentialError(f"{who} answered a token that {problem}")
        return Credential(token=token, expires=expires)
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(cert, str) and cert and isinstance(key, str) and key:
        return Credential(client_certificate_data=cert, client_key_data=key, expires=expires)
    raise CredentialError(
        f"{who} answered neither a token nor clientCertificateData with clientKeyData"
    )


class TokenRenewal:
    """The bearer token of a connection kept current, as the kubernetes client's
    `refresh_api_key_hook` (called before each request): a plugin's credential is fetched
    again before it expires, a tokenFile is read again each minute. A renewal that fails
    keeps the token it had (the API server's 401 then says so) and is tried again a minute
    later, so a broken plugin costs one timeout a minute, not one per request."""

    def __init__(self, fetch: Callable[[], Credential], expires: datetime | None) -> None:
        self._fetch = fetch
        self._due = self._due_for(expires)
        self._lock = threading.Lock()

    @staticmethod
    def _due_for(expires: datetime | None) -> datetime:
        if expires is None:
            return datetime.now(UTC) + RETRY_AFTER
        try:
            return expires - _RENEW_BEFORE
        except OverflowError:  # year 1: expired already
            return datetime.now(UTC)

    def __call__(self, configuration: Any) -> None:
        if datetime.now(UTC) < self._due:
            return
        with self._lock:
            if datetime.now(UTC) < self._due:
                return  # another request renewed it meanwhile
            try:
                renewed = self._fetch()
            except Exception:  # noqa: BLE001 - the old token stays; the server judges it
                renewed = Credential()
            if not renewed.token:
                self._due = datetime.now(UTC) + RETRY_AFTER
                return
            configuration.api_key["BearerToken"] = f"Bearer {renewed.token}"
            self._due = self._due_for(renewed.expires)
