"""Kubeconfigs, read as untrusted input and handed to the kubernetes client inert.

Everything a kubeconfig names is read here, once, as a regular file within
KUBECONFIG_BYTES (`read_regular_file`: no device, FIFO, folder or socket): the kubeconfig
files of $KUBECONFIG, and the chosen context's `certificate-authority`,
`client-certificate`, `client-key` and `tokenFile`, inlined as `*-data` and `token` so the
client never opens a path itself. A credential plugin (`exec`) runs bounded
(`credentials.py`) and its answer is inlined too; the token is then renewed by
`credentials.TokenRenewal`, not by the client. Files merge as kubectl merges them: the
first file to name a cluster, context or user, or to set current-context, wins
(https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/#merging-kubeconfig-files).

Secrets in URLs (a password in `server` or `proxy-url`, a token in a query string) never
reach a message: `shown_url` and `scrub` mask them.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from mignurse.cluster.credentials import (
    Credential,
    CredentialError,
    Plugin,
    TokenRenewal,
    login_command,
    run_plugin,
    token_problem,
)
from mignurse.cluster.transport import Configuration
from mignurse.inert import inert, inert_name
from mignurse.untrusted import KUBECONFIG_BYTES, LimitError, compose_yaml, read_regular_file


class KubeconfigProblem(Exception):
    """What makes a kubeconfig unusable; str() is the one line to show, made inert."""

    def __init__(self, message: str) -> None:
        super().__init__(_bounded(inert(message), 1000))


EXPIRED_WORDS = "credentials expired: "  # how a line about an expired login begins


class PluginProblem(KubeconfigProblem):
    """A context's credential plugin failed: `kind` as CredentialError's, `login` the command
    that renews the login (`credentials.login_command`)."""

    def __init__(self, message: str, *, kind: str, login: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.login = login


def _bounded(text: str, most: int) -> str:
    """A name or URL of a megabyte (a hostile kubeconfig) shortened to a line's worth."""
    return text if len(text) <= most else text[: most - 1] + "…"


# The proxy schemes kubectl takes (client-go rest.Config.Proxy, `proxy-url` in
# https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/#proxy);
# the kubernetes client reaches socks5 ones through urllib3.contrib.socks (PySocks).
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


@dataclass
class _Entry:
    body: dict[str, Any]  # the `cluster`, `context` or `user` mapping
    origin: str  # the file that named it first: relative paths in it are relative to there


@dataclass
class Merged:
    """The kubeconfig files of one $KUBECONFIG, merged as kubectl merges them."""

    label: str  # how the user named it: --kubeconfig, $KUBECONFIG or ~/.kube/config
    clusters: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    current: str = ""
    empty: bool = True  # every file read was empty


@dataclass(frozen=True)
class Loaded:
    context: str
    cluster: str
    user: str
    # Where the kubeconfig gave each certificate and key ("certificate-authority",
    # "client-certificate", "client-key"), and what fixes it: what `tls_refusal` says.
    tls_parts: dict[str, tuple[str, str]] = field(default_factory=dict)


# -- reading the files ---------------------------------------------------------------------


def read_kubeconfig(path: str) -> dict[str, Any]:
    """The mapping in kubeconfig `path` ({} when it is empty), refused in one line
    (KubeconfigProblem) when it is not a regular file (`/dev/zero`, a FIFO), over
    KUBECONFIG_BYTES, not UTF-8, an alias bomb, or YAML that is not a mapping whose
    clusters, contexts and users are lists of named entries."""
    try:
        raw = read_regular_file(Path(path), KUBECONFIG_BYTES, f"kubeconfig {path}")
    except LimitError as exc:
        fix = ": give the kubeconfig file, not its folder" if os.path.isdir(path) else ""
        raise KubeconfigProblem(f"{exc}{fix}") from None
    except OSError as exc:
        raise KubeconfigProblem(f"cannot read kubeconfig {path}: {exc.strerror or exc}") from None
    try:
        root = compose_yaml(raw.decode("utf-8"), fast=True)
    except UnicodeDecodeError as exc:
        raise KubeconfigProblem(f"kubeconfig {path} is not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise KubeconfigProblem(
            f"kubeconfig {path} is not valid YAML{where}: {one_line(problem)}"
        ) from None
    except LimitError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise KubeconfigProblem(f"kubeconfig {path} is refused{where}: {exc}") from None
    if root is None:
        # Empty (or only comments): an empty Config, as client-go reads an empty file
        # (tools/clientcmd/loader.go `Load`, kubernetes/client-go@v0.32.0), merged like any.
        return {}
    if not isinstance(root, yaml.MappingNode):
        kind = "list" if isinstance(root, yaml.SequenceNode) else "single value"
        raise KubeconfigProblem(
            f"kubeconfig {path} is a YAML {kind}, not a kubeconfig (a mapping of clusters, "
            "contexts and users)"
        )
    for key, value in root.value:
        if not isinstance(key, yaml.ScalarNode) or key.value not in (
            "clusters",
            "contexts",
            "users",
        ):
            continue
        if isinstance(value, yaml.ScalarNode) and value.tag.endswith(":null"):
            continue
        entries = value.value if isinstance(value, yaml.SequenceNode) else None
        if entries is None or not all(_named(entry) for entry in entries):
            raise KubeconfigProblem(
                f"kubeconfig {path} (line {value.start_mark.line + 1}): {key.value} must be a "
                "list of entries, each with a name"
            )
    # The shape is checked (no alias bomb): building the values from the nodes is bounded.
    built = yaml.constructor.SafeConstructor().construct_document(root)
    return built if isinstance(built, dict) else {}


def _named(entry: yaml.Node) -> bool:
    return isinstance(entry, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == "name" and isinstance(v, yaml.ScalarNode)
        for k, v in entry.value
    )


# While `shared_merges` is on, the last merge, by its files' identity (path, inode, size,
# mtime): every context of one kubeconfig connected side by side (`--all-contexts`) reads
# and parses it once, not once per context. Merged entries are only read (load copies what
# it changes).
_last_merge: tuple[tuple[object, ...], Merged] | None = None
_sharing = 0
_merging = threading.Lock()  # the first of the contexts connecting at once reads it


@contextmanager
def shared_merges() -> Iterator[None]:
    """Meanwhile, a kubeconfig unchanged since its last merge is not read again."""
    global _sharing, _last_merge
    _sharing += 1
    try:
        yield
    finally:
        _sharing -= 1
        if not _sharing:
            _last_merge = None


def merge(label: str, paths: list[str]) -> Merged:
    """The files of `paths` that exist, each read once, merged (first one wins)."""
    global _last_merge
    if not _sharing:
        return _merge(label, paths)
    with _merging:
        key = (label, *_identities(paths))
        last = _last_merge
        if last is not None and last[0] == key:
            return last[1]
        merged = _merge(label, paths)
        _last_merge = (key, merged)
        return merged


def _identities(paths: list[str]) -> list[tuple[object, ...]]:
    found: list[tuple[object, ...]] = []
    for path in dict.fromkeys(paths):
        try:
            stat = os.stat(path)
        except (OSError, ValueError):
            found.append((path,))
            continue
        found.append((path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return found


def _merge(label: str, paths: list[str]) -> Merged:
    merged = Merged(label)
    # Each file once, as client-go reads $KUBECONFIG (tools/clientcmd/loader.go, deduplicate).
    for path in dict.fromkeys(paths):
        if not os.path.exists(path):
            continue
        document = read_kubeconfig(path)
        merged.empty = merged.empty and not document
        for kind, entries in (
            ("cluster", merged.clusters),
            ("context", merged.contexts),
            ("user", merged.users),
        ):
            for item in document.get(kind + "s") or ():
                name = str(item.get("name"))
                body = item.get(kind)
                if name in entries:
                    continue
                if body is not None and not isinstance(body, dict):
                    raise KubeconfigProblem(
                        f"kubeconfig {path}: {kind} {name!r} must hold a mapping under {kind}:"
                    )
                entries[name] = _Entry(dict(body or {}), path)
        current = document.get("current-context")
        if not merged.current and isinstance(current, str):
            merged.current = current
    return merged


def config_paths(kubeconfig: str | None) -> tuple[str, list[str]]:
    """Where kubectl looks: --kubeconfig, else $KUBECONFIG (a list), else ~/.kube/config;
    as the user named it, and as paths."""
    label = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    return label, [os.path.expanduser(p) for p in label.split(os.pathsep) if p]


def context_names(kubeconfig: str | None) -> tuple[str, list[str]]:
    """How the user named the kubeconfig, and its context names in kubeconfig order (the
    first file's first); KubeconfigProblem when it cannot be read."""
    label, paths = config_paths(kubeconfig)
    return label, list(merge(label, paths).contexts)


def list_contexts(kubeconfig: str | None) -> list[str]:
    """The context names of a kubeconfig, read within the same bounds; [] when unusable."""
    try:
        return sorted(merge(*config_paths(kubeconfig)).contexts)
    except KubeconfigProblem:
        return []


# -- loading one context ---------------------------------------------------------------------


def load(label: str, paths: list[str], context: str | None, configuration: Configuration) -> Loaded:
    """Set `configuration` up for `context` (else current-context) of the kubeconfig files
    `paths`; KubeconfigProblem (one line, no secret in it) when it cannot be."""
    merged = merge(label, paths)
    names = sorted(merged.contexts)
    chosen = context or merged.current
    if not chosen and merged.empty:
        raise KubeconfigProblem(
            f"kubeconfig {label} is empty: run `aws eks update-kubeconfig --name CLUSTER` or "
            "pass --kubeconfig PATH"
        )
    if not chosen:
        raise KubeconfigProblem(
            f"kubeconfig {label} has no current context: pass --context (one of: {_some(names)})"
        )
    entry = merged.contexts.get(chosen)
    if entry is None:
        raise KubeconfigProblem(
            f"context {inert_name(chosen)} not found in {label}: use one of: {_some(names)}"
        )
    cluster_name = str(entry.body.get("cluster") or "")
    user_name = str(entry.body.get("user") or "")
    cluster_entry = merged.clusters.get(cluster_name)
    if cluster_entry is None:
        raise KubeconfigProblem(
            f"context {chosen!r} in {label} names cluster {cluster_name!r}, which no file of "
            "it defines"
        )
    user_entry = merged.users.get(user_name)
    cluster = _inline_cluster(cluster_entry, cluster_name)
    tls_parts = _tls_parts(cluster_entry, cluster_name, user_entry, user_name)
    try:
        user, renewal = _inline_user(user_entry, user_name, cluster)
    except CredentialError as exc:
        login = login_command(exc.plugin) if exc.plugin is not None else ""
        # an expired login: what to run comes first, before the plugin's own words
        hint = f"{EXPIRED_WORDS}run `{login}`: " if exc.kind == "expired" and login else ""
        message = f"context {chosen!r}: {hint}{exc}"
        raise PluginProblem(message, kind=exc.kind, login=login) from None
    cluster["server"] = _with_scheme(cluster, user_entry)
    _check_proxy(cluster, cluster_name)
    minimal = {
        "current-context": chosen,
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "contexts": [{"name": chosen, "context": dict(entry.body)}],
        "users": [{"name": user_name, "user": user}] if user_entry is not None else [],
    }
    try:
        if "auth-provider" in user:
            logged = _load_with_provider(minimal, chosen, configuration)
        else:
            logged = []
            _configure(configuration, cluster, user)
    except ConfigException as exc:
        raise KubeconfigProblem(
            f"context {chosen!r} in {label} is unusable: {one_line(scrub(str(exc), configuration))}"
        ) from None
    if logged:
        why = one_line(scrub(logged[-1], configuration))
        raise KubeconfigProblem(f"context {chosen!r} in {label} is unusable: {why}")
    _check_proxy_of(configuration)
    # The client's own refresh (an oidc auth-provider's) calls the identity provider with no
    # timeout: mignurse renews only what it can bound, and an expired token is the API
    # server's 401, said in one line.
    configuration.refresh_api_key_hook = renewal
    if user_entry is None and user_name:
        # client-go goes on with no credentials (tools/clientcmd/client_config.go
        # `getAuthInfo`: a user no file defines is an empty one unless --user named it;
        # `ConfirmUsable` finds nothing wrong with it, kubernetes/client-go@v0.32.0).
        _note(
            f"context {chosen!r} in {label} names user {user_name!r}, which no file of it "
            "defines: connecting without credentials, as kubectl does"
        )
    return Loaded(chosen, cluster_name, user_name, tls_parts)


_noted: set[str] = set()


def _note(text: str) -> None:
    """One `note:` line on stderr, once a process: what kubectl passes over in silence."""
    if text not in _noted:
        _noted.add(text)
        print(f"note: {_bounded(inert(text), 1000)}", file=sys.stderr, flush=True)


def tls_refusal(loaded: Loaded, part: str, mismatched: bool = False) -> str:
    """The line for a certificate or key of `loaded` that ssl cannot load, `part` and
    `mismatched` as transport.TLSMaterialError's."""
    given, fix = loaded.tls_parts.get(part) or (f"the {part} of context {loaded.context!r}", "")
    if mismatched:
        return f"{given} is not the key of its client certificate{fix}"
    what = "private key" if part == "client-key" else "certificate"
    return f"{given} is not a PEM {what}{fix}"


def _tls_parts(
    cluster: _Entry, cluster_name: str, user: _Entry | None, user_name: str
) -> dict[str, tuple[str, str]]:
    parts: dict[str, tuple[str, str]] = {}
    for entry, owner, key in (
        (cluster, f"cluster {cluster_name!r}", "certificate-authority"),
        (user, f"user {user_name!r}", "client-certificate"),
        (user, f"user {user_name!r}", "client-key"),
    ):
        if entry is None:
            continue
        owner = f"{owner} in {entry.origin}"
        path = entry.body.get(key)
        if entry.body.get(key + "-data"):
            parts[key] = (f"{owner}: {key}-data", ": fix it in the kubeconfig")
        elif isinstance(path, str) and path:
            parts[key] = (f"{owner}: {key} {_beside(entry.origin, path)}", ": fix the file")
        elif "exec" in entry.body:
            what = key.replace("-", " ")
            parts[key] = (f"{owner}: the {what} its credential plugin answered", "")
    return parts


class ConfigException(Exception):
    """The kubernetes client's loaders (or the same checks made here) refused a
    configuration; str() says why."""


def _load_with_provider(
    minimal: dict[str, Any], chosen: str, configuration: Configuration
) -> list[str]:
    """An auth-provider (oidc) user set up by the kubernetes client's own loader, which
    knows each provider; what it logged at ERROR meanwhile (a failed provider is only
    logged). The client is loaded only for such a user: importing it costs every command
    a third of a second."""
    from kubernetes.config.config_exception import ConfigException as LoaderException
    from kubernetes.config.kube_config import KubeConfigLoader

    try:
        with logged_errors() as logged:
            KubeConfigLoader(
                config_dict=minimal, active_context=chosen, config_base_path=""
            ).load_and_set(configuration)
    except (LoaderException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigException(str(exc)) from None
    return logged


def _configure(configuration: Configuration, cluster: dict[str, Any], user: dict[str, Any]) -> None:
    """`configuration` set up for an inlined cluster and user (no auth-provider) as the
    kubernetes client's KubeConfigLoader sets it up (kubernetes/config/kube_config.py
    `_load_cluster_info`, `_load_user_token`, `_load_user_pass_token`, `_set_config`,
    kubernetes-client/python v37.0.3): the server without its trailing slashes; for https,
    the certificate authority and client certificate as files; a token, else a user name
    and password, as the Authorization header."""
    token = user.get("token")
    if token:
        configuration.api_key["BearerToken"] = f"Bearer {token}"
    elif "username" in user and "password" in user:
        try:
            pair = user["username"] + ":" + user["password"]
        except TypeError as exc:
            raise ConfigException(str(exc)) from None
        try:
            basic = base64.b64encode(pair.encode("latin-1")).decode()  # as urllib3 encodes it
        except UnicodeEncodeError as exc:
            raise ConfigException(str(exc)) from None
        configuration.api_key["BearerToken"] = f"Basic {basic}"
    host = str(cluster["server"]).rstrip("/")
    configuration.host = host
    if host.startswith("https"):
        configuration.ssl_ca_cert = _data_file(cluster.get("certificate-authority-data"))
        configuration.cert_file = _data_file(user.get("client-certificate-data"))
        configuration.key_file = _data_file(user.get("client-key-data"))
    if "insecure-skip-tls-verify" in cluster:
        configuration.verify_ssl = not cluster["insecure-skip-tls-verify"]
    if "tls-server-name" in cluster:
        configuration.tls_server_name = cluster["tls-server-name"]
    if "proxy-url" in cluster:
        configuration.proxy = cluster["proxy-url"]


_data_files: dict[bytes, str] = {}
_data_folder: str | None = None  # where they go, when not the temporary folder (a worker's)


def _data_file(data: object) -> str | None:
    """A file holding base64 `data` decoded, as urllib3 takes certificates and keys: one
    file per content, private to the user (mkstemp: 0600), removed at exit."""
    if data in (None, ""):
        return None
    try:
        content = base64.standard_b64decode(data)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ConfigException(str(exc)) from None
    name = _data_files.get(content)
    if name is None:
        import atexit
        import tempfile

        if not _data_files:
            atexit.register(remove_data_files)
        descriptor, name = tempfile.mkstemp(dir=_data_folder)
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
        _data_files[content] = name
    return name


def write_data_files_in(folder: str) -> None:
    """In a forked worker: the files written so far are its parent's, which removes them;
    what it needs it writes anew, into `folder`, which its parent removes once the worker
    has ended (killed by then, if a cluster of it was given up on: no exit function)."""
    global _data_folder
    _data_files.clear()
    _data_folder = folder


def remove_data_files() -> None:
    """Remove the files `_data_file` wrote (at exit; and where the process ends without its
    exit functions: `entry`)."""
    for name in _data_files.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _data_files.clear()


def load_incluster_config(client_configuration: Configuration) -> None:
    """`client_configuration` set up from the pod's service account by the kubernetes
    client's loader (its token file re-read as it renews); ConfigException when unusable."""
    from kubernetes.config.config_exception import ConfigException as LoaderException
    from kubernetes.config.incluster_config import load_incluster_config as load_service_account

    try:
        load_service_account(client_configuration=client_configuration)
    except LoaderException as exc:
        raise ConfigException(str(exc)) from None


def _read_part(path_value: object, origin: str, subject: str) -> bytes:
    """A file a kubeconfig names, relative to the kubeconfig that names it."""
    if not isinstance(path_value, str) or not path_value or "\0" in path_value:
        raise KubeconfigProblem(f"{subject} is not a path")
    path = _beside(origin, path_value)
    try:
        return read_regular_file(Path(path), KUBECONFIG_BYTES, f"{subject} {path}")
    except LimitError as exc:
        raise KubeconfigProblem(str(exc)) from None
    except OSError as exc:
        raise KubeconfigProblem(f"cannot read {subject} {path}: {exc.strerror or exc}") from None


def _beside(origin: str, path_value: str) -> str:
    """A path a kubeconfig names, relative to that kubeconfig."""
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(origin)), path_value))


def _inline_cluster(entry: _Entry, name: str) -> dict[str, Any]:
    cluster = copy.deepcopy(entry.body)
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigProblem(f"cluster {name!r} in {entry.origin} has no server")
    if not _is_url(server):
        raise KubeconfigProblem(
            f"cluster {name!r} in {entry.origin}: server '{shown_url(server)}' is not a URL: "
            "fix it in the kubeconfig"
        )
    ca = cluster.pop("certificate-authority", None)
    if ca is not None and not cluster.get("certificate-authority-data"):
        data = _read_part(ca, entry.origin, f"certificate-authority of cluster {name!r}:")
        cluster["certificate-authority-data"] = base64.b64encode(data).decode()
    _check_base64(cluster, "certificate-authority-data", f"cluster {name!r}")
    return cluster


def _is_url(server: str) -> bool:
    """Whether `server` is a URL, or a host:port that client-go puts a scheme before (rest
    `DefaultServerURL`, rest/url_utils.go, kubernetes/client-go@v0.32.0: a path after a
    host:port is refused); not one where Go's url.Parse refuses it (net/url: a control
    character, an unclosed `[`, a port that is no number, a space in the host)."""
    if any(c < " " or c == "\x7f" for c in server):
        return False
    try:
        parts = urlsplit(server)
        if not (parts.scheme and parts.netloc):
            parts = urlsplit("https://" + server)
            if parts.path not in ("", "/"):
                return False
        parts.port  # noqa: B018 - a ValueError where the port is no number
    except ValueError:
        return False
    return bool(parts.hostname) and not any(c.isspace() for c in parts.netloc)


def _with_scheme(cluster: dict[str, Any], user: _Entry | None) -> str:
    """The server, with https:// before a host:port when the cluster or user has TLS (a
    certificate authority, insecure-skip-tls-verify or a client certificate), else http://,
    as client-go's rest `DefaultServerUrlFor` and `DefaultServerURL` put it there
    (rest/url_utils.go, kubernetes/client-go@v0.32.0); urllib3 would warn of a URL without
    one, and refuse it in its version 3."""
    server = str(cluster["server"])
    parts = urlsplit(server)
    if parts.scheme and parts.netloc:
        return server
    certificate = user.body if user is not None else {}
    tls = (
        bool(cluster.get("certificate-authority-data"))
        or bool(cluster.get("insecure-skip-tls-verify"))
        or bool(certificate.get("client-certificate") or certificate.get("client-certificate-data"))
    )
    return ("https://" if tls else "http://") + server


def _check_base64(entry: dict[str, Any], key: str, owner: str) -> None:
    value = entry.get(key)
    if value in (None, ""):
        return
    try:
        base64.standard_b64decode(str(value))  # as the client decodes it: whitespace is fine
    except ValueError:
        raise KubeconfigProblem(f"{key} of {owner} is not base64") from None


def _inline_user(
    entry: _Entry | None, name: str, cluster: dict[str, Any]
) -> tuple[dict[str, Any], TokenRenewal | None]:
    """The user with its files' contents in place of their paths and its plugin's answer
    in place of its `exec`, and how its token is renewed (None: it is not)."""
    if entry is None:
        return {}, None
    user = copy.deepcopy(entry.body)
    origin = entry.origin
    provider = user.get("auth-provider")
    provider_name = provider.get("name") if isinstance(provider, dict) else None
    if provider_name in ("gcp", "azure"):
        # Removed from kubectl in 1.26 (kubernetes/kubernetes CHANGELOG/CHANGELOG-1.26.md);
        # the client's gcp one runs its cmd-path without a timeout.
        raise KubeconfigProblem(
            f"user {name!r} in {origin} uses the {provider_name} auth-provider, which kubectl "
            "no longer supports: use the provider's exec credential plugin"
        )
    if provider_name == "oidc" and _oidc_expired(provider):
        raise KubeconfigProblem(
            f"the oidc id-token of user {name!r} in {origin} has expired, and mignurse does "
            "not call the identity provider itself: refresh it (kubectl get nodes, or an "
            "exec plugin such as kubelogin) and try again"
        )
    for key in ("client-certificate", "client-key"):
        path_value = user.pop(key, None)
        if path_value is not None and not user.get(key + "-data"):
            data = _read_part(path_value, origin, f"{key} of user {name!r}:")
            user[key + "-data"] = base64.b64encode(data).decode()
        _check_base64(user, key + "-data", f"user {name!r}")
    renewal: TokenRenewal | None = None
    if user.get("token") in (None, ""):
        user.pop("token", None)  # `token: ""` or `token:` is no token, as for the client
    elif not isinstance(user["token"], str):
        user["token"] = str(user["token"])
    token_file = user.pop("tokenFile", None)
    if "token" not in user and token_file is not None:
        subject = f"tokenFile of user {name!r}:"

        def read_token() -> Credential:
            raw = _read_part(token_file, origin, subject)
            return Credential(token=_token_text(raw, f"{subject} {token_file}"))

        user["token"] = read_token().token
        renewal = TokenRenewal(read_token, None)
    if "token" in user:
        problem = token_problem(user["token"])
        if problem:
            raise KubeconfigProblem(f"the token of user {name!r} {problem}")
    exec_block = user.pop("exec", None)
    if exec_block is not None and "auth-provider" not in user and "token" not in user:
        try:
            plugin = Plugin.from_config(
                exec_block,
                base=os.path.dirname(os.path.abspath(origin)),
                cluster=_cluster_info(cluster),
            )
        except ValueError as exc:
            raise KubeconfigProblem(f"user {name!r} in {origin}: {exc}") from None
        try:
            credential = run_plugin(plugin)
        except CredentialError as exc:
            exc.plugin = plugin  # what renews it: load() says
            raise
        if credential.token:
            user["token"] = credential.token
            renewal = TokenRenewal(lambda: run_plugin(plugin), credential.expires)
        else:
            user["client-certificate-data"] = _b64(credential.client_certificate_data)
            user["client-key-data"] = _b64(credential.client_key_data)
    return user, renewal


def _oidc_expired(provider: object) -> bool:
    """Whether the kubernetes client would refresh this oidc id-token before using it: its
    JWT `exp` less than five minutes away (kubernetes/config/kube_config.py
    `_load_oid_token`, kubernetes-client/python v37.0.1). A token it cannot read it uses as
    it is, and so does mignurse."""
    config = provider.get("config") if isinstance(provider, dict) else None
    token = config.get("id-token") if isinstance(config, dict) else None
    if not isinstance(token, str) or token.count(".") != 2:
        return False
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        expires = datetime.fromtimestamp(float(claims["exp"]), tz=UTC)
    except (ValueError, TypeError, KeyError, OverflowError, OSError, RecursionError):
        return False
    return expires - timedelta(minutes=5) <= datetime.now(UTC)


def _b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


def _token_text(raw: bytes, subject: str) -> str:
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise KubeconfigProblem(f"{subject} is not text") from None
    problem = token_problem(token)
    if problem:
        raise KubeconfigProblem(f"{subject} holds a token that {problem}")
    return token


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """What `provideClusterInfo` hands a plugin (client-go's clientauthentication Cluster)."""
    info: dict[str, Any] = {
        key: cluster[key]
        for key in (
            "server",
            "tls-server-name",
            "insecure-skip-tls-verify",
            "certificate-authority-data",
            "proxy-url",
            "disable-compression",
        )
        if key in cluster
    }
    extensions = cluster.get("extensions")
    for extension in extensions if isinstance(extensions, list) else ():
        if isinstance(extension, dict) and extension.get("name") == (
            "client.authentication.k8s.io/exec"
        ):
            info["config"] = extension.get("extension")
    return info


def _check_proxy(cluster: dict[str, Any], name: str) -> None:
    proxy = cluster.get("proxy-url")
    if proxy is None:
        return
    scheme = urlsplit(str(proxy)).scheme.lower() if isinstance(proxy, str) else ""
    if scheme not in PROXY_SCHEMES:
        raise KubeconfigProblem(
            f"proxy-url {shown_url(str(proxy))} of cluster {name!r}: mignurse reaches the API "
            f"through {', '.join(s + '://' for s in PROXY_SCHEMES)} proxies only"
        )


def _check_proxy_of(configuration: Configuration) -> None:
    """The proxy the client took from the environment, when the kubeconfig names none. One
    without a scheme (`proxy.corp:3128`) is an http:// one, as Go's
    http.ProxyFromEnvironment (which kubectl uses) reads it."""
    proxy = configuration.proxy
    if proxy and "://" not in proxy:
        proxy = configuration.proxy = f"http://{proxy}"
    if not proxy or urlsplit(proxy).scheme.lower() in PROXY_SCHEMES:
        return
    raise KubeconfigProblem(
        f"the proxy {shown_url(proxy)} from the environment (HTTPS_PROXY, HTTP_PROXY or "
        f"ALL_PROXY): mignurse reaches the API through "
        f"{', '.join(s + '://' for s in PROXY_SCHEMES)} proxies only"
    )


# -- the client's logging ---------------------------------------------------------------------


class _LoggedErrors(logging.Handler):
    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def logged_errors() -> Iterator[list[str]]:
    """What the kubernetes client logs at ERROR meanwhile (a failed auth provider is only
    logged). A handler on the root logger also keeps `logging.error()` from installing one
    that prints `ERROR:root:` lines, and urllib3's retries after them."""
    messages: list[str] = []
    handler = _LoggedErrors(messages)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield messages
    finally:
        root.removeHandler(handler)


# -- secrets in messages --------------------------------------------------------------------

# Error messages only: these two are compiled on first use (through `re`'s own cache), not
# on every command's start (a case-blind pattern takes about a millisecond to compile).
_URL = r"(?i)\b[a-z][a-z0-9+.-]*://\S+"
_USERINFO = re.compile(r"^((?:[^:/@\s]*://)?)\S*@")
_QUERY_VALUE = re.compile(r"([?&;][^=&#\s]*=)[^&#\s]*")
# In a message's URLs (a request the client made: `?limit=500&continue=…`), the values of
# parameters named like a credential (X-Amz-Signature, access_token, sig, apiKey, …).
_SECRET_QUERY = (
    r"(?i)([?&;][^=&#\s]*(?:token|key|secret|sig|pass|pwd|auth|credential|session|code)"
    r"[^=&#\s]*=)[^&#\s]*"
)


def shown_url(url: str) -> str:
    """`url` as it may be shown: user info masked (`https://***@host`), every query value
    masked, no fragment, inert."""
    masked = _USERINFO.sub(r"\1***@", url)
    masked = masked.split("#", 1)[0]
    return _bounded(inert(_QUERY_VALUE.sub(r"\1***", masked)), 300)


def scrub(text: str, configuration: Any = None) -> str:
    """`text` with the user info and credential-named query values of every URL in it
    masked, and every secret the connection holds (the URLs' passwords and query values,
    the token) too."""
    text = re.sub(
        _URL, lambda m: re.sub(_SECRET_QUERY, r"\1***", _USERINFO.sub(r"\1***@", m[0])), text
    )
    for secret in _secrets_of(configuration):
        text = text.replace(secret, "***")
        # A message cut short may end in the first part of one.
        for length in range(len(secret) - 1, 3, -1):
            if text.endswith(secret[:length]):
                text = text[:-length] + "***"
                break
    return text


def _secrets_of(configuration: Any) -> list[str]:
    if configuration is None:
        return []
    found: list[str] = []
    for url in (getattr(configuration, "host", None), getattr(configuration, "proxy", None)):
        if not isinstance(url, str):
            continue
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        found += [parts.username or "", parts.password or ""]
        for pair in parts.query.split("&"):
            found.append(pair.partition("=")[2])
    api_key = getattr(configuration, "api_key", None) or {}
    bearer = api_key.get("BearerToken") if isinstance(api_key, dict) else None
    if isinstance(bearer, str):
        found.append(bearer.removeprefix("Bearer "))
    # Longest first, so a secret holding another is masked whole; each as written and
    # percent-decoded. Short values ("1", "us") are not secrets worth blanking words for.
    both = {v for s in found for v in (s, unquote(s)) if len(v) >= 4}
    return sorted(both, key=len, reverse=True)


def _some(names: list[str], shown: int = 20) -> str:
    if not names:
        return "none defined"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:300]
