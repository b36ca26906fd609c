"""What requests to the Kubernetes API (the SDK's and the reconciler's, over generator.connection)
may take and what they take back: one deadline for a whole request, and an answer that is the API's
JSON.

A deadline covers connecting (a proxy's CONNECT answer and the TLS handshake too), sending, the
answer's headers and its body.

urllib3's read timeout bounds each read from the socket, not the answer (urllib3 2.8.0
util/timeout.py:96-103: "if a server streams one byte every fifteen seconds, a timeout of 20
seconds will not trigger"; connectionpool.py:524-536 and connection.py:627 set it once on the
socket, per request, and every later recv() gets it whole), and `total` only subtracts the connect
time from it (util/timeout.py:262-273). The kubernetes client passes `_request_timeout` on as
exactly those two (kubernetes 37.0.2 client/rest.py:235-246). So a server, or anything between,
that trickles its answer a byte at a time holds a call for as long as it likes.

Here each request runs under a generator.transport deadline, which the pool's connections join as
their sockets open (before tunnel and handshake) and again whenever they send on a kept-alive one;
when it passes, a read blocked in the kernel returns at once, the client raises, and the caller gets
urllib3's ReadTimeoutError, as for a server that says nothing.

An answer that is not JSON (a proxy's login page, a body cut short, JSON nested deeper than Python's
reader recurses) would be a traceback from inside the client: it is a NotTheApi instead.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, ReadTimeoutError

from generator.transport import connect_timeout, current, deadline, join_connection, opened

T = TypeVar("T")
RAW_TYPES = frozenset({"str", "bytes", "bytearray", "file"})
"""Answers the client passes on as they come (a log); every other answer must be JSON."""
JSON_TYPE = re.compile(r"^application/(json|[\w!#$&.+\-^]+\+json)\s*(;|$)", re.IGNORECASE)
"""A JSON media type, as the client itself tells one (kubernetes 37.0.2 client/api_client.py:523)."""


class NotTheApi(HTTPError):
    """An answer that is not the API's JSON: an HTTPError, which every caller already hands to
    connection.explain (as it does a reset connection), saying what came and from where."""

    def __init__(self, where: str, said: str) -> None:
        super().__init__(f"{where} answered with {said}")
        self.where, self.said = where, said


ASKED: ContextVar[str | None] = ContextVar("ASKED", default=None)
"""What the request being answered asked for (`asked_for`), set around each generated client call."""


def asked_for(method: str, url: str) -> str | None:
    """"one" object or a "list" of them, as a request's method and Kubernetes API path ask (API
    conventions: /api/V or /apis/G/V, then [namespaces/NS/]PLURAL for a collection, PLURAL/NAME[/SUB]
    for one object); None where either may come (a DELETE, discovery, a path of another shape)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest or method == "DELETE":
        return None
    collection = len(rest) == 1
    return "list" if collection and method == "GET" else "one"


def read_answer(where: str, text: str, response_type: str, content_type: str | None,
                read: Callable[[str, str, str | None], Any], asked: str | None = None) -> Any:
    """An answer from `where`, deserialized by the client's own `read` once it is JSON that Python's
    reader can take, and, for a custom object (plain JSON), of the shape `asked` for; NotTheApi
    otherwise."""
    if response_type in RAW_TYPES:
        return read(text, response_type, content_type)
    if content_type is not None and not JSON_TYPE.match(content_type):
        raise NotTheApi(where, "an HTML page (a proxy's or a single sign-on login page?)" if "html" in
                        content_type.lower() else f"content of type {content_type}")
    if not text:
        raise NotTheApi(where, "an empty answer")
    try:
        answer = read(text, response_type, "application/json")
    except RecursionError:
        raise NotTheApi(where, "JSON nested deeper than Python reads") from None
    except ValueError as exc:
        raise NotTheApi(where, f"text that is not JSON, or JSON cut short ({exc})") from None
    except (TypeError, AttributeError, KeyError) as exc:
        raise NotTheApi(where, f"JSON that is not the Kubernetes object asked for ({type(exc).__name__})") from None
    wrong = not_an_object(answer, asked) if response_type == "object" else "null" if answer is None else None
    if wrong is not None:
        raise NotTheApi(where, f"JSON that is not a Kubernetes object or list ({wrong})")
    return answer


SHAPE: dict[str, type] = {"metadata": dict, "spec": dict, "status": dict}
"""What every object's top-level fields are (meta/v1 ObjectMeta; spec and status are objects by
API convention), where an answer has them."""


def not_an_object(answer: object, asked: str | None = None) -> str | None:
    """What makes a custom-object answer (the client returns it as plain JSON, unchecked) not an
    object, or not a list of `items` that are objects with a metadata.name, or not the one object or
    the list `asked` for; None when it is fine. Callers index these fields, so an answer without them
    is the server's fault, not a KeyError of ours. Discovery documents (connection.get_json) have
    neither `metadata` nor `items`."""
    if not isinstance(answer, dict):
        return f"a JSON {type(answer).__name__}, not an object"
    if answer.get("kind") == "Status":  # what a delete answers; its `status` is a string
        return None
    if asked == "one" and "items" in answer:
        return "a list where one object was asked for"
    if asked == "list" and not isinstance(answer.get("items"), list):
        return "items is not a list" if "items" in answer else "one object where a list was asked for"
    if "items" in answer:
        items = answer["items"]
        if not isinstance(items, list):
            return "items is not a list"
        return next((f"items[{i}]: {wrong}" for i, item in enumerate(items)
                     if (wrong := _object(item) if isinstance(item, dict) else "not an object") is not None), None)
    return _object(answer) if "metadata" in answer else None


def _object(item: dict[str, Any]) -> str | None:
    for name, kind in SHAPE.items():
        if name in item and not isinstance(item[name], kind):
            return f"{name} is not an object"
    if not isinstance(item.get("metadata", {}).get("name"), str):
        return "metadata.name is not a string"
    conditions = item.get("status", {}).get("conditions", [])
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        return "status.conditions is not a list of objects"
    return None


class _Watched(HTTPConnection):
    """A connection whose socket joins the current request's deadline as soon as it is opened,
    before a proxy tunnel or TLS handshake reads from it (urllib3 2.8.0 connection.py:827 opens it,
    then tunnels and wraps it), and again whenever it sends on a kept-alive socket."""

    def _new_conn(self) -> socket.socket:
        timeout = self.timeout
        if current() is None:
            return super()._new_conn()
        self.timeout = connect_timeout(timeout)
        try:
            return opened(super()._new_conn(), timeout)
        finally:
            self.timeout = timeout

    def request(self, *args: Any, **kwargs: Any) -> None:
        join_connection(self)
        super().request(*args, **kwargs)


class _Connection(_Watched):
    pass


class _TLSConnection(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


def watch_connections(pool_manager: Any) -> None:
    """Make `pool_manager` (a urllib3 PoolManager or ProxyManager, before its first request) open
    connections a deadline can shut down."""
    pool_manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}


def within(seconds: float, url: str, call: Callable[[], T]) -> T:
    """`call()` (requests through a pool manager given to `watch_connections`), failing with
    ReadTimeoutError once `seconds` have passed, whatever the server sends meanwhile."""
    timed_out = f"no complete answer within {seconds:g} s"
    with deadline(seconds, lambda: ReadTimeoutError(None, url, timed_out)):  # type: ignore[arg-type]
        return call()
