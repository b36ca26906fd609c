"""`validate` reads schemas and CRDs from URLs (`--schema-location`, `--crd-location`): each read has
one deadline and a size cap, and a server that trickles, never ends its body, fails, answers a
sign-in page or something that is not the file gives exit 2 naming the URL and what went wrong,
never a traceback or a hang; a bad answer is not kept in the cache.

Before: plain urlopen with a per-read timeout and no cap; a trickled answer took as long as the
server liked, an endless one grew without bound, and a page that was not the file was cached and
then raised inside jsonschema or gave no CEL rules at all."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from generator.validate import cel, schemas
from tests.conftest import SERVER_POLL, run

DEADLINE = 1.0
SLACK = 2.0
TRICKLE = 0.05
LOGIN = b"<html><body><form action=/login>Sign in</form></body></html>"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    closing: threading.Event

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        case = self.path.strip("/").split("/")[0]
        try:
            if case == "trickle":  # a valid start, a byte at a time: each far within any read timeout
                body = b'{"type": "object", "description": "' + b"a" * 360 + b'"}'
                self._head(200, "application/json", len(body))
                for byte in body:
                    if self.closing.wait(TRICKLE):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            elif case == "endless":
                self._head(200, "application/json")
                while not self.closing.is_set():
                    self.wfile.write(b" " * 65536)
            elif case == "fail":
                self._answer(500, "text/plain", b"internal error")
            elif case == "login":
                self._answer(200, "text/html; charset=utf-8", LOGIN)
            elif case == "text":
                self._answer(200, "text/plain", b"kind: [unclosed\n")
            elif case == "plainpage":
                self._answer(200, "text/plain", LOGIN)
            else:
                self._answer(404, "text/plain", b"404: Not Found")
        except OSError:  # the client gave up: what the tests want
            self.close_connection = True

    def _head(self, status: int, content_type: str, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self._head(status, content_type, len(body))
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    closing = threading.Event()
    handler = type("Handler", (_Handler,), {"closing": closing})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    closing.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schemas, "SCHEMA_DEADLINE", DEADLINE)
    monkeypatch.setattr(schemas, "MAX_SCHEMA_BYTES", 1 << 20)
    monkeypatch.setattr(cel, "CRD_DEADLINE", DEADLINE)
    monkeypatch.setattr(cel, "MAX_CRD_BYTES", 1 << 20)


def _closed_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


SAID = {
    "trickle": f"no complete answer within {DEADLINE:g} s",
    "endless": f"answered more than {1 << 20} bytes",
    "fail": "answered HTTP 500 Internal Server Error",
    "login": "answered with an HTML page (a proxy's or a sign-in page?), not the file",
}


@pytest.mark.parametrize("case", [*SAID, "text", "unreachable"])
def test_a_schema_url_that_gives_no_schema_exits_2_naming_it(fleet_root: Path, shared_crds: Path, server: str,
                                                             case: str) -> None:
    base = _closed_port() if case == "unreachable" else f"{server}/{case}"
    location = base + "/{group}/{kind}_{version}.json"
    started = time.monotonic()
    res = run(fleet_root, "validate", "--no-kubeconform", "--schema-location", location, "--crd-location",
              str(shared_crds))
    took = time.monotonic() - started
    assert res.code == 2, (res.code, res.out, res.err)
    assert "Traceback" not in res.err + res.out
    said = {**SAID, "text": "is not a JSON schema (", "unreachable": "not reachable ("}[case]
    assert f"schema {base}/" in res.err and said in res.err, res.err
    assert took < DEADLINE + SLACK + 3, took  # the render before the reads takes a second or two
    if case != "unreachable":  # nothing that is not a schema is kept: a later run asks again
        res = run(fleet_root, "validate", "--offline", "--no-kubeconform", "--schema-location", location,
                  "--crd-location", str(shared_crds))
        assert res.code == 1 and "no schema found for " in res.err, res.err


@pytest.mark.parametrize("case", [*SAID, "text", "unreachable"])
def test_a_crd_url_that_gives_no_crds_exits_2_naming_it(fleet_root: Path, shared_schemas: Path, server: str,
                                                        case: str) -> None:
    base = _closed_port() if case == "unreachable" else f"{server}/{case}"
    location = base + "/{version}/manifests.yaml"
    started = time.monotonic()
    res = run(fleet_root, "validate", "--no-kubeconform", "--schema-location", str(shared_schemas),
              "--crd-location", location)
    took = time.monotonic() - started
    assert res.code == 2, (res.code, res.out, res.err)
    assert "Traceback" not in res.err + res.out
    said = {**SAID, "text": "are not YAML at line ", "unreachable": "not reachable ("}[case]
    assert f"CRDs {base}/v" in res.err and said in res.err and "--crd-location DIR" in res.err, res.err
    assert took < DEADLINE + SLACK + 3, took
    if case != "unreachable":
        res = run(fleet_root, "validate", "--offline", "--no-kubeconform", "--schema-location", str(shared_schemas),
                  "--crd-location", location)
        assert res.code == 2 and "no CRDs at hand offline" in res.err, res.err


def test_crds_that_are_yaml_but_not_crds_exit_2(fleet_root: Path, shared_schemas: Path, server: str) -> None:
    """The sign-in page served as text/plain is a YAML string: before, it gave no CEL rules at all,
    silently."""
    location = f"{server}/plainpage/{{version}}/manifests.yaml"
    res = run(fleet_root, "validate", "--no-kubeconform", "--schema-location", str(shared_schemas),
              "--crd-location", location)
    assert res.code == 2 and "no CustomResourceDefinition in it" in res.err, res.err
