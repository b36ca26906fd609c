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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC
from generator.reconciler.model import Evidence, Observation
from generator.reconciler.samples import Bad, Sample, checked, code
from generator.signals import CONDITIONS, xid_class


def instant_vector(base: str, path: str, expr: str, timeout: float, what: str,
                   headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The result vector of an instant query (Prometheus and Loki share the response format)."""
    url = f"{base.rstrip('/')}{path}?{urllib.parse.urlencode({'query': expr})}"
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - configured URL
            body = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise SourceError(f"{what} answered {exc.code}: {_body(exc)}", answered=True) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"{what} query failed: {exc}") from None
    if len(body) > MAX_ANSWER_BYTES:
        raise SourceError(f"{what} answered more than {MAX_ANSWER_BYTES} bytes", answered=True)
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise SourceError(f"{what} answered something that is not JSON", answered=True) from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or answer.get("status") != "success" or not isinstance(data, dict) \
            or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        status, error = (answer.get("status"), answer.get("error", "")) if isinstance(answer, dict) else ("?", "")
        raise SourceError(f"{what} answered {str(status)[:40]}: {str(error)[:300]}", answered=True)
    return list(data["result"])


MAX_ANSWER_BYTES = 64 << 20
"""An answer larger than this is refused whole (10,000 nodes x 8 GPUs of samples is a few MB)."""


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read()[:300].decode("utf-8", "replace").strip()
    except OSError:
        return str(exc.reason)


MAX_GPUS_PER_NODE = 64
"""A GPU count above this is not a node's (a forged or broken sample): the count is then unread."""
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

    def _samples(self, expr: str, signal: str, failed: list[str], bad: dict[str, set[str]]) -> Iterator[Sample]:
        """The query's samples that parse; one that does not makes `signal` unknown on its node only."""
        for item in checked(self._try(expr, signal, failed)):
            if isinstance(item, Sample):
                yield item
            elif item.node is not None:
                bad[item.node].add(signal)

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        """One Observation per node."""
        failed: list[str] = []
        bad: dict[str, set[str]] = defaultdict(set)
        up = {s.node: s.value for s in self._samples(f"up{EXPORTER}", EXPORTER_SIGNAL, failed, bad)}
        reporting: dict[str, int] = {}
        for s in self._samples(f"count by (node) ({GPU_PRESENCE_METRIC}{EXPORTER})", GPU_COUNT_SIGNAL, failed, bad):
            if 0 <= s.value <= MAX_GPUS_PER_NODE and s.value == int(s.value):
                reporting[s.node] = int(s.value)
            else:
                bad[s.node].add(GPU_COUNT_SIGNAL)
        evidence: dict[str, list[Evidence]] = defaultdict(list)
        for sample in self._samples(f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0", XID_METRIC_SIGNAL,
                                    failed, bad):
            xid = code(sample, "xid")
            if xid is None:
                bad[sample.node].add(XID_METRIC_SIGNAL)
                continue
            cls = xid_class(xid)
            evidence[sample.node].append(Evidence(
                f"xid-{xid}", cls.action if cls else "count", sample.labels.get("gpu", ""),
                cls.meaning if cls else "unknown XID"))
        for condition in CONDITIONS:
            if condition.action == "unknown":
                continue
            for sample in self._samples(condition.promql(EXPORTER), condition.name, failed, bad):
                evidence[sample.node].append(Evidence(
                    condition.name, condition.action, sample.labels.get("gpu", ""), f"value {sample.value:g}"))
        every = set(failed)
        out = {}
        for name in nodes:
            found = tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu)))
            exporter_up = EXPORTER_SIGNAL in failed or up.get(name) == 1.0
            unknown = every | bad.get(name, set()) | (set() if exporter_up else {EXPORTER_SIGNAL})
            count = None if {GPU_COUNT_SIGNAL} & (every | bad.get(name, set())) or not exporter_up \
                else reporting.get(name, 0)
            out[name] = Observation(name, found, gpus_reporting=count, unknown_signals=tuple(sorted(unknown)))
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
    tenant: str = ""
    """Loki tenant to read (X-Scope-OrgID): the kernel-log tenant only the collector writes."""

    def query(self, expr: str) -> list[dict[str, Any]]:
        headers = {"X-Scope-OrgID": self.tenant} if self.tenant else {}
        return instant_vector(self.url, "/loki/api/v1/query", expr, self.timeout, "loki", headers)

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        evidence: dict[str, list[Evidence]] = defaultdict(list)
        unknown: set[str] = set()
        try:
            unknown.update(self._collect(None, evidence))
        except SourceError as exc:
            if not exc.answered:  # down or unreachable: asking 100 times more will not help
                unknown.update(nodes)
            else:
                for first in range(0, len(nodes), LOKI_NODES_PER_QUERY):
                    batch = nodes[first:first + LOKI_NODES_PER_QUERY]
                    try:
                        unknown.update(self._collect(batch, evidence))
                    except SourceError:
                        unknown.update(batch)
        return {name: Observation(name, tuple(evidence.get(name, ())),
                                  unknown_signals=(KERNEL_LOG_SIGNAL,) if name in unknown else ())
                for name in nodes}

    def _collect(self, nodes: list[str] | None, evidence: dict[str, list[Evidence]]) -> set[str]:
        """XID and SXid lines (of `nodes` only, when given) into `evidence`, all or nothing; the
        nodes of samples that did not parse (their kernel log is then unknown)."""
        from generator.compile.rules import sxid_lines_query, xid_lines_query

        found: dict[str, list[Evidence]] = defaultdict(list)
        bad: set[str] = set()
        queries = ((xid_lines_query(window=self.window, nodes=nodes), "xid"),
                   (sxid_lines_query(window=self.window, nodes=nodes), "sxid"))  # benign SXids excluded
        for expr, label in queries:
            for item in checked(self.query(expr), "k8s_node_name"):
                number = code(item, label) if isinstance(item, Sample) else None
                if isinstance(item, Bad) or number is None:
                    if item.node is not None:
                        bad.add(item.node)
                    continue
                if label == "xid":
                    cls = xid_class(number)
                    found[item.node].append(Evidence(f"xid-{number}", cls.action if cls else "count", "",
                                                     f"kernel log, {item.value:g} lines"))
                else:
                    found[item.node].append(Evidence(f"sxid-{number}", "count", "",
                                                     f"kernel log, {item.value:g} lines"))
        for node, items in found.items():  # what did parse still counts beside an unknown kernel log
            evidence[node].extend(items)
        return bad
