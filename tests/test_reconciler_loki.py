"""The Loki source: LogQL over Loki's HTTP API, with the rendered rules' queries.

A loopback endpoint answers in Loki's /loki/api/v1/query vector format, for the faults a real Loki
does not produce on demand (a batch failing with 500, a Loki that is down); it also checks that
the queries it receives are exactly the rendered rules' LogQL. tests/test_loki_ruler.py runs the
source against a real Loki, its series limit included.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from generator.compile.rules import sxid_lines_query, xid_lines_query
from generator.reconciler.loop import merge
from generator.reconciler.model import Evidence, Observation
from generator.reconciler.sources import LokiSource
from tests.conftest import SERVER_POLL
from tests.upstream.logql import parse_errors

SERIES_LIMIT = "maximum number of series (500) reached for a single query"
"""Loki's own text and status (400) for a result over max_query_series, as the real Loki v3.7.8
answers it in tests/test_loki_ruler.py (which also runs the source against that Loki)."""


def loki(results: dict[str, list[dict[str, Any]]], queries: list[str], status: int = 200,
         max_series: int | None = None, failing: set[str] = frozenset()) -> ThreadingHTTPServer:
    """A loopback Loki. With `max_series`, a result with more series is refused as Loki does;
    a query filtered to nodes answers only for them; a batch naming a node in `failing` gets a 500."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)["query"][0]
            queries.append(query)
            kind = "sxid" if "SXid" in query else "xid"
            only = re.search(r"k8s_node_name =~ `([^`]*)`", query)
            result = results[kind]
            if only:
                pattern = re.compile(only.group(1))
                result = [r for r in result if pattern.fullmatch(r["metric"]["k8s_node_name"])]
            code = status
            if max_series is not None and len(result) > max_series:
                code, payload = 400, SERIES_LIMIT.encode()
            elif only and any(pattern.fullmatch(n) for n in failing):
                code, payload = 500, b"too many outstanding requests"
            else:
                payload = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                                    "result": result}}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
    return server


def sample(node: str, **labels: str) -> dict[str, Any]:
    return {"metric": {"k8s_node_name": node, **labels}, "value": [1700000000, "2"]}


def test_kernel_xids_become_evidence_by_class() -> None:
    queries: list[str] = []
    server = loki({"xid": [sample("gpu-1", xid="79"), sample("gpu-2", xid="13"), sample("gpu-3", xid="155")],
                   "sxid": [sample("gpu-4", sxid="12028")]}, queries)
    try:
        observed = LokiSource(f"http://127.0.0.1:{server.server_address[1]}").observe(
            ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"])
    finally:
        server.shutdown()
    assert queries == [xid_lines_query(), sxid_lines_query()]  # the rendered rules' LogQL
    assert observed["gpu-0"].state == "healthy"
    assert observed["gpu-1"].state == "faulty" and observed["gpu-1"].evidence[0].signal == "xid-79"
    assert observed["gpu-2"].state == "warn"  # application error: noted, never cordoned
    assert observed["gpu-3"].state == "warn"  # 155 alone needs a second signal
    assert observed["gpu-4"].evidence == (Evidence("sxid-12028", "count", "", "kernel log, 2 lines"),)


def test_loki_down_or_failing_makes_only_the_kernel_log_unknown() -> None:
    dead = LokiSource("http://127.0.0.1:9", timeout=1).observe(["gpu-0"])
    assert dead["gpu-0"].state == "unknown" and dead["gpu-0"].unknown_signals == ("kernel_log",)
    queries: list[str] = []
    server = loki({"xid": [], "sxid": []}, queries, status=500)
    try:
        failing = LokiSource(f"http://127.0.0.1:{server.server_address[1]}").observe(["gpu-0"])
    finally:
        server.shutdown()
    assert failing["gpu-0"].state == "unknown" and failing["gpu-0"].unknown_signals == ("kernel_log",)


def test_a_series_limit_is_answered_per_batch_of_nodes() -> None:
    """Issue 13: Loki's 500-series limit made every node unknown. The query is asked again per
    100 nodes; a batch that still fails leaves only its nodes unknown."""
    names = [f"gpu-{i:04d}" for i in range(650)]
    lines = [sample(n, xid="13") for n in names] + [sample("gpu-0042", xid="79")]
    queries: list[str] = []
    server = loki({"xid": lines, "sxid": []}, queries, max_series=500, failing={"gpu-0633"})
    try:
        seen = LokiSource(f"http://127.0.0.1:{server.server_address[1]}").observe(names)
    finally:
        server.shutdown()
    assert queries[0] == xid_lines_query()  # the whole cluster first
    batches = [q for q in queries[1:] if "SXid" not in q]
    assert len(batches) == 7 and queries[1] == xid_lines_query(nodes=names[:100])
    assert seen["gpu-0042"].state == "faulty"
    assert seen["gpu-0599"].state == "warn" and seen["gpu-0599"].unknown_signals == ()
    assert {n for n, o in seen.items() if o.unknown_signals} == set(names[600:])  # the failing batch only
    assert parse_errors(queries[1:3]) == [[], []]  # the per-node LogQL is valid LogQL


def test_sources_merge_every_unknown_signal() -> None:
    prom = {"n": Observation("n", (Evidence("xid-155", "corroborate", "2"),))}
    kernel = {"n": Observation("n", (Evidence("ecc_dbe", "cordon", "2"),))}
    merged = merge(prom, kernel)
    assert merged["n"].state == "faulty" and merged["n"].cordon_signals() == ("ecc_dbe", "xid-155")
    assert merge(prom, {"n": Observation("n", unknown=True)})["n"].state == "unknown"
    blind = merge({"n": Observation("n", unknown_signals=("xid",))}, {"n": Observation("n", unknown_signals=(
        "kernel_log",))})
    assert blind["n"].unknown_signals == ("kernel_log", "xid") and blind["n"].state == "unknown"
