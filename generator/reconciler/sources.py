"""Health sources: PromQL over Prometheus (DCGM series) and LogQL over Loki (kernel log lines).

Both use the signals table and the same queries as the rendered rules.

A source that cannot answer, or answers partially, yields *unknown* for the nodes it covers:
never healthy, never faulty. A node whose exporter is down or absent is unknown too.
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
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"{what} query failed: {exc}") from None
    if answer.get("status") != "success" or (answer.get("data") or {}).get("resultType") != "vector":
        raise SourceError(f"{what} answered {answer.get('status')}: {answer.get('error', '')}")
    return list(answer["data"]["result"])


GPU_PRESENCE_METRIC = "DCGM_FI_DEV_GPU_TEMP"
"""One series per GPU the exporter sees (the GPUMissingFromNode rule counts the same metric)."""


class SourceError(Exception):
    """The source did not answer usably (down, timeout, error status, malformed)."""


@dataclass
class PrometheusSource:
    """DCGM-based findings per node and GPU from a Prometheus server."""

    url: str
    timeout: float = 10.0

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector, or SourceError."""
        return instant_vector(self.url, "/api/v1/query", expr, self.timeout, "prometheus")

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        """One Observation per node; all unknown when any query fails."""
        try:
            up = {s["metric"].get("node"): float(s["value"][1]) for s in self.query(f"up{EXPORTER}")}
            reporting = {s["metric"].get("node"): int(float(s["value"][1]))
                         for s in self.query(f"count by (node) ({GPU_PRESENCE_METRIC}{EXPORTER})")}
            evidence: dict[str, list[Evidence]] = defaultdict(list)
            for sample in self.query(f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0"):
                labels = sample["metric"]
                cls = xid_class(int(labels.get("xid", "0") or 0))
                action = cls.action if cls else "count"
                evidence[labels.get("node", "")].append(Evidence(
                    f"xid-{labels.get('xid')}", action, labels.get("gpu", ""),
                    cls.meaning if cls else "unknown XID"))
            for condition in CONDITIONS:
                if condition.action == "unknown":
                    continue
                for sample in self.query(condition.promql(EXPORTER)):
                    labels = sample["metric"]
                    evidence[labels.get("node", "")].append(Evidence(
                        condition.name, condition.action, labels.get("gpu", ""), f"value {sample['value'][1]}"))
        except SourceError:
            return {name: Observation(name, unknown=True) for name in nodes}
        out = {}
        for name in nodes:
            if up.get(name) != 1.0:
                out[name] = Observation(name, unknown=True)
            else:
                out[name] = Observation(name, tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu))),
                                        gpus_reporting=reporting.get(name, 0))
        return out


@dataclass
class LokiSource:
    """XID and SXid kernel-log lines per node from Loki (LogQL instant queries).

    Loki only sees nodes that logged something, so a node it does not mention is healthy as far
    as the kernel log goes; a Loki that does not answer makes every node unknown.
    """

    url: str
    timeout: float = 10.0
    window: str = "5m"

    def query(self, expr: str) -> list[dict[str, Any]]:
        return instant_vector(self.url, "/loki/api/v1/query", expr, self.timeout, "loki")

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        from generator.compile.rules import sxid_lines_query, xid_lines_query

        evidence: dict[str, list[Evidence]] = defaultdict(list)
        try:
            for sample in self.query(xid_lines_query(window=self.window)):
                labels = sample["metric"]
                code = int(labels.get("xid", "0") or 0)
                cls = xid_class(code)
                evidence[labels.get("k8s_node_name", "")].append(Evidence(
                    f"xid-{code}", cls.action if cls else "count", "", f"kernel log, {sample['value'][1]} lines"))
            for sample in self.query(sxid_lines_query(window=self.window)):  # benign SXids already excluded
                labels = sample["metric"]
                evidence[labels.get("k8s_node_name", "")].append(Evidence(
                    f"sxid-{labels.get('sxid')}", "count", "", f"kernel log, {sample['value'][1]} lines"))
        except SourceError:
            return {name: Observation(name, unknown=True) for name in nodes}
        return {name: Observation(name, tuple(evidence.get(name, []))) for name in nodes}
