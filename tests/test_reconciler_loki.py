"""The Loki source: LogQL over Loki's HTTP API, with the rendered rules' queries.

Grafana Loki has no package in any registry this machine reaches (Debian's `loki` is another
program), so a loopback endpoint answers in Loki's documented /loki/api/v1/query vector format;
it also checks that the queries it receives are exactly the rendered rules' LogQL.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from generator.compile.rules import sxid_lines_query, xid_lines_query
from generator.reconciler.loop import merge
from generator.reconciler.model import Evidence, Observation
from generator.reconciler.sources import LokiSource


def loki(results: dict[str, list[dict[str, Any]]], queries: list[str], status: int = 200) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)["query"][0]
            queries.append(query)
            kind = "sxid" if "SXid" in query else "xid"
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": results[kind]}})
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
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


def test_loki_down_or_failing_means_unknown() -> None:
    dead = LokiSource("http://127.0.0.1:9", timeout=1).observe(["gpu-0"])
    assert dead["gpu-0"].unknown
    queries: list[str] = []
    server = loki({"xid": [], "sxid": []}, queries, status=500)
    try:
        failing = LokiSource(f"http://127.0.0.1:{server.server_address[1]}").observe(["gpu-0"])
    finally:
        server.shutdown()
    assert failing["gpu-0"].unknown


def test_sources_merge_unknown_wins() -> None:
    prom = {"n": Observation("n", (Evidence("xid-155", "corroborate", "2"),))}
    kernel = {"n": Observation("n", (Evidence("health_fail", "cordon", "2"),))}
    merged = merge(prom, kernel)
    assert merged["n"].state == "faulty"
    assert merge(prom, {"n": Observation("n", unknown=True)})["n"].state == "unknown"
