"""A long list's memory follows the page: the list cap is judged before a page's objects are
built, and each page is let go once its objects are. A local API server on 127.0.0.1 hands
out numbered pages; the real ClusterClient lists them and counts what it built."""

from __future__ import annotations

import gc
import http.server
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from mignurse.cluster import pages as pages_module
from mignurse.cluster import transport
from mignurse.cluster.client import EVENTS, BadAnswer, ClusterClient, ContextInfo
from mignurse.model import Event

PAGE = 500


@dataclass
class Pages:
    """`total` events served `PAGE` at a time; `remaining` adds remainingItemCount as the
    API server does when no selector filters the list."""

    total: int
    remaining: bool = False
    requests: list[int] = field(default_factory=list)
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)  # this list's items alone

    def body(self, start: int) -> bytes:
        count = min(PAGE, self.total - start)
        meta: dict[str, Any] = {"resourceVersion": "9"}
        if start + count < self.total:
            meta["continue"] = str(start + count)
            if self.remaining:
                meta["remainingItemCount"] = self.total - start - count
        items = [event(start + i, self.mark) for i in range(count)]
        return json.dumps({"kind": "EventList", "metadata": meta, "items": items}).encode()


def event(index: int, mark: str) -> dict[str, Any]:
    return {
        "mark": mark,
        "metadata": {"name": f"gpu-job-{index}.18a2", "namespace": "team-llm", "uid": str(index)},
        "involvedObject": {"kind": "Pod", "name": f"gpu-job-{index}", "namespace": "team-llm"},
        "reason": "BackOff",
        "message": f"Back-off restarting failed container server in pod gpu-job-{index}",
        "type": "Warning",
        "source": {"component": "kubelet"},
        "count": 1,
        "page": index // PAGE,
    }


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def do_GET(self) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        start = int(query.get("continue") or 0)
        self.server.pages.requests.append(start)
        data = self.server.pages.body(start)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    pages: Pages


@pytest.fixture
def serve() -> Iterator[Callable[[Pages], ClusterClient]]:
    servers: list[Server] = []

    def start(pages: Pages) -> ClusterClient:
        server = Server(("127.0.0.1", 0), Handler)
        server.pages = pages
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        configuration = transport.Configuration()
        configuration.host = f"http://127.0.0.1:{server.server_port}"
        info = ContextInfo("paging", "c", configuration.host, "u")
        return ClusterClient(transport.ApiClient(configuration), info)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class Counted:
    """Event.from_api, counting the objects built."""

    def __init__(self) -> None:
        self.built = 0

    def __call__(self, raw: dict[str, Any]) -> Event:
        self.built += 1
        return Event.from_api(raw)


def test_a_list_the_server_says_is_past_the_cap_is_refused_before_one_object_is_built(
    serve: Callable[[Pages], ClusterClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "1200")
    client = serve(Pages(1_000_000, remaining=True))
    parse = Counted()
    with pytest.raises(BadAnswer) as refused:
        client.list(EVENTS, parse)
    assert "the API server lists more events than that" in str(refused.value)
    assert "over the limit of 1,200 objects" in str(refused.value)
    assert "MIGNURSE_MAX_LIST_ITEMS=" in str(refused.value)
    assert parse.built == 0


@pytest.mark.parametrize("page_bytes", [8 * 2**20, 1024])  # pages parsed whole, and walked
def test_without_a_remaining_count_the_page_that_crosses_the_cap_is_refused_unbuilt(
    serve: Callable[[Pages], ClusterClient], monkeypatch: pytest.MonkeyPatch, page_bytes: int
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "1200")
    monkeypatch.setattr(pages_module, "WHOLE_PAGE_BYTES", page_bytes)
    client = serve(Pages(1_000_000))
    parse = Counted()
    with pytest.raises(BadAnswer, match="over the limit of 1,200 objects"):
        client.list(EVENTS, parse)
    # Two whole pages fit; the third would cross the cap. Parsed whole, none of it is built;
    # walked item by item, it is built up to the cap and no further.
    assert parse.built == (1000 if page_bytes > 2**20 else 1200)


def test_a_cut_list_keeps_the_first_objects_up_to_the_cap_and_builds_no_more(
    serve: Callable[[Pages], ClusterClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "1000")
    pages = Pages(1_000_000, remaining=True)
    client = serve(pages)
    parse = Counted()
    listing = client.list(EVENTS, parse, cut=True)
    assert listing.cut
    assert [e.name for e in listing.items[-1:]] == ["gpu-job-999.18a2"]
    assert parse.built == 1000


def test_list_pages_refuses_a_list_said_to_be_past_the_cap_at_its_first_page(
    serve: Callable[[Pages], ClusterClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_LIST_ITEMS", "1200")
    pages = Pages(1_000_000, remaining=True)
    client = serve(pages)
    with pytest.raises(BadAnswer, match="lists more events than that"):
        next(client.list_pages(EVENTS))
    assert pages.requests == [0]


def _live_items_of_pages_before(mark: str, page: int) -> int:
    """Decoded items of this list still alive from pages before `page` (each holds a dict,
    so the collector tracks it)."""
    return sum(
        1
        for obj in gc.get_objects()
        if type(obj) is dict and obj.get("mark") == mark and obj["page"] < page
    )


@pytest.mark.parametrize("page_bytes", [8 * 2**20, 1024])  # pages parsed whole, and walked
def test_each_page_is_let_go_once_its_events_are_built(
    serve: Callable[[Pages], ClusterClient], monkeypatch: pytest.MonkeyPatch, page_bytes: int
) -> None:
    monkeypatch.setattr(pages_module, "WHOLE_PAGE_BYTES", page_bytes)
    pages = Pages(6 * PAGE)
    client = serve(pages)
    alive: dict[int, int] = {}

    def parse(raw: dict[str, Any]) -> Event:
        page = raw["page"]
        if page not in alive:  # the first object of each page: what of earlier pages lives
            alive[page] = _live_items_of_pages_before(pages.mark, page)
        return Event.from_api(raw)

    listing = client.list(EVENTS, parse)
    assert len(listing.items) == 6 * PAGE
    assert alive == dict.fromkeys(range(6), 0)
