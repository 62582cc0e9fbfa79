"""The differential harness: one request sequence sent to the simulator and to the real API
server with a plain HTTP client, and the answers reduced to what both must agree on.

What is removed before comparing is only what differs between any two API servers by design:
identities and clocks (uid, resourceVersion, creationTimestamp, managedFields, selfLink; the
value, not the presence, of
deletionTimestamp, a condition's lastTransitionTime, a taint's timeAdded and a deleted object's
uid in a Status; a Table's Age cells), and the list metadata's continue token and
remainingItemCount (opaque; the pages are compared). Everything else stays.
"""

from __future__ import annotations

import copy
import http.client
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

VOLATILE_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink")
STAMPS = ("lastTransitionTime", "timeAdded")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class Client:
    """Plain HTTP/1.1 to one server: the admin certificate (real) or a bearer token (sim)."""

    def __init__(self, url: str, context: ssl.SSLContext, token: str | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 443
        self.context = context
        self.token = token

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=timeout
        )

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        sent = self._headers(headers)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = content_type
        connection = self._connection(30)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read()
            return Answer(
                response.status, _decode(raw), {k.lower(): v for k, v in response.getheaders()}
            )
        finally:
            connection.close()

    def watch(self, path: str, events: int, seconds: float = 15) -> tuple[int, list[Any]]:
        """The first `events` events of a watch (or all it sends before `seconds`)."""
        connection = self._connection(seconds)
        got: list[Any] = []
        try:
            connection.request("GET", path, headers=self._headers(None))
            response = connection.getresponse()
            if response.status != 200:
                return response.status, [_decode(response.read())]
            while len(got) < events:
                try:
                    line = response.readline()
                except TimeoutError:
                    break
                if not line:
                    break
                if line.strip():
                    got.append(json.loads(line))
            return response.status, got
        finally:
            connection.close()


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def clean(obj: Any) -> Any:
    """An object, list, Table, Status or watch event without what differs by design."""
    obj = copy.deepcopy(obj)
    _clean(obj)
    return obj


def _clean(obj: Any) -> None:
    if isinstance(obj, dict) and obj.get("kind") == "Table":
        # the Age column is creationTimestamp, printed relative to the server's clock
        ages = [
            i for i, c in enumerate(obj.get("columnDefinitions") or []) if c.get("name") == "Age"
        ]
        for row in obj.get("rows") or []:
            for i in ages:
                row["cells"][i] = "<age>"
    if isinstance(obj, list):
        for item in obj:
            _clean(item)
        return
    if not isinstance(obj, dict):
        return
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in VOLATILE_METADATA:
            meta.pop(key, None)
        if "deletionTimestamp" in meta:
            meta["deletionTimestamp"] = "<set>"
        if obj.get("kind", "").endswith("List") or obj.get("kind") in ("Table", "Status"):
            meta.pop("continue", None)
            meta.pop("remainingItemCount", None)
    if (
        obj.get("kind") == "Status"
        and isinstance(obj.get("details"), dict)
        and obj["details"].get("uid")
    ):
        obj["details"]["uid"] = "<set>"  # the deleted object's uid
    for key in STAMPS:
        # when a controller set a condition or a taint: each server's own clock
        if obj.get(key):
            obj[key] = "<set>"
    for key, value in obj.items():
        if key != "metadata":
            _clean(value)


def status_of(answer: Answer) -> tuple[int, Any, Any]:
    """An error's code and the Status's reason and code (or the code and the cleaned body)."""
    body = answer.body
    if isinstance(body, dict) and body.get("kind") == "Status":
        return answer.status, body.get("reason"), body.get("code")
    return answer.status, None, None


def names(answer: Answer) -> list[str]:
    return [item["metadata"]["name"] for item in answer.body.get("items", [])]


def differences(sim: Any, real: Any, path: str = "", limit: int = 25) -> list[str]:
    """Where two decoded bodies differ, as `path: simulator != real` lines (at most `limit`)."""
    out: list[str] = []
    _differences(sim, real, path, out, limit)
    return out


def _differences(sim: Any, real: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(sim, dict) and isinstance(real, dict):
        for key in sorted(set(sim) | set(real), key=str):
            where = f"{path}.{key}"
            if key not in sim:
                out.append(f"{where}: missing in the simulator, real {_short(real[key])}")
            elif key not in real:
                out.append(f"{where}: only in the simulator: {_short(sim[key])}")
            else:
                _differences(sim[key], real[key], where, out, limit)
    elif isinstance(sim, list) and isinstance(real, list) and len(sim) == len(real):
        for i, (a, b) in enumerate(zip(sim, real, strict=True)):
            _differences(a, b, f"{path}[{i}]", out, limit)
    elif sim != real:
        out.append(f"{path or '.'}: simulator {_short(sim)} != real {_short(real)}")


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
