"""Operations: /metrics (Prometheus client) and /healthz for the running reconciler."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from generator.compile.health import STALL_PERIODS
from generator.reconciler.model import (
    ALL_POOLS,
    DRAIN,
    Cordon,
    Decision,
    Drain,
    NodeState,
    breaker_of,
    drain_breaker_of,
)


class Metrics:
    """The reconciler's own metrics, in a registry of its own, and its liveness."""

    def __init__(self, pools: list[str] | None = None, period: float = 30.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.pools = sorted(pools or [])
        self.cordoned = Gauge("fleetgen_health_nodes_cordoned", "Nodes held by the reconciler, by reason",
                              ["reason"], registry=self.registry)
        self.breaker = Gauge("fleetgen_health_breaker_tripped", "1 while the pool's circuit breaker is tripped",
                             ["pool"], registry=self.registry)
        self.drain_breaker = Gauge("fleetgen_health_drain_breaker_tripped",
                                   "1 while the pool's drain breaker is tripped (no evictions there)", ["pool"],
                                   registry=self.registry)
        self.evictions = Counter("fleetgen_health_drains_total", "Drain passes over a cordoned node",
                                 registry=self.registry)
        self.leader = Gauge("fleetgen_health_leader", "1 while this replica holds the Lease", registry=self.registry)
        self.loop = Histogram("fleetgen_health_loop_seconds", "Duration of one reconcile loop",
                              registry=self.registry)
        self.completed = Gauge("fleetgen_health_last_loop_completed_timestamp_seconds",
                               "Unix time the last reconcile loop completed (leader or not)", registry=self.registry)
        self.failures = Counter("fleetgen_health_loop_failures_total", "Reconcile loops that ended in an error",
                                registry=self.registry)
        self.errors = Counter("fleetgen_health_source_errors_total", "Loops in which a source answered unknown",
                              registry=self.registry)
        self.cordons = Counter("fleetgen_health_cordons_total", "Cordons placed", registry=self.registry)
        self.write_failures = Counter("fleetgen_health_write_failures_total",
                                      "Node or Event writes given up after retries", registry=self.registry)
        self.unreadable = Gauge("fleetgen_health_nodes_unreadable",
                                "Nodes the last loop skipped because a field had the wrong type (health unknown)",
                                registry=self.registry)
        for pool in self.pools:
            self.breaker.labels(pool).set(0)
        self.period = period
        self.monotonic = monotonic
        self.last_completed = monotonic()  # the first loop gets its periods of grace too

    @property
    def healthy(self) -> bool:
        return self.monotonic() - self.last_completed <= STALL_PERIODS * self.period

    def record(self, decision: Decision | None, nodes: dict[str, NodeState], seconds: float,
               failed: bool = False, write_failures: int = 0, unreadable: int = 0) -> None:
        self.loop.observe(seconds)
        if failed:
            self.failures.inc()
            return
        self.unreadable.set(unreadable)
        self.last_completed = self.monotonic()
        self.completed.set_to_current_time()
        self.leader.set(decision is not None)
        if decision is None:  # a follower knows no breaker state: only the leader reports it
            for pool in self.pools:
                self.breaker.labels(pool).set(0)
            return
        cordon_keys = {key for key in decision.breakers if not key.startswith(DRAIN)} - {ALL_POOLS}
        for pool in sorted(set(self.pools) | cordon_keys):
            self.breaker.labels(pool).set(breaker_of(decision.breakers, pool).tripped)
        for pool in sorted(set(self.pools) | {k.removeprefix(DRAIN) for k in decision.breakers if k.startswith(DRAIN)}):
            self.drain_breaker.labels(pool).set(drain_breaker_of(decision.breakers, pool).tripped)
        self.evictions.inc(sum(isinstance(a, Drain) for a in decision.actions))
        self.cordoned.clear()
        for node in nodes.values():
            if node.owned and node.unschedulable:
                self.cordoned.labels(node.reason or "unknown").inc()
        self.cordons.inc(sum(isinstance(a, Cordon) for a in decision.actions))
        self.write_failures.inc(write_failures)
        if any("health unknown" in s for s in decision.skipped):
            self.errors.inc()


def serve(metrics: Metrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start /metrics and /healthz in a background thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path == "/metrics":
                body, ctype, code = generate_latest(metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path == "/healthz":
                healthy = metrics.healthy
                body = b"ok\n" if healthy else b"no reconcile loop completed recently\n"
                ctype, code = "text/plain", 200 if healthy else 503
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
