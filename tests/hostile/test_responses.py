"""An API server that answers badly: a gzip bomb, a million objects in one page, a one
byte a second drip, Retry-After an hour away, a body cut short, `null` items, bytes that are
not UTF-8, nesting a hundred thousand deep, a Date in year 9999, a proxy's HTML error page.

The real `mignurse nodes` and `mignurse diagnose` run against it through a kubeconfig, as a
user runs them: each ends in one `mignurse: error:` line and exit code 2 (a cluster error,
README "Exit codes"), never an internal error (3), within a deadline with a wide margin.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from mignurse.cluster.client import NODES, BadAnswer, ClusterClient, TooManyRequests, TooSlow
from mignurse.model import Node

from .inputs import mignurse, node_object, one_line_error
from .peak import mignurse_peak

MiB = 2**20
GiB = 2**30
ESC = "\x1b"

Answer = Callable[["Handler"], None]


@dataclass
class Hostile:
    """What the server answers to the node list (`nodes`); every other path is a 404 Status
    (no Karpenter, no DRA) or, for another list, an empty list."""

    nodes: Answer
    date: str | None = None  # the Date header of every answer (None: the real time)
    watch: Answer | None = None  # what a watch gets (None: nothing, until it gives up)
    requests: list[str] = field(default_factory=list)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def do_GET(self) -> None:
        hostile = self.server.hostile
        hostile.requests.append(self.path)
        path = urlsplit(self.path).path
        if self.query().get("watch"):
            (hostile.watch or silent)(self)
        elif path == "/api/v1/nodes":
            hostile.nodes(self)
        elif path.count("/") >= 4 or path.startswith("/api/v1/"):
            send(self, 200, kube_list([]))
        else:
            status = {"kind": "Status", "code": 404, "message": f"{path} not found"}
            send(self, 404, json.dumps(status).encode())

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    hostile: Hostile


def send(
    handler: Handler,
    status: int,
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    length: int | None = None,
) -> None:
    """One answer, written raw: the status, the headers asked for (and Date), the body."""
    date = handler.server.hostile.date or handler.date_time_string()
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}", f"Date: {date}"]
    all_headers = {"Content-Type": "application/json", "Connection": "close", **(headers or {})}
    if "Transfer-Encoding" not in all_headers:
        all_headers["Content-Length"] = str(len(body) if length is None else length)
    lines += [f"{k}: {v}" for k, v in all_headers.items()]
    try:
        handler.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        handler.wfile.flush()
    except OSError:
        pass  # the client gave up on it, as it should
    handler.close_connection = True


def kube_list(items: list[Any], kind: str = "NodeList", token: str = "") -> bytes:
    meta: dict[str, str] = {"resourceVersion": "7"}
    if token:
        meta["continue"] = token
    return json.dumps({"kind": kind, "apiVersion": "v1", "metadata": meta, "items": items}).encode()


def small_node(index: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"ip-10-{index // 65536}-{index // 256 % 256}-{index % 256}"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Hostile], Path]]:
    """Serves a Hostile on 127.0.0.1; returns a kubeconfig that points at it."""
    servers: list[Server] = []

    def start(hostile: Hostile) -> Path:
        server = Server(("127.0.0.1", 0), Handler)
        server.hostile = hostile
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
            ],
            "users": [{"name": "u", "user": {"token": "hostile-test"}}],
            "contexts": [{"name": "hostile", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "hostile",
        }
        path = tmp_path / f"kubeconfig-{len(servers)}"
        path.write_text(yaml.safe_dump(config))
        return path

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run_cli(kubeconfig: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return mignurse("--kubeconfig", str(kubeconfig), *args, env=env, timeout=120)


# -- the answers ----------------------------------------------------------------------------


@functools.cache
def gzip_member_of_zeros(size: int) -> bytes:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(16 * MiB)
    parts = [squeeze.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, squeeze.flush()])


def gzip_bomb(handler: Handler) -> None:
    """About 8 MB on the wire that inflates to 8 GiB: 32 gzip members of 256 MiB of zeros."""
    body = gzip_member_of_zeros(256 * MiB) * 32
    send(handler, 200, body, {"Content-Encoding": "gzip"})


def silent(handler: Handler) -> None:
    """A watch on which nothing happens for a minute."""
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        handler.wfile.flush()
    except OSError:
        return
    time.sleep(60)
    handler.close_connection = True


def drip(handler: Handler, *, headers_too: bool = False) -> None:
    """One byte a second, up to a minute, until the client hangs up."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
    if not headers_too:
        handler.wfile.write(head + b"\r\n")
        head = b'{"kind":"NodeList","items":['
    for _ in range(60):
        try:
            handler.wfile.write(head[:1] or b" ")
            handler.wfile.flush()
        except OSError:
            return
        head = head[1:]
        time.sleep(1)
    handler.close_connection = True


def retry_after(seconds: str, status: int = 429) -> Answer:
    def answer(handler: Handler) -> None:
        body = {"kind": "Status", "code": status, "message": "too many requests, slow down"}
        send(handler, status, json.dumps(body).encode(), {"Retry-After": seconds})

    return answer


def busy_then_fine(busy_answers: int) -> Answer:
    left = [busy_answers]

    def answer(handler: Handler) -> None:
        if left[0] > 0:
            left[0] -= 1
            retry_after("1")(handler)
        else:
            send(handler, 200, kube_list([node_object()]))

    return answer


def body(data: bytes, status: int = 200, **headers: str) -> Answer:
    return lambda handler: send(handler, status, data, headers)


def cut_short(handler: Handler) -> None:
    """A Content-Length of the whole list, and half of it sent before the connection closes."""
    whole = kube_list([node_object()])
    send(handler, 200, whole[: len(whole) // 2], length=len(whole))


def cut_short_without_length(handler: Handler) -> None:
    """No Content-Length: the body just ends (connection close) in the middle of the JSON."""
    whole = kube_list([node_object()])
    lines = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    handler.wfile.write(lines + whole[: len(whole) // 2])
    handler.close_connection = True


def one_page_of(count: int) -> Answer:
    """A server that ignores `limit=` and sends `count` nodes in one page."""
    items = b",".join(json.dumps(small_node(i)).encode() for i in range(count))
    page = b'{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":['
    data = page + items + b"]}"
    return body(data)


def html_error_page(handler: Handler) -> None:
    """A load balancer's 502 page: long, with escape sequences planted in it."""
    page = (
        "<html><head><title>502 Bad Gateway</title></head><body>"
        + f"{ESC}]52;c;cm0gLXJmIH4K{ESC}\\{ESC}[2J"
        + "<p>upstream unavailable</p>" * 4000
        + "</body></html>"
    ).encode()
    send(handler, 502, page, {"Content-Type": "text/html"})


# -- each bad answer ends in one line -------------------------------------------------------


def test_a_gzip_bomb_is_refused_at_the_compression_ratio_cap(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=gzip_bomb))
    line = one_line_error(run_cli(kubeconfig, "nodes"))
    assert "list nodes" in line
    assert "MIGNURSE_MAX_RESPONSE_RATIO=" in line, line


def test_a_gzip_bomb_with_the_ratio_cap_raised_stops_at_the_size_cap(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=gzip_bomb))
    result = run_cli(kubeconfig, "nodes", MIGNURSE_MAX_RESPONSE_RATIO="100000")
    line = one_line_error(result)
    assert "over the limit of 64 MiB for one API answer, decoded" in line, line
    assert "MIGNURSE_MAX_RESPONSE_BYTES=256M raises it" in line


@pytest.mark.deep
def test_a_million_nodes_in_one_page_stay_under_a_gigabyte(
    serve: Callable[[Hostile], Path], tmp_path: Path
) -> None:
    """A server that ignores `limit=`: the real CLI in a process of its own, its peak memory
    that process's own (tests/hostile/peak.py)."""
    kubeconfig = serve(Hostile(nodes=one_page_of(1_000_000)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MIGNURSE_"))}
    result, peak = mignurse_peak("--kubeconfig", str(kubeconfig), "nodes", env=env, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("mignurse: error: "), result.stderr
    assert "MIGNURSE_MAX_RESPONSE_BYTES=" in result.stderr, result.stderr
    assert peak < GiB, f"peak RSS {peak / MiB:.0f} MiB"


def test_more_objects_in_one_page_than_the_page_cap_say_the_server_ignored_the_limit(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=one_page_of(20_000)))
    line = one_line_error(run_cli(kubeconfig, "nodes"))
    assert "MIGNURSE_MAX_PAGE_ITEMS=40000 raises it" in line, line
    assert "ignored the page size" in line


def test_a_list_longer_than_the_list_cap_names_the_cap(serve: Callable[[Hostile], Path]) -> None:
    def pages(handler: Handler) -> None:
        start = int(handler.query().get("continue") or 0)
        items = [small_node(i) for i in range(start, start + 500)]
        send(handler, 200, kube_list(items, token=str(start + 500)))

    kubeconfig = serve(Hostile(nodes=pages))
    line = one_line_error(run_cli(kubeconfig, "nodes", MIGNURSE_MAX_LIST_ITEMS="1200"))
    assert "lists more nodes than that" in line
    assert "over the limit of 1,200 objects for the objects of one list" in line, line


def _pages_of_500(handler: Handler) -> None:
    start = int(handler.query().get("continue") or 0)
    items = [small_node(i) for i in range(start, start + 500)]
    send(handler, 200, kube_list(items, token=str(start + 500)))


@pytest.mark.parametrize("page_bytes", [8 * MiB, 1024])  # pages parsed whole, and walked
def test_a_list_past_the_cap_is_cut_there_when_asked_and_refused_otherwise(
    monkeypatch: pytest.MonkeyPatch, page_bytes: int
) -> None:
    from mignurse.cluster import pages

    monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "1200")
    monkeypatch.setattr(pages, "WHOLE_PAGE_BYTES", page_bytes)
    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=_pages_of_500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        listing = client.list(NODES, Node.from_api, cut=True)
        with pytest.raises(BadAnswer, match="over the limit of 1,200 objects"):
            client.list(NODES, Node.from_api)
    finally:
        server.shutdown()
        server.server_close()
    assert listing.cut and len(listing.items) == 1200
    assert listing.items[-1].name == small_node(1199)["metadata"]["name"]


def test_a_continue_token_handed_back_forever_ends(serve: Callable[[Hostile], Path]) -> None:
    kubeconfig = serve(Hostile(nodes=body(kube_list([small_node(1)], token="again"))))
    line = one_line_error(run_cli(kubeconfig, "nodes"))
    assert "repeats a continue token" in line


def test_a_one_byte_a_second_body_ends_at_the_request_deadline(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=drip))
    line = one_line_error(run_cli(kubeconfig, "nodes", MIGNURSE_REQUEST_TIMEOUT="3"))
    assert "the API server's answer to list nodes took too long" in line, line
    assert "MIGNURSE_REQUEST_TIMEOUT=12 raises it" in line


def test_one_byte_a_second_headers_end_at_the_request_deadline(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=functools.partial(drip, headers_too=True)))
    line = one_line_error(run_cli(kubeconfig, "nodes", MIGNURSE_REQUEST_TIMEOUT="3"))
    assert "took too long" in line, line


def test_a_drip_under_diagnose_ends_at_the_command_deadline(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=drip))
    result = run_cli(kubeconfig, "diagnose", MIGNURSE_COMMAND_TIMEOUT="3")
    line = one_line_error(result)
    assert "reading the cluster took longer than 3 s" in line, line
    assert "MIGNURSE_COMMAND_TIMEOUT=12 allows more" in line


def test_retry_after_an_hour_fails_at_once_and_says_what_the_server_asked(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=retry_after("3600")))
    line = one_line_error(run_cli(kubeconfig, "nodes"))
    assert "asked to retry after 3,600 s (429 Too Many Requests) to list nodes" in line, line
    assert "MIGNURSE_MAX_RETRY_AFTER=40 raises it); try again later" in line


def test_a_503_asking_for_an_absurd_wait_is_one_line(serve: Callable[[Hostile], Path]) -> None:
    kubeconfig = serve(Hostile(nodes=retry_after("9" * 400, status=503)))
    line = one_line_error(run_cli(kubeconfig, "diagnose"))
    assert "an absurd time (503 Service Unavailable)" in line, line


def test_a_short_retry_after_is_waited_out_and_said_on_stderr(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=busy_then_fine(2)))
    result = run_cli(kubeconfig, "nodes")
    assert result.returncode == 0, result.stderr
    busy = "mignurse: API server busy (429 Too Many Requests): retrying in 1 s\n"
    assert result.stderr.startswith(busy * 2), result.stderr
    assert "ip-10-0-7-21" in result.stdout


def test_retry_after_that_never_ends_stops_after_ten_retries_as_client_go() -> None:
    """kubernetes/client-go v0.33.9 rest/request.go: maxRetries 10."""
    hostile = Hostile(nodes=retry_after("0"))
    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = hostile
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        with pytest.raises(TooManyRequests, match="answered 429 to list nodes"):
            client.list(NODES, Node.from_api)
    finally:
        server.shutdown()
        server.server_close()
    assert len(hostile.requests) == 11


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (cut_short, "broke off after"),
        (cut_short_without_length, "the answer was cut short"),
        (body(b'{"kind":"NodeList","metadata":{},"items":[null]}'), "item 1 is a JSON null"),
        (body(b'{"kind":"NodeList","metadata":{},"items":[1, "x"]}'), "item 1 is a JSON number"),
        (body(b'{"kind":"NodeList","metadata":{},"items":{"a":1}}'), "not an array"),
        (body(b'{"metadata":{},"items":[{"metadata":{"name":"\xff\xfe"}}]}'), "not UTF-8 text"),
        (body(b"[" * 100_000 + b"]" * 100_000), "nested deeper than"),
        (body(b'{"items":[' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}"), "nested deeper"),
        (body(b'{"items":[{"metadata":"a string"}]}'), "an object mignurse cannot read"),
        (body(b"<html><title>Login</title></html>"), "it is HTML or XML, not JSON"),
        (body(b"", **{"Content-Encoding": "br"}), "encoded as 'br'"),
        (body(b"not gzip at all", **{"Content-Encoding": "gzip"}), "is not valid gzip"),
    ],
    ids=[
        "cut-short",
        "cut-short-no-length",
        "null-item",
        "number-item",
        "items-not-array",
        "not-utf8",
        "deep-arrays",
        "deep-objects-in-an-item",
        "metadata-a-string",
        "html-200",
        "unknown-encoding",
        "bad-gzip",
    ],
)
def test_a_malformed_node_list_is_one_line_with_exit_2(
    serve: Callable[[Hostile], Path], answer: Answer, said: str
) -> None:
    kubeconfig = serve(Hostile(nodes=answer))
    line = one_line_error(run_cli(kubeconfig, "nodes"))
    assert said in line, line
    assert "list nodes" in line


def test_a_large_malformed_page_is_walked_to_the_same_answer(
    serve: Callable[[Hostile], Path],
) -> None:
    """A page over the size parsed whole (8 MiB) is read item by item: its second half
    cut off still ends in one line."""
    items = b",".join(json.dumps(small_node(i)).encode() for i in range(120_000))
    page = b'{"kind":"NodeList","metadata":{"resourceVersion":"1"},"items":[' + items
    kubeconfig = serve(Hostile(nodes=body(page)))
    line = one_line_error(run_cli(kubeconfig, "nodes", MIGNURSE_MAX_PAGE_ITEMS="200000"))
    assert "the answer was cut short" in line, line


def test_a_proxys_html_502_page_is_named_by_its_title_never_printed(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(Hostile(nodes=html_error_page))
    result = run_cli(kubeconfig, "nodes")
    line = one_line_error(result)
    assert "answered 502 to list nodes: an HTML page titled '502 Bad Gateway'" in line, line
    assert ESC not in result.stderr and "upstream unavailable" not in result.stderr
    assert len(line) < 300


def test_a_status_message_with_escapes_is_shown_inert(serve: Callable[[Hostile], Path]) -> None:
    status = {"kind": "Status", "code": 500, "message": f"boom {ESC}]0;pwned{ESC}\\ \u202egnp"}
    kubeconfig = serve(Hostile(nodes=body(json.dumps(status).encode(), status=500)))
    result = run_cli(kubeconfig, "nodes")
    line = one_line_error(result)
    assert ESC not in result.stderr and "\u202e" not in result.stderr
    assert "boom \\x1b]0;pwned\\x1b\\ <U+202E>gnp" in line, line


def test_a_date_in_year_9999_is_not_believed(serve: Callable[[Hostile], Path]) -> None:
    hostile = Hostile(nodes=body(kube_list([node_object()])), date="Fri, 31 Dec 9999 23:59:59 GMT")
    kubeconfig = serve(hostile)
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    client.list(NODES, Node.from_api)
    assert abs(client.server_now().year - time.gmtime().tm_year) <= 1
    result = run_cli(kubeconfig, "nodes")
    assert result.returncode == 0, result.stderr
    assert "ip-10-0-7-21" in result.stdout


@pytest.mark.parametrize(
    "date", ["yesterday", "Mon, 99 Foo 2026 99:99:99 GMT", "Fri, 31 Dec 2026 23:59:59 -0000"]
)
def test_an_unreadable_date_header_changes_nothing(
    serve: Callable[[Hostile], Path], date: str
) -> None:
    kubeconfig = serve(Hostile(nodes=body(kube_list([node_object()])), date=date))
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    client.list(NODES, Node.from_api)
    assert abs(client.server_now().year - time.gmtime().tm_year) <= 1


def test_a_watch_event_that_is_not_an_object_is_a_cluster_error() -> None:
    def events(handler: Handler) -> None:
        send(handler, 200, b'{"type":"ADDED","object":{"metadata":{}}}\n[1,2]\n')

    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=body(kube_list([])), watch=events)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        seen = []
        with pytest.raises(BadAnswer, match="an event that is not an object"):
            for event in client.watch(NODES, "1"):
                seen.append(event.type)
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["ADDED"]


def test_closing_the_client_ends_a_request_in_flight_at_once() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        failures: list[BaseException] = []

        def listing() -> None:
            try:
                client.list(NODES, Node.from_api)
            except Exception as exc:  # noqa: BLE001 - what ended it is the test's question
                failures.append(exc)

        reader = threading.Thread(target=listing)
        reader.start()
        time.sleep(1.5)
        client.close()
        reader.join(timeout=20)
        assert not reader.is_alive(), "the request outlived the client"
    finally:
        server.shutdown()
        server.server_close()
    assert failures and not isinstance(failures[0], TooSlow), failures


def _client_of(server: Server) -> ClusterClient:
    from kubernetes import client as k8s_client

    from mignurse.cluster.client import ContextInfo

    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_port}"
    info = ContextInfo("hostile", "c", configuration.host, "u")
    return ClusterClient(k8s_client.ApiClient(configuration), info)


def test_gzip_as_a_real_server_sends_it_is_read(serve: Callable[[Hostile], Path]) -> None:
    """The API server gzips lists over 128 KiB when asked (APIResponseCompression): an
    ordinary compressed list is read as it was before."""
    data = gzip.compress(kube_list([node_object()] + [small_node(i) for i in range(3000)]))
    kubeconfig = serve(Hostile(nodes=body(data, **{"Content-Encoding": "gzip"})))
    client = ClusterClient.connect(kubeconfig=str(kubeconfig))
    assert len(client.list(NODES, Node.from_api).items) == 3001


def test_a_watched_object_the_model_cannot_read_marks_the_view_stale() -> None:
    """The watch thread reports it and goes on (backing off), as for any failed watch."""
    from mignurse.cluster.snapshot import ClusterState
    from mignurse.cluster.watcher import ClusterWatcher

    def unreadable(handler: Handler) -> None:
        send(handler, 200, b'{"type":"ADDED","object":{"metadata":"a string"}}\n')

    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=body(kube_list([node_object()])), watch=unreadable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    watcher = ClusterWatcher(_client_of(server), ClusterState(), karpenter=False).start()
    try:
        deadline = time.monotonic() + 60
        while not watcher.status["nodes"].error and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "watch of nodes sent an object mignurse cannot read" in (
            watcher.status["nodes"].error
        )
        assert watcher.status["nodes"].stale_since is not None
        assert all(thread.is_alive() for thread in watcher._threads)
    finally:
        watcher.stop()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (gzip_bomb, "MIGNURSE_MAX_RESPONSE_RATIO="),
        (retry_after("3600"), "asked to retry after 3,600 s"),
        (body(b'{"kind":"NodeList","metadata":{},"items":[null]}'), "item 1 is a JSON null"),
        (body(b"[" * 100_000 + b"]" * 100_000), "nested deeper than"),
        (html_error_page, "an HTML page titled '502 Bad Gateway'"),
        (cut_short, "broke off after"),
    ],
    ids=["gzip-bomb", "retry-after-an-hour", "null-item", "deep", "html-502", "cut-short"],
)
def test_diagnose_on_a_bad_answer_is_one_line_with_exit_2(
    serve: Callable[[Hostile], Path], answer: Answer, said: str
) -> None:
    kubeconfig = serve(Hostile(nodes=answer))
    result = run_cli(kubeconfig, "diagnose")
    line = one_line_error(result)
    assert said in line, line
    assert ESC not in result.stderr


def test_a_gzip_bomb_on_a_watch_stops_at_the_ratio_cap() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=body(kube_list([])), watch=gzip_bomb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        with pytest.raises(BadAnswer, match="MIGNURSE_MAX_RESPONSE_RATIO=800 raises it"):
            list(client.watch(NODES, "1"))
    finally:
        server.shutdown()
        server.server_close()


def test_an_object_nested_300_deep_never_reaches_what_writes_raw_objects() -> None:
    """orjson reads 1,024 levels; a bundle's json.dumps or orjson.dumps would fail on it
    later (an internal error in `collect`): list_pages refuses it in one line."""
    deep = b'{"metadata":{"name":"n"},"spec":' + b'{"a":' * 300 + b"1" + b"}" * 301
    server = Server(("127.0.0.1", 0), Handler)
    server.hostile = Hostile(nodes=body(b'{"metadata":{},"items":[' + deep + b"]}"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        with pytest.raises(BadAnswer, match="nested deeper than 254 levels"):
            next(client.list_pages(NODES))
        assert [n.name for n in client.list(NODES, Node.from_api).items] == ["n"]
    finally:
        server.shutdown()
        server.server_close()


class _DroppingHandler(Handler):
    """Answers the first request on a connection as HTTP/1.1 keep-alive, and hangs up on the
    next one without a word: what an idle timeout on a load balancer in front of the API
    server does when it closes a connection just as the client sends on it again."""

    def do_GET(self) -> None:
        if getattr(self, "answered", False):
            self.close_connection = True
            return
        self.answered = True
        node = {"kind": "Node", "apiVersion": "v1", **small_node(1)}
        body = json.dumps(node).encode()
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.wfile.write(head.encode() + body)
        self.wfile.flush()

    def do_PATCH(self) -> None:
        self.server.hostile.requests.append("PATCH " + self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.close_connection = True


def test_a_write_on_a_dropped_connection_is_never_sent_twice() -> None:
    from mignurse.cluster.client import Unreachable

    server = Server(("127.0.0.1", 0), _DroppingHandler)
    server.hostile = Hostile(nodes=silent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        client.get(NODES, "ip-10-0-0-1")
        with pytest.raises(Unreachable):
            client.patch(NODES, "ip-10-0-0-1", {"spec": {"unschedulable": True}})
    finally:
        server.shutdown()
        server.server_close()
    assert server.hostile.requests == ["PATCH /api/v1/nodes/ip-10-0-0-1"]


def test_a_kept_alive_connection_the_server_dropped_is_read_again_for_a_get() -> None:
    server = Server(("127.0.0.1", 0), _DroppingHandler)
    server.hostile = Hostile(nodes=silent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client_of(server)
        first = client.get(NODES, "ip-10-0-0-1")
        second = client.get(NODES, "ip-10-0-0-1")
    finally:
        server.shutdown()
        server.server_close()
    assert first["metadata"]["name"] == second["metadata"]["name"] == "ip-10-0-0-1"
