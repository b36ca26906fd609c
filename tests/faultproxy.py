"""A fault-injecting HTTP front for the real API server: the only stand-in the tests keep.

Everything a real kube-apiserver does on demand (conflicts, RBAC, patch types, Leases, Events)
is tested against the real one (tests/upstream). This front exists only for the faults a real
server cannot be made to produce on demand: 429 Too Many Requests with Retry-After, 500, a
request that is never answered (the client's timeout), and answers a correct server never gives:
what a proxy or a hostile server in its place answers (a login page, JSON cut short or nested too
deep, a watch answered 410 every time or with garbage, a Node of the wrong shape: `body`), the
real server's answer edited (a `continue` token that never ends: `edit`), an answer that comes
late (`delay`) or trickled a byte at a time (`trickle`), the real one or a fault's. A request that
matches no fault is forwarded unchanged to the real server, bearer token included, so
authentication and RBAC stay real; the client speaks plain HTTP to the front on loopback, the front
speaks TLS upstream. Where every request a test makes meets a fault with its own answer, the front
is the whole (misbehaving) API server and no real one is needed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
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
    """Answer `status` with this body (of `content_type`) instead of a Status object."""
    content_type: str = "application/json"
    trickle: float = 0.0
    """Seconds between the bytes of the answer (status line and headers too); with `status` 0, the
    real server's answer, trickled."""
    edit: Callable[[bytes], bytes] | None = None
    """Forward the request (its `continue` parameter kept) and answer the real server's body edited."""
    delay: float = 0.0
    """Seconds to wait before answering."""

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
    _scheme: str = "http"

    def serve(self, tls: tuple[Path, Path] | None = None) -> str:
        """Start on a free loopback port, speaking TLS with `tls` (certificate and key files) if
        given; the URL to give the client as --server."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                try:
                    proxy._handle(self)
                except ConnectionError:  # the client gave up on a trickled answer
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815 - http.server's names

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None, "serve() first"
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    def shutdown(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def add(self, method: str, path: str, status: int, times: int = -1, **answer: Any) -> None:
        """Fault matching requests (`answer`: Fault's body, content_type, trickle, edit, delay)."""
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
        status = None if fault is None or (fault.trickle and fault.status == HANG) else fault.status
        trickle = fault.trickle if fault is not None else 0.0
        if fault is not None and fault.delay:
            self._closing.wait(fault.delay)
        if fault is not None and fault.edit is not None:
            code, headers, payload = self._forward(method, path, request.headers, body)
            self._answer(request, code, headers, fault.edit(payload), trickle)
            return
        if fault is not None and fault.body is not None:
            self._answer(request, fault.status, [("Content-Type", fault.content_type)], fault.body, trickle)
            return
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
            self._answer(request, status, headers, payload, trickle)
            return
        status, headers, payload = self._forward(method, path, request.headers, body)
        self._answer(request, status, headers, payload, trickle)

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
                payload: bytes, trickle: float = 0.0) -> None:
        self.seen.append((request.command, request.path, status))
        if trickle:
            request.wfile = _Trickled(request.wfile, trickle, self._closing)  # type: ignore[assignment]
        request.send_response(status)
        for key, value in headers:
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)


class _Trickled:
    """A writer that sends one byte every `interval` seconds, until the front shuts down."""

    def __init__(self, wfile: Any, interval: float, closing: threading.Event) -> None:
        self.wfile, self.interval, self.closing = wfile, interval, closing

    def write(self, data: bytes) -> int:
        for i in range(len(data)):
            if self.closing.wait(self.interval):
                raise ConnectionAbortedError("the front is shutting down")
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
        return len(data)

    def __getattr__(self, name: str) -> Any:  # closed, close, ...: the socket writer's own
        return getattr(self.wfile, name)


def serve_each(handle: Callable[[socket.socket], None]) -> socket.socket:
    """A loopback listener that runs `handle` on every connection, each in a thread of its own, until
    the listener is closed (its address: `getsockname()`)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener


class TrickleFront:
    """A TCP front for a server at `upstream` (host, port): what the client sends passes at once,
    what the server sends comes a byte every `interval` seconds, from its first byte on. In front of
    a TLS server that is a handshake trickled (each byte far within any read timeout, the whole
    handshake minutes long), which no option of ssl or http.server can make a server do."""

    def __init__(self, upstream: tuple[str, int], interval: float) -> None:
        self.upstream, self.interval = upstream, interval
        self._closing = threading.Event()
        self._open: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._open += [client, server]
            threading.Thread(target=self._pass, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(target=self._pass, args=(server, client, self.interval), daemon=True).start()

    def _pass(self, source: Any, sink: Any, interval: float) -> None:
        try:
            while data := source.recv(65536):
                for i in range(0, len(data), 1 if interval else len(data)):
                    if interval and self._closing.wait(interval):
                        return
                    sink.sendall(data[i:i + 1] if interval else data)
        except OSError:  # the client gave up: what the tests want
            pass
        finally:
            _end(source)
            _end(sink)

    def shutdown(self) -> None:
        self._closing.set()
        self._listener.close()
        for sock in self._open:
            _end(sock)


def _end(sock: Any) -> None:
    """Close `sock` so that its peer sees the end (shutdown first: a close alone sends nothing while
    another thread is still blocked reading it, and the server behind would wait in its handshake)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
