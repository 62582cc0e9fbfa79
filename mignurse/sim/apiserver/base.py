"""What every request handler shares: the request as routing parsed it (path, query, the
Accept header's Table and discovery versions, the served version's converter) and how an
answer, an error or a request body goes over the connection.
"""

from __future__ import annotations

import gzip
import json
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from mignurse.sim.apiserver.errors import ApiError, status_body

if TYPE_CHECKING:
    from mignurse.sim.apiserver.server import SimServer
    from mignurse.sim.simcluster import SimCluster

MAX_BODY = 8 * 1024 * 1024

# kube-apiserver compresses an answer over 128 KiB with gzip at level 1 when the client
# accepts gzip (k8s.io/apiserver pkg/endpoints/handlers/responsewriters/writers.go
# `deferredResponseWriter`, `defaultGzipThresholdBytes`; the level, lowered from 4 to 1 in
# kubernetes/kubernetes#112296 for the CPU it saves, in `gzipPool`); watches stream uncompressed.
GZIP_THRESHOLD_BYTES = 128 * 1024
GZIP_LEVEL = 1


class HandlerBase(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer goes out as two writes (the headers, then the body). With Nagle's algorithm
    # the second waits for the client's delayed ACK of the first: about 40 ms a request on
    # Linux. kube-apiserver, like every Go TCP connection, runs with TCP_NODELAY (Go's net
    # package sets it on each new TCPConn: src/net/tcpsock.go, SetNoDelay "The default is
    # true"), so the stand-in answers as fast as the structure allows.
    disable_nagle_algorithm = True
    server: SimServer
    # Set by the dispatcher before routing.
    _path: str
    _query: dict[str, str]
    _table_version: str | None  # the Table version the Accept header asks for
    _aggregated: str | None  # the aggregated discovery version it asks for
    _convert: Any  # the served version's converter; None when it is the stored one

    def log_message(self, format: str, *args: Any) -> None:
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        return formatdate(self.server.sim.now().timestamp(), usegmt=True)

    @property
    def sim(self) -> SimCluster:
        return self.server.sim

    def _log(self, status: int) -> None:
        self.sim._log_request(self.command, self._path, self._query, status)

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "application/json",
        warnings: list[str] | None = None,
        retry_after: int | None = None,
    ) -> None:
        self._log(code)  # before answering: a client holding its answer finds it in the log
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if len(body) > GZIP_THRESHOLD_BYTES and self._accepts_gzip():
            body = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.sim._audit_id())
        for warning in warnings or ():
            self.send_header("Warning", f"299 - {json.dumps(warning)}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _accepts_gzip(self) -> bool:
        """apiserver's `responseContentEncodingSupported`: gzip when one of the
        Accept-Encoding values is `gzip`."""
        said = ",".join(self.headers.get_all("Accept-Encoding") or ())
        return any(value.strip() == "gzip" for value in said.split(","))

    def _send_json(self, code: int, obj: Any, content_type: str = "application/json") -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode(), content_type)

    def _send_error(self, err: ApiError) -> None:
        body = status_body(err.code, err.reason, err.message, err.details, err.list_meta)
        self._send(
            err.code, json.dumps(body, separators=(",", ":")).encode(), retry_after=err.retry_after
        )

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "request entity too large")
        return self.rfile.read(length) if length else b""
