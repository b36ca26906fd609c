"""A fault-injecting HTTP front for the real API server: the only stand-in the tests keep.

Everything a real kube-apiserver does on demand (conflicts, RBAC, patch types, Leases, Events)
is tested against the real one (tests/upstream). This front exists only for the faults a real
server cannot be made to produce on demand: 429 Too Many Requests with Retry-After, 500, a
request that is never answered (the client's timeout), and answers a correct server never gives
(a watch answered 410 every time or with garbage, a `continue` token that never ends, a Node of
the wrong shape, an answer dripped a few bytes at a time): a fault may carry its own answer
(`body`), edit the real server's (`edit`), wait before answering (`delay`) or send its answer in
pieces (`drip`). A request that matches no fault is forwarded unchanged to the real server,
bearer token included, so authentication and RBAC stay real; the client speaks plain HTTP to the
front on loopback, the front speaks TLS upstream. Where every request a test makes meets a fault
with its own answer, the front is the whole (misbehaving) API server and no real one is needed.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tests.conftest import SERVER_POLL

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host",
              "proxy-authorization", "proxy-authenticate", "content-length"}
HANG = 0
"""A fault status meaning: read the request, never answer it."""


@dataclass
class Fault:
    """Requests whose method matches and whose path contains a match of `path` get `status`."""

    method: str
    path: str
    status: int
    times: int = -1
    """How many matching requests to fault; -1 for all of them."""
    body: bytes | None = None
    """The answer's body (JSON), with `status`, instead of an error Status."""
    edit: Callable[[bytes], bytes] | None = None
    """Forward the request (its `continue` parameter kept) and answer the real server's body edited."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    drip: float = 0.0
    """Seconds between bytes of the answer's body (0: all at once)."""

    def matches(self, method: str, path: str) -> bool:
        return self.times != 0 and self.method in (method, "*") and re.search(self.path, path) is not None


@dataclass
class FaultProxy:
    """Forwards to `upstream` (https URL, server certificate signed by `ca`), except for `faults`."""

    upstream: str
    ca: Path
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str, int]] = field(default_factory=list)
    """(method, path, status answered) of every request, in order."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    def serve(self) -> str:
        """Start on a free loopback port; the URL to give the client as --server."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815 - http.server's names

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None, "serve() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def shutdown(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def add(self, method: str, path: str, status: int, times: int = -1, **answer: Any) -> None:
        """Fault matching requests (`answer`: Fault's body, edit, delay, drip)."""
        with self._lock:
            self.faults.append(Fault(method, path, status, times, **answer))

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= fault.times > 0
                    return fault
        return None

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        method, path = request.command, request.path
        fault = self._fault_for(method, path)
        if fault is not None and fault.delay:
            self._closing.wait(fault.delay)
        if fault is not None and fault.edit is not None:
            code, headers, payload = self._forward(method, path, request.headers, body)
            self._answer(request, code, headers, fault.edit(payload), fault.drip)
            return
        if fault is not None and fault.body is not None:
            self._answer(request, fault.status, [("Content-Type", "application/json")], fault.body, fault.drip)
            return
        status = fault.status if fault is not None else None
        if status == HANG:
            self.seen.append((method, path, HANG))
            self._closing.wait(120)  # the client gives up first
            request.close_connection = True
            return
        if status is not None:
            payload = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": {429: "the server has received too many requests and has asked us "
                                                   "to try again later",
                                              500: "an error on the server (\"injected\") has prevented the "
                                                   "request from succeeding"}.get(status, "injected fault"),
                                  "reason": {429: "TooManyRequests", 500: "InternalError"}.get(status, "Unknown"),
                                  "code": status}).encode()
            headers = [("Content-Type", "application/json")] + ([("Retry-After", "1")] if status == 429 else [])
            self._answer(request, status, headers, payload)
            return
        status, headers, payload = self._forward(method, path, request.headers, body)
        self._answer(request, status, headers, payload)

    def _forward(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        target = urlparse(self.upstream)
        context = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection(target.hostname or "127.0.0.1", target.port, context=context, timeout=60)
        try:
            conn.request(method, path, body=body or None,
                         headers={k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP})
            response = conn.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            return response.status, kept, payload
        finally:
            conn.close()

    def _answer(self, request: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]],
                payload: bytes, drip: float = 0.0) -> None:
        self.seen.append((request.command, request.path, status))
        request.send_response(status)
        for key, value in headers:
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        if not drip:
            request.wfile.write(payload)
            return
        try:
            for index in range(len(payload)):
                if self._closing.is_set():
                    break
                request.wfile.write(payload[index:index + 1])
                request.wfile.flush()
                time.sleep(drip)
        except OSError:  # the client gave up on the answer
            request.close_connection = True
