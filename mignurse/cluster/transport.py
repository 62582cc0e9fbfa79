"""The HTTP side of a connection to the API server: the parts of the kubernetes client's
`Configuration`, `ApiClient` and `RESTClientObject` that `client.py` uses, on urllib3 alone.

Importing any module of the `kubernetes` package runs its `__init__`, which loads the whole
client (pydantic models, dateutil, the kubeconfig loader with OAuth libraries): about 0.3 s
of every command's start, for a few hundred lines that send a request through a urllib3 pool.
These classes do what those do, attribute for attribute, as kubernetes-client/python v37.0.3
`kubernetes/client/configuration.py`, `api_client.py` (`param_serialize`, `call_api`,
`parameters_to_url_query`, `update_params_for_auth`) and `rest.py` (`RESTClientObject`,
`should_bypass_proxies`) do them. Its loaders (`KubeConfigLoader` for an auth-provider,
`load_incluster_config`) still set a `Configuration` up, as they only set attributes; they
are imported where they are needed (`kubeconfig.py`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import ssl
from typing import Any
from urllib.parse import quote, urlparse

import urllib3

# The kubernetes client's User-Agent, so that the API server's audit log reads the same.
USER_AGENT = "OpenAPI-Generator/37.0.3/python"
SOCKS_SCHEMES = ("socks5", "socks5h", "socks4", "socks4a")
_BODY_METHODS = ("POST", "PUT", "PATCH", "OPTIONS", "DELETE")


class ApiException(Exception):
    """A request that could not be made or answered (status 0: TLS and the like)."""

    def __init__(self, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.body: str | None = None
        self.headers: Any = None

    def __str__(self) -> str:
        return f"({self.status})\nReason: {self.reason}\n"


class TLSMaterialError(Exception):
    """A certificate authority, client certificate or client key that ssl cannot load (not
    PEM): `part` says which ("certificate-authority", "client-certificate", "client-key"),
    `mismatched` that the key is not the client certificate's; str() is ssl's words."""

    def __init__(self, part: str, why: str, *, mismatched: bool = False) -> None:
        super().__init__(why)
        self.part = part
        self.mismatched = mismatched


class Configuration:
    """Where and how to connect: what the kubeconfig (or the in-cluster service account)
    said, and the proxy the environment names for the host when the kubeconfig names none."""

    def __init__(self) -> None:
        self.api_key: dict[str, str] = {}
        self.api_key_prefix: dict[str, str] = {}
        self.refresh_api_key_hook: Any = None
        self.verify_ssl = True
        self.ssl_ca_cert: str | None = None
        self.ca_cert_data: str | bytes | None = None
        self.cert_file: str | None = None
        self.key_file: str | None = None
        self.assert_hostname: Any = None
        self.tls_server_name: str | None = None
        self.connection_pool_maxsize = (os.cpu_count() or 1) * 5
        self.retries: Any = None
        self.socket_options: Any = None
        self.proxy_headers: Any = None
        self.proxy_ssl_context: ssl.SSLContext | None = None
        self._proxy_from_env = True
        proxies = getproxies()
        self._host = "http://localhost"
        self._proxy: str | None = _env_proxy(proxies, self._host)
        self.no_proxy: str | None = proxies.get("no")

    @property
    def host(self) -> str:
        return self._host

    @host.setter
    def host(self, value: str) -> None:
        self._host = value
        if self._proxy_from_env:
            # the scheme's proxy depends on the host, which is set after construction
            self._proxy = _env_proxy(getproxies(), value)

    @property
    def proxy(self) -> str | None:
        return self._proxy

    @proxy.setter
    def proxy(self, value: str | None) -> None:
        self._proxy = value
        self._proxy_from_env = False

    def bearer(self) -> str | None:
        """The Authorization header's value, renewed first by `refresh_api_key_hook`."""
        if "BearerToken" not in self.api_key and "authorization" not in self.api_key:
            return None
        if self.refresh_api_key_hook is not None:
            self.refresh_api_key_hook(self)
        key = self.api_key.get("BearerToken", self.api_key.get("authorization"))
        if not key:
            return None
        prefix = self.api_key_prefix.get("BearerToken", self.api_key_prefix.get("authorization"))
        return f"{prefix} {key}" if prefix else key


def getproxies() -> dict[str, str]:
    """The proxies the environment names (`https_proxy`, `HTTPS_PROXY`, `no_proxy`, ...), as
    the kubernetes client reads them through `urllib.request.getproxies`, which on Linux is
    `getproxies_environment` (CPython 3.11 Lib/urllib/request.py): a lowercase name wins,
    an empty one removes its scheme, and under CGI (REQUEST_METHOD set) `HTTP_PROXY` is a
    request header, not a setting. Here, so that every command does not load urllib.request."""
    proxies: dict[str, str] = {}
    for name, value in os.environ.items():
        name = name.lower()
        if value and name[-6:] == "_proxy":
            proxies[name[:-6]] = value
    if "REQUEST_METHOD" in os.environ:
        proxies.pop("http", None)
    for name, value in os.environ.items():
        if name[-6:] == "_proxy":
            name = name.lower()
            if value:
                proxies[name[:-6]] = value
            else:
                proxies.pop(name[:-6], None)
    return proxies


def _env_proxy(proxies: dict[str, str], host: str) -> str | None:
    return proxies.get(urlparse(host).scheme) or proxies.get("all")


def _quiet_unverified(*urls: str | None) -> None:
    """The kubeconfig said `insecure-skip-tls-verify: true`: the user chose it, and kubectl
    says nothing of it, so neither does urllib3's InsecureRequestWarning (a source path and a
    long line on stderr, urllib3 2.x src/urllib3/connectionpool.py `_validate_conn`). Only
    that warning, only for this server's host (or its proxy's): any other stays."""
    import warnings

    for url in urls:
        host = (urlparse(url).hostname or "").rstrip(".") if url else None
        if host:
            warnings.filterwarnings(
                "ignore",
                message=f"Unverified HTTPS request is being made to host '{re.escape(host)}'",
                category=urllib3.exceptions.InsecureRequestWarning,
            )


class Response:
    """An answer whose body is still to be read (`response`: urllib3's)."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.status = response.status
        self.reason = response.reason


class RestClient:
    """The urllib3 pool manager a connection's requests go through."""

    def __init__(self, configuration: Configuration) -> None:
        if not configuration.verify_ssl:
            _quiet_unverified(configuration.host, configuration.proxy)
        cert_reqs = ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE
        pool_args: dict[str, Any] = {"cert_reqs": cert_reqs}
        # A certificate or key ssl cannot read, which every connection would fail on:
        # `ClusterClient.connect` says which field of the kubeconfig it is.
        self.tls_problem: TLSMaterialError | None = None
        try:
            context = _shared_context(configuration, cert_reqs)
        except TLSMaterialError as exc:
            self.tls_problem, context = exc, None
        if context is not None:
            pool_args["ssl_context"] = context
        else:  # each connection loads them, and fails on them, as urllib3 does by itself
            pool_args.update(
                ca_certs=configuration.ssl_ca_cert,
                cert_file=configuration.cert_file,
                key_file=configuration.key_file,
                ca_cert_data=configuration.ca_cert_data,
            )
        if configuration.assert_hostname is not None:
            pool_args["assert_hostname"] = configuration.assert_hostname
        if configuration.retries is not None:
            pool_args["retries"] = configuration.retries
        if configuration.tls_server_name:
            pool_args["server_hostname"] = configuration.tls_server_name
        if configuration.socket_options is not None:
            pool_args["socket_options"] = configuration.socket_options
        if configuration.connection_pool_maxsize is not None:
            pool_args["maxsize"] = configuration.connection_pool_maxsize
        proxy = configuration.proxy
        self.pool_manager: urllib3.PoolManager
        if proxy and not should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
            pool_args["proxy_url"] = proxy
            if proxy.split("://")[0].lower() in SOCKS_SCHEMES and "://" in proxy:
                from urllib3.contrib.socks import SOCKSProxyManager

                pool_args["headers"] = configuration.proxy_headers
                self.pool_manager = SOCKSProxyManager(**pool_args)
            else:
                pool_args["proxy_headers"] = configuration.proxy_headers
                if configuration.proxy_ssl_context is not None:
                    pool_args["proxy_ssl_context"] = configuration.proxy_ssl_context
                self.pool_manager = urllib3.ProxyManager(**pool_args)
        else:
            self.pool_manager = urllib3.PoolManager(**pool_args)

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: Any,
        timeout: tuple[float, float] | None,
    ) -> Response:
        method = method.upper()
        kwargs: dict[str, Any] = {"headers": headers, "preload_content": False}
        if timeout:
            kwargs["timeout"] = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        try:
            if method not in _BODY_METHODS:
                raw = self.pool_manager.request(method, url, fields={}, **kwargs)
            else:
                raw = self.pool_manager.request(method, url, body=_encoded(body, headers), **kwargs)
        except urllib3.exceptions.SSLError as exc:
            raise ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}") from None
        return Response(raw)


def _shared_context(configuration: Configuration, cert_reqs: int) -> ssl.SSLContext | None:
    """One TLS context for every connection of a client. Given none, urllib3 builds one per
    connection and loads the CA and the client certificate into it each time (urllib3 2.x
    src/urllib3/connection.py `_ssl_wrap_socket_and_match_hostname`, util/ssl_.py
    `ssl_wrap_socket`), and the system's trust store where the kubeconfig names no CA: tens
    of milliseconds a connection, and a command opens one per parallel read. This is the
    context urllib3 would build, loaded once (no trust store where nothing is verified).
    TLSMaterialError where ssl cannot read a certificate or key (not PEM); None where
    something else cannot be loaded here (a missing file, an encrypted key). Then urllib3
    loads it per connection and says what is wrong as it always has."""
    from urllib3.util.ssl_ import create_urllib3_context

    def no_password() -> str:
        raise ValueError("the client key is encrypted")  # urllib3 refuses it in its words

    context = create_urllib3_context(cert_reqs=cert_reqs)
    try:
        if configuration.ssl_ca_cert or configuration.ca_cert_data:
            try:
                context.load_verify_locations(
                    configuration.ssl_ca_cert, None, configuration.ca_cert_data
                )
            except ssl.SSLError as exc:
                raise TLSMaterialError("certificate-authority", str(exc)) from None
        elif cert_reqs != ssl.CERT_NONE:
            context.load_default_certs()
        if configuration.cert_file:
            try:
                context.load_cert_chain(
                    configuration.cert_file, configuration.key_file, password=no_password
                )
            except ssl.SSLError as exc:
                raise _cert_or_key(configuration.cert_file, exc) from None
    except (OSError, ValueError, TypeError):
        return None
    return context


def _cert_or_key(cert_file: str, exc: ssl.SSLError) -> TLSMaterialError:
    """Which of a client certificate and its key ssl refused (its error does not say: a
    bad one of either is `[SSL] PEM lib`): the certificate where it does not load alone."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cert_file)
    except ssl.SSLError:
        return TLSMaterialError("client-certificate", str(exc))
    mismatched = exc.reason == "KEY_VALUES_MISMATCH"
    return TLSMaterialError("client-key", str(exc), mismatched=mismatched)


def _encoded(body: Any, headers: dict[str, str]) -> Any:
    """The body as the kubernetes client sends it: JSON (and YAML given as data) dumped,
    text and bytes as they are."""
    content_type = headers.get("Content-Type")
    if content_type == "application/json-patch+json" and not isinstance(body, list):
        # an object patch to a built-in kind is a strategic merge
        headers["Content-Type"] = content_type = "application/strategic-merge-patch+json"
    structured = not content_type or _matches(content_type, "application", "json")
    if content_type and not isinstance(body, str | bytes):
        structured = structured or any(
            _matches(content_type, main, sub)
            for main, sub in (("application", "yaml"), ("text", "yaml"), ("text", "x-yaml"))
        )
    if structured:
        return None if body is None else json.dumps(body)
    if isinstance(body, str | bytes):
        return body
    if content_type and content_type.startswith("text/") and isinstance(body, bool):
        return "true" if body else "false"
    raise ApiException(status=0, reason="Cannot prepare a request message for the body given")


def _matches(content_type: str, main: str, sub: str) -> bool:
    pattern = f"{re.escape(main)}/(?:[^+;]+\\+)?{re.escape(sub)}(?:[ \t]*;.*)?"
    return re.fullmatch(pattern, content_type, re.IGNORECASE) is not None


def should_bypass_proxies(url: str, no_proxy: str) -> bool:
    """Whether `url` matches one of the comma-separated `no_proxy` rules."""
    parsed = urlparse(url)
    if not parsed.hostname:
        return True
    host = parsed.hostname.lower()
    host_and_port = parsed.netloc.lower()
    try:
        host_ip: Any = ipaddress.ip_address(host)
    except ValueError:
        host_ip = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if host_ip is not None:
            try:
                if host_ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
        entry = entry.lstrip(".")
        if (
            host == entry
            or host.endswith("." + entry)
            or host_and_port == entry
            or host_and_port.endswith("." + entry)
        ):
            return True
    return False


class ApiClient:
    """Builds a request (URL, headers, the bearer token) and sends it."""

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        self.rest_client = RestClient(configuration)
        self.default_headers = {"User-Agent": USER_AGENT}

    def param_serialize(
        self,
        method: str,
        resource_path: str,
        query_params: list[tuple[str, Any]] | None = None,
        header_params: dict[str, str] | None = None,
        body: Any = None,
        auth_settings: list[str] | None = None,
    ) -> tuple[str, str, dict[str, str], Any]:
        headers = {**(header_params or {}), **self.default_headers}
        if auth_settings and "BearerToken" in auth_settings:
            token = self.configuration.bearer()
            if token:
                headers["authorization"] = token
        url = self.configuration.host + resource_path
        if query_params:
            url += "?" + "&".join(f"{key}={_query_value(value)}" for key, value in query_params)
        return method, url, headers, body

    def call_api(
        self,
        method: str,
        url: str,
        header_params: dict[str, str],
        body: Any = None,
        _request_timeout: tuple[float, float] | None = None,
    ) -> Response:
        return self.rest_client.request(method, url, header_params, body, _request_timeout)

    def close(self) -> None:
        self.rest_client.pool_manager.clear()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, dict):
        value = json.dumps(value)
    return quote(str(value))
