"""Reads from servers fleetgen does not trust: one deadline for the whole read, and a size cap.

A socket timeout bounds each read, not the answer: http.client sets it once on the socket
(CPython 3.11 http/client.py:952), as urllib3 does per request (urllib3 2.8.0 util/timeout.py:96-103:
"if a server streams one byte every fifteen seconds, a timeout of 20 seconds will not trigger").
A server, a proxy, or anything between that sends a byte at a time holds a read as long as it likes,
in the TLS handshake and a proxy's CONNECT answer as much as in the headers and body.

Here a read runs under a `deadline`: every socket it opens joins the deadline's watch as soon as it
exists, before the proxy tunnel and the TLS handshake, and a timer shuts them down when the
deadline passes. shutdown(2) wakes a read blocked in the kernel at once, under any TLS layer, and
the read raises. The watch keeps its own duplicate of each socket's descriptor: while a handshake
runs, neither client names the socket being read. Both set `self.sock` to the plain socket
(http/client.py:952, urllib3 connection.py:827) and then wrap it; ssl's wrap takes the descriptor
and detaches that plain socket before the handshake (CPython 3.11 ssl.py:1036-1041, handshake at
ssl.py:1108), so `self.sock` is then a socket with no descriptor, and shutting it down does nothing.

The Kubernetes API client's urllib3 connections join through generator/kubetransport.py;
urllib.request's through the handler classes here (`read_within`, `read_url`).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

_current = threading.local()


class _HasSock(Protocol):
    sock: socket.socket | None


class Watch:
    """The sockets of one read, shut down together when its deadline passes."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def left(self) -> float:
        """Seconds until the deadline (a little above 0 once it has passed, for a timeout)."""
        return max(self.ends - time.monotonic(), 0.001)

    def join(self, sock: socket.socket) -> None:
        """Shut `sock` down when the deadline passes, or now if it has (a socket connected after
        the deadline, or a retry): a duplicate of its descriptor is kept, which a TLS wrap leaves
        alone, so the shutdown reaches the socket whatever layer now reads it."""
        try:
            own = socket.fromfd(sock.fileno(), sock.family, sock.type)
        except OSError:  # closed already: nothing left to wake
            return
        with self._lock:
            if self._closed:
                own.close()
                return
            self._socks.append(own)
            if self.expired:
                _shut(own)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            if not self._closed:
                for sock in self._socks:
                    _shut(sock)

    def close(self) -> None:
        """Drop the duplicates (the sockets themselves stay their clients')."""
        with self._lock:
            self._closed = True
            for sock in self._socks:
                sock.close()
            self._socks.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # not connected yet, or closed by the other end
        sock.shutdown(socket.SHUT_RDWR)


def current() -> Watch | None:
    """The watch of the deadline this thread is running under, if any."""
    return getattr(_current, "watch", None)


def joined(sock: socket.socket) -> socket.socket:
    """`sock`, having joined the current deadline's watch (if any): what a connection calls on the
    socket it just opened, before it reads anything from it."""
    watch = current()
    if watch is not None:
        watch.join(sock)
    return sock


def join_connection(conn: _HasSock) -> None:
    """A connection about to send on a socket it opened earlier (a kept-alive one) joins the watch."""
    if conn.sock is not None:
        joined(conn.sock)


def connect_timeout(timeout: object) -> float | None:
    """`timeout` for a TCP connect (seconds; None or a client's "default" token: none of its own),
    no longer than what is left of the current deadline: a connect in progress is the one wait a
    shutdown does not end. Give the socket `timeout` back once connected (`opened`)."""
    watch = current()
    number = float(timeout) if isinstance(timeout, (int, float)) else None
    if watch is None:
        return number
    return watch.left() if number is None else min(number, watch.left())


def opened(sock: socket.socket, timeout: object) -> socket.socket:
    """A socket just connected with `connect_timeout`: its own `timeout` again (a handshake and
    reads are the deadline's to end, not a timeout that happens to end with it), and joined."""
    if current() is not None and (timeout is None or isinstance(timeout, (int, float))):
        sock.settimeout(timeout)
    return joined(sock)


@contextmanager
def deadline(seconds: float, timed_out: Callable[[], Exception]) -> Iterator[Watch]:
    """The sockets the block opens are shut down once `seconds` have passed; whatever a shut-down
    socket then raised (a reset, an incomplete read, an SSL error, ...) leaves the block as
    `timed_out()`."""
    watch = Watch(seconds)
    timer = threading.Timer(seconds, watch.expire)
    timer.daemon = True
    outer = current()
    _current.watch = watch
    timer.start()
    try:
        yield watch
    except Exception:
        if watch.expired or time.monotonic() >= watch.ends:  # the timer's doing, or a timeout at it
            raise timed_out() from None
        raise
    else:
        if watch.expired:  # a read the shutdown cut short may end as if the answer were whole
            raise timed_out()
    finally:
        timer.cancel()
        _current.watch = outer
        watch.close()


class _StdlibConnection(http.client.HTTPConnection):
    """urllib.request's plain connection: its socket joins the current deadline as it is opened,
    before a proxy's CONNECT answer (http/client.py:961) is read."""

    def connect(self) -> None:
        create: Callable[..., socket.socket] = self._create_connection  # type: ignore[has-type]

        def connected(address: tuple[str, int], timeout: float | None, source: object = None) -> socket.socket:
            return opened(create(address, connect_timeout(timeout), source), timeout)

        self._create_connection = connected
        try:
            super().connect()
        finally:
            self._create_connection = create


class _StdlibTLSConnection(_StdlibConnection, http.client.HTTPSConnection):
    """HTTPSConnection.connect calls the plain connect first (http/client.py:1460), then wraps and
    handshakes (http/client.py:1466): its socket has joined by then."""


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_StdlibConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_StdlibTLSConnection, req)


def read_within(seconds: float, request: urllib.request.Request, limit: int) -> bytes:
    """Up to `limit` bytes of the answer to `request` (urllib.request, proxies from the environment
    as usual), failing with TimeoutError once `seconds` have passed, however the server or a proxy
    trickles its handshake, headers or body; urllib's HTTPError and URLError pass as they come."""
    opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)
    with deadline(seconds, lambda: TimeoutError(f"no complete answer within {seconds:g} s")), \
            opener.open(request, timeout=seconds) as response:
        return bytes(response.read(limit))


class ReadFailed(Exception):
    """A URL that gave no usable answer, and why, in words (`status`: the HTTP status, if one came)."""

    def __init__(self, url: str, why: str, status: int | None = None) -> None:
        super().__init__(f"{url}: {why}")
        self.url, self.why, self.status = url, why, status


def read_url(url: str, seconds: float, limit: int) -> bytes:
    """The body of a GET of `url`, whole within `seconds` and at most `limit` bytes, or ReadFailed
    saying what went wrong: no answer in time, too large, an HTTP error status, an HTML page (no
    file fleetgen reads by URL is one: it is a proxy's or a sign-in page), not reachable, not HTTP."""
    try:
        with deadline(seconds, lambda: TimeoutError()):
            opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)
            with opener.open(urllib.request.Request(url), timeout=seconds) as response:
                kind = response.headers.get_content_type()
                body = bytes(response.read(limit + 1))
    except urllib.error.HTTPError as exc:
        raise ReadFailed(url, f"answered HTTP {exc.code} {exc.reason}", exc.code) from None
    except TimeoutError:  # the deadline's, or a connect or single read that timed out
        raise ReadFailed(url, f"no complete answer within {seconds:g} s") from None
    except urllib.error.URLError as exc:
        raise ReadFailed(url, f"not reachable ({exc.reason})") from None
    except (http.client.HTTPException, OSError, ValueError) as exc:
        said = str(exc).strip()[:200]
        raise ReadFailed(url, f"not a usable HTTP answer ({type(exc).__name__}{': ' if said else ''}{said})") \
            from None
    if len(body) > limit:
        raise ReadFailed(url, f"answered more than {limit} bytes, more than any such file")
    if kind == "text/html":
        raise ReadFailed(url, "answered with an HTML page (a proxy's or a sign-in page?), not the file")
    return body
