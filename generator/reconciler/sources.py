"""Health sources: PromQL over Prometheus's HTTP API (DCGM series), using the signals table.

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


class SourceError(Exception):
    """The source did not answer usably (down, timeout, error status, malformed)."""


@dataclass
class PrometheusSource:
    """DCGM-based findings per node and GPU from a Prometheus server."""

    url: str
    timeout: float = 10.0

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector, or SourceError."""
        target = f"{self.url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(target, timeout=self.timeout) as response:  # noqa: S310 - configured URL
                answer = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SourceError(f"prometheus query failed: {exc}") from None
        if answer.get("status") != "success" or (answer.get("data") or {}).get("resultType") != "vector":
            raise SourceError(f"prometheus answered {answer.get('status')}: {answer.get('error', '')}")
        return list(answer["data"]["result"])

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        """One Observation per node; all unknown when any query fails."""
        try:
            up = {s["metric"].get("node"): float(s["value"][1]) for s in self.query(f"up{EXPORTER}")}
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
                out[name] = Observation(name, tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu))))
        return out
