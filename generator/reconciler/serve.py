"""Operations: /metrics (Prometheus client) and /healthz for the running reconciler."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from generator.reconciler.model import Cordon, Decision, NodeState


class Metrics:
    """The reconciler's own metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cordoned = Gauge("fleetgen_health_nodes_cordoned", "Nodes held by the reconciler, by reason",
                              ["reason"], registry=self.registry)
        self.breaker = Gauge("fleetgen_health_breaker_tripped", "1 while the circuit breaker is tripped",
                             registry=self.registry)
        self.leader = Gauge("fleetgen_health_leader", "1 while this replica holds the Lease", registry=self.registry)
        self.loop = Histogram("fleetgen_health_loop_seconds", "Duration of one reconcile loop",
                              registry=self.registry)
        self.errors = Counter("fleetgen_health_source_errors_total", "Loops in which a source answered unknown",
                              registry=self.registry)
        self.cordons = Counter("fleetgen_health_cordons_total", "Cordons placed", registry=self.registry)
        self.healthy = True

    def record(self, decision: Decision | None, nodes: dict[str, NodeState], seconds: float) -> None:
        self.loop.observe(seconds)
        self.leader.set(decision is not None)
        if decision is None:
            return
        self.breaker.set(decision.breaker.tripped)
        self.cordoned.clear()
        for node in nodes.values():
            if node.owned and node.unschedulable:
                self.cordoned.labels(node.reason or "unknown").inc()
        self.cordons.inc(sum(isinstance(a, Cordon) for a in decision.actions))
        if any("health unknown" in s for s in decision.skipped):
            self.errors.inc()


def serve(metrics: Metrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start /metrics and /healthz in a background thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path == "/metrics":
                body, ctype, code = generate_latest(metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path == "/healthz":
                body, ctype = (b"ok\n", "text/plain") if metrics.healthy else (b"unhealthy\n", "text/plain")
                code = 200 if metrics.healthy else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
