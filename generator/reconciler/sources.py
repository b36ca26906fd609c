"""Health sources: PromQL over Prometheus (DCGM series) and LogQL over Loki (kernel log lines).

Both use the signals table and the same queries as the rendered rules.

A query that cannot be answered makes its own signal *unknown* for the nodes it covers; what the
other queries found still counts. A node whose exporter is down or absent has every DCGM signal
unknown (kernel-log XIDs from Loki still count).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC
from generator.reconciler.model import Evidence, Observation
from generator.signals import CONDITIONS, xid_class


def instant_vector(base: str, path: str, expr: str, timeout: float, what: str) -> list[dict[str, Any]]:
    """The result vector of an instant query (Prometheus and Loki share the response format)."""
    url = f"{base.rstrip('/')}{path}?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - configured URL
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise SourceError(f"{what} answered {exc.code}: {_body(exc)}", answered=True) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"{what} query failed: {exc}") from None
    if answer.get("status") != "success" or (answer.get("data") or {}).get("resultType") != "vector":
        raise SourceError(f"{what} answered {answer.get('status')}: {answer.get('error', '')}", answered=True)
    return list(answer["data"]["result"])


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read()[:300].decode("utf-8", "replace").strip()
    except OSError:
        return str(exc.reason)


GPU_PRESENCE_METRIC = "DCGM_FI_DEV_GPU_TEMP"
"""One series per GPU the exporter sees (the GPUMissingFromNode rule counts the same metric)."""


class SourceError(Exception):
    """The source did not answer usably (down, timeout, error status, malformed)."""

    def __init__(self, message: str, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered
        """The server answered (with an error): it is up, and a smaller query may succeed."""


EXPORTER_SIGNAL = "exporter"
"""Unknown signal of a node whose exporter is down or absent (every DCGM signal is then unread)."""
GPU_COUNT_SIGNAL = "gpu_count"
"""Unknown signal when the GPU-count query failed (no GPU can then be shown present)."""
XID_METRIC_SIGNAL = "xid"
"""Unknown signal when the DCGM XID query failed."""
KERNEL_LOG_SIGNAL = "kernel_log"
"""Unknown signal of a node whose kernel-log query failed."""
LOKI_NODES_PER_QUERY = 100
"""Nodes per Loki query once the whole-cluster query was refused (Loki's max_query_series is 500
by default, and 100 node names keep the URL near 3 KB)."""


@dataclass
class PrometheusSource:
    """DCGM-based findings per node and GPU from a Prometheus server.

    Every query stands alone: one that fails makes only its own signal unknown, so a broken
    recording of one metric does not blind the reconciler to the rest.
    """

    url: str
    timeout: float = 10.0

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector, or SourceError."""
        return instant_vector(self.url, "/api/v1/query", expr, self.timeout, "prometheus")

    def _try(self, expr: str, signal: str, failed: list[str]) -> list[dict[str, Any]]:
        try:
            return self.query(expr)
        except SourceError:
            failed.append(signal)
            return []

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        """One Observation per node."""
        failed: list[str] = []
        up = {s["metric"].get("node"): float(s["value"][1])
              for s in self._try(f"up{EXPORTER}", EXPORTER_SIGNAL, failed)}
        reporting = {s["metric"].get("node"): int(float(s["value"][1])) for s in self._try(
            f"count by (node) ({GPU_PRESENCE_METRIC}{EXPORTER})", GPU_COUNT_SIGNAL, failed)}
        evidence: dict[str, list[Evidence]] = defaultdict(list)
        for sample in self._try(f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0", XID_METRIC_SIGNAL, failed):
            labels = sample["metric"]
            cls = xid_class(int(labels.get("xid", "0") or 0))
            evidence[labels.get("node", "")].append(Evidence(
                f"xid-{labels.get('xid')}", cls.action if cls else "count", labels.get("gpu", ""),
                cls.meaning if cls else "unknown XID"))
        for condition in CONDITIONS:
            if condition.action == "unknown":
                continue
            for sample in self._try(condition.promql(EXPORTER), condition.name, failed):
                labels = sample["metric"]
                evidence[labels.get("node", "")].append(Evidence(
                    condition.name, condition.action, labels.get("gpu", ""), f"value {sample['value'][1]}"))
        every = tuple(sorted(failed))
        out = {}
        for name in nodes:
            found = tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu)))
            exporter_up = EXPORTER_SIGNAL in failed or up.get(name) == 1.0
            unknown = every if exporter_up else tuple(sorted({*every, EXPORTER_SIGNAL}))
            count = None if GPU_COUNT_SIGNAL in failed or not exporter_up else reporting.get(name, 0)
            out[name] = Observation(name, found, gpus_reporting=count, unknown_signals=unknown)
        return out


@dataclass
class LokiSource:
    """XID and SXid kernel-log lines per node from Loki (LogQL instant queries).

    Loki only sees nodes that logged something, so a node it does not mention is healthy as far
    as the kernel log goes. Loki refuses a query whose result has more series than its
    `max_query_series` (500 by default): the query is then asked again per `LOKI_NODES_PER_QUERY`
    nodes, and only the nodes of a batch that still fails are unknown. A Loki that does not
    answer at all makes the kernel log unknown on every node (and nothing else).
    """

    url: str
    timeout: float = 10.0
    window: str = "5m"

    def query(self, expr: str) -> list[dict[str, Any]]:
        return instant_vector(self.url, "/loki/api/v1/query", expr, self.timeout, "loki")

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        evidence: dict[str, list[Evidence]] = defaultdict(list)
        unknown: set[str] = set()
        try:
            self._collect(None, evidence)
        except SourceError as exc:
            if not exc.answered:  # down or unreachable: asking 100 times more will not help
                unknown.update(nodes)
            else:
                for first in range(0, len(nodes), LOKI_NODES_PER_QUERY):
                    batch = nodes[first:first + LOKI_NODES_PER_QUERY]
                    try:
                        self._collect(batch, evidence)
                    except SourceError:
                        unknown.update(batch)
        return {name: Observation(name, () if name in unknown else tuple(evidence.get(name, ())),
                                  unknown_signals=(KERNEL_LOG_SIGNAL,) if name in unknown else ())
                for name in nodes}

    def _collect(self, nodes: list[str] | None, evidence: dict[str, list[Evidence]]) -> None:
        """XID and SXid lines (of `nodes` only, when given) into `evidence`; all or nothing."""
        from generator.compile.rules import sxid_lines_query, xid_lines_query

        found: dict[str, list[Evidence]] = defaultdict(list)
        for sample in self.query(xid_lines_query(window=self.window, nodes=nodes)):
            labels = sample["metric"]
            code = int(labels.get("xid", "0") or 0)
            cls = xid_class(code)
            found[labels.get("k8s_node_name", "")].append(Evidence(
                f"xid-{code}", cls.action if cls else "count", "", f"kernel log, {sample['value'][1]} lines"))
        for sample in self.query(sxid_lines_query(window=self.window, nodes=nodes)):  # benign SXids excluded
            labels = sample["metric"]
            found[labels.get("k8s_node_name", "")].append(Evidence(
                f"sxid-{labels.get('sxid')}", "count", "", f"kernel log, {sample['value'][1]} lines"))
        for node, items in found.items():
            evidence[node].extend(items)
