"""A list page of nodes is parsed without the nodes' status.images (half their bytes, read by
no model): the nodes the models build are the same as from the page as it came, whatever
the strings in it, and a page not in the API server's compact shape is parsed as it came."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from mignurse.cluster.client import NODES, _lean_json, _page_list
from mignurse.cluster.pages import without_images
from mignurse.model import Node
from mignurse.sim import SimCluster, load_scenario


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[dict[str, Any]]]:
    """The simulator's nodes: the API server's shape, status.images as kubelet reports it."""
    sim = SimCluster(
        load_scenario("dcgm-repair-loop"), speed=0, start=datetime(2026, 11, 20, tzinfo=UTC)
    ).start()
    try:
        yield sim.objects("nodes")
    finally:
        sim.stop()


def page(items: list[dict[str, Any]], **dumps: Any) -> bytes:
    """A NodeList as the API server writes it (Go's encoding/json: compact, in field order)."""
    document = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                "items": items}  # fmt: skip
    return json.dumps(document, separators=(",", ":"), **dumps).encode()


def models(items: list[dict[str, Any]]) -> list[Node]:
    return [Node.from_api(item) for item in items]


def test_a_page_of_nodes_is_parsed_without_images(nodes: list[dict[str, Any]]) -> None:
    assert all(n["status"].get("images") for n in nodes)
    body = page(nodes)
    lean = without_images(body)
    assert len(lean) < 0.8 * len(body)
    parsed = _page_list(body, NODES)
    assert parsed is not None
    assert all("images" not in n["status"] for n in parsed)
    stripped = json.loads(body)["items"]
    for node in stripped:
        del node["status"]["images"]
    assert parsed == stripped
    assert models(parsed) == models(nodes)


def test_a_page_in_another_shape_is_parsed_as_it_came(nodes: list[dict[str, Any]]) -> None:
    spaced = json.dumps({"kind": "NodeList", "items": nodes}, indent=1).encode()
    assert without_images(spaced) is spaced
    parsed = _page_list(spaced, NODES)
    assert parsed is not None
    assert parsed == nodes


# What a hostile cluster (or a careless one) puts in its strings: the member's own text,
# brackets, braces, quotes and escapes, control characters, bidi overrides.
_PIECES = ['"images":[{', ',"images":[{', "}]", "]}", "}", "]", "{", "[", '"', "\\", ",", ":",
           "\\u0022", "\u202e", "\x1b[31m", "sizeBytes", "names", " ", "é", "🙂"]  # fmt: skip


def _hostile(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 8)))


def test_the_models_are_the_same_whatever_the_strings(nodes: list[dict[str, Any]]) -> None:
    rng = random.Random(20261206)
    cut = 0
    for _ in range(300):
        items = json.loads(json.dumps(rng.sample(nodes, k=min(3, len(nodes)))))
        for node in items:
            meta, status = node["metadata"], node["status"]
            place = rng.randrange(5)
            if place == 0:
                status["images"][rng.randrange(len(status["images"]))]["names"].append(
                    _hostile(rng)
                )
            elif place == 1:
                meta.setdefault("annotations", {})[_hostile(rng) or "a"] = _hostile(rng)
            elif place == 2:
                meta["labels"]["team"] = _hostile(rng)
            elif place == 3:
                status["conditions"][0]["message"] = _hostile(rng)
            else:
                status["images"].insert(0, {"names": [_hostile(rng)], "sizeBytes": 1})
        body = page(items, ensure_ascii=rng.random() < 0.5)
        parsed = _page_list(body, NODES)
        assert parsed is not None
        assert models(parsed) == models(orjson.loads(body)["items"])
        cut += all("images" not in n["status"] for n in parsed)
    assert cut > 150  # most pages still take the fast way: the strings rarely break the shape


def test_a_watched_node_is_read_without_images_and_models_the_same(
    nodes: list[dict[str, Any]],
) -> None:
    """A node watch event (`{"type":…,"object":{node}}` per line) is read as list pages are."""
    rng = random.Random(7)
    cut = 0
    for index in range(200):
        node = json.loads(json.dumps(nodes[index % len(nodes)]))
        if index % 2:  # every other one carries hostile strings
            node["status"]["images"][0]["names"].append(_hostile(rng))
            node["metadata"]["labels"]["team"] = _hostile(rng)
        line = json.dumps({"type": "MODIFIED", "object": node}, separators=(",", ":")).encode()
        event = _lean_json(line, "watch of nodes")
        assert event["type"] == "MODIFIED"
        assert Node.from_api(event["object"]) == Node.from_api(node)
        cut += "images" not in event["object"]["status"]
    assert cut > 100
