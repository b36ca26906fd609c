"""One deadline for a whole read from a server fleetgen does not trust, connecting included: a TLS
handshake or a proxy's answer to CONNECT trickled a byte at a time ends at the deadline, for the job
SDK (the kubernetes client over urllib3) and for the reconciler's Prometheus and Loki reads
(urllib.request).

Before: a connection joined its request's deadline only once `connect()` had returned, so each byte
of a trickled CONNECT answer came within the per-read timeout and the read went on for as long as
the proxy liked (over 150 s here, for a 1 s deadline). A TLS handshake is bounded by the socket
timeout as a whole (CPython Modules/_ssl.c, _ssl__SSLSocket_do_handshake_impl, sets one deadline
from it), but not by the request's: the SDK's retry after it took a second timeout (2.7 s here)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator.reconciler.sources import LokiSource, PrometheusSource, SourceError
from tests.conftest import REPO, run
from tests.faultproxy import FaultProxy, TrickleFront, serve_each

DEADLINE = 1.0
SLACK = 1.5
"""Scheduling slack on a loaded machine; the trickled handshake alone takes over a minute."""
TRICKLE = 0.05


@dataclass
class TrickledTLS:
    """A TLS server whose every byte, handshake included, comes TRICKLE seconds after the last."""

    url: str
    ca: Path


@pytest.fixture
def trickled_tls(tmp_path: Path) -> Iterator[TrickledTLS]:
    from tests.upstream.pki import ca, issue

    authority = ca("fleetgen-test-ca")
    served = issue(authority, "127.0.0.1", ips=("127.0.0.1",), server=True).write(tmp_path, "server")
    authority.write(tmp_path, "ca")
    tls = FaultProxy("https://127.0.0.1:9", Path("/nonexistent"))  # never forwarded to
    tls.serve(tls=served)
    tls.add("*", "", 404)
    assert tls._server is not None
    front = TrickleFront(("127.0.0.1", tls._server.server_address[1]), TRICKLE)
    yield TrickledTLS(f"https://127.0.0.1:{front.port}", tmp_path / "ca.crt")
    front.shutdown()
    tls.shutdown()


@pytest.fixture
def trickling_proxy() -> Iterator[str]:
    """An HTTP proxy that answers CONNECT with a long header, a byte every TRICKLE seconds."""
    answer = b"HTTP/1.1 200 Connection established\r\nX-Pad: " + b"a" * 4000 + b"\r\n\r\n"
    closing = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                for byte in answer:
                    if closing.wait(TRICKLE):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:  # the client gave up: what the test wants
                pass

    listener = serve_each(one)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    closing.set()
    listener.close()


def test_a_trickled_handshake_ends_at_the_deadline_not_at_the_socket_timeout(trickled_tls: TrickledTLS) -> None:
    """The mechanism itself: a socket timeout of a minute, a deadline of a second. Before: 47.7 s,
    the whole trickled handshake (the timer had no socket to shut)."""
    from generator.transport import _StdlibTLSConnection, deadline

    port = int(trickled_tls.url.rpartition(":")[2])
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="the deadline"), deadline(DEADLINE, lambda: TimeoutError("the deadline")):
        _StdlibTLSConnection("127.0.0.1", port, timeout=60).connect()
    took = time.monotonic() - started
    assert took < DEADLINE + SLACK, took


def test_the_sdk_gives_up_on_a_trickled_tls_handshake(trickled_tls: TrickledTLS) -> None:
    """Before: 2.7 s, the handshake's own timeout and then a retry's."""
    started = time.monotonic()
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--server", trickled_tls.url,
              "--token", "t", "--certificate-authority", str(trickled_tls.ca), "--request-timeout", str(DEADLINE))
    took = time.monotonic() - started
    assert res.code == 2 and f"the cluster at {trickled_tls.url} did not answer in time" in res.err, res.err
    assert took < DEADLINE + SLACK, took


def test_the_sdk_gives_up_on_a_proxy_that_trickles_its_connect_answer(trickling_proxy: str, tmp_path: Path) -> None:
    """The kubeconfig's proxy-url: urllib3 tunnels through it, reading its CONNECT answer first."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "https://cluster.fleetgen-test.invalid",
                                                     "proxy-url": trickling_proxy}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    started = time.monotonic()
    res = run(REPO, "job", "status", "any-job", "--namespace", "ml-research", "--kubeconfig",
              str(tmp_path / "kubeconfig"), "--request-timeout", str(DEADLINE))
    took = time.monotonic() - started
    assert res.code == 2 and "did not answer in time" in res.err, res.err
    assert took < DEADLINE + SLACK, took


@pytest.mark.parametrize("source", [PrometheusSource, LokiSource])
def test_a_source_gives_up_on_a_trickled_tls_handshake(trickled_tls: TrickledTLS, source: type) -> None:
    """Held before too: read_within's socket timeout is its deadline, and CPython bounds a handshake
    by it as a whole; kept so that it stays so."""
    started = time.monotonic()
    with pytest.raises(SourceError, match=f"query failed: no complete answer within {DEADLINE:g} s"):
        source(trickled_tls.url, timeout=DEADLINE).query("up")
    took = time.monotonic() - started
    assert took < DEADLINE + SLACK, took


def test_a_source_gives_up_on_a_proxy_that_trickles_its_connect_answer(trickling_proxy: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Proxies come from the environment, as for any urllib.request read."""
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", trickling_proxy)
    started = time.monotonic()
    with pytest.raises(SourceError, match="no complete answer within"):
        PrometheusSource("https://prometheus.fleetgen-test.invalid", timeout=DEADLINE).query("up")
    took = time.monotonic() - started
    assert took < DEADLINE + SLACK, took
