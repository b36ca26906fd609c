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
from dataclasses import dataclass, field
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC
from generator.reconciler.answers import Reader
from generator.reconciler.model import Evidence, Observation
from generator.reconciler.samples import Bad, Sample, checked, code, parse
from generator.signals import CONDITIONS, xid_class


def instant_vector(base: str, path: str, expr: str, timeout: float, what: str,
                   headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The result vector of an instant query (Prometheus and Loki share the response format)."""
    return decode_vector(fetch(base, path, expr, timeout, what, headers), what)


def fetch(base: str, path: str, expr: str, timeout: float, what: str,
          headers: dict[str, str] | None = None) -> bytes:
    """The body of an instant query's answer, or SourceError."""
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
    return body


def decode_vector(body: bytes, what: str) -> list[dict[str, Any]]:
    """The result vector of an answer, or SourceError."""
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
PRESENCE_QUERY = (f"(count by (node) ({GPU_PRESENCE_METRIC}{EXPORTER}) and on (node) max by (node) (up{EXPORTER}) == 1)"
                  f" or (max by (node) (up{EXPORTER}) - 1)")
"""One sample per node with an exporter target: the GPUs its exporter reports (0 when it answers
but sees none), or -1 when its exporter is down. A node with no exporter target is absent. The
one query that names every node every loop, so it carries nothing else (no target labels)."""


class SourceError(Exception):
    """The source did not answer usably (down, timeout, error status, malformed)."""

    def __init__(self, message: str, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered
        """The server answered (with an error): it is up, and a smaller query may succeed."""


EXPORTER_SIGNAL = "exporter"
"""Unknown signal of a node whose exporter is down or absent, or whose presence sample did not
parse (every DCGM signal is then unread); with `gpu_count`, of every node when the presence query
failed."""
GPU_COUNT_SIGNAL = "gpu_count"
"""Unknown signal when no GPU count could be read (the presence query failed, or answered
something that is not a count): no GPU can then be shown present."""
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
    _plain: dict[str, Observation] = field(default_factory=dict, repr=False, compare=False)
    """Last loop's Observations of nodes with nothing to report, reused while that stays so."""
    presence: Reader[tuple[str | None, float, str | None]] = field(
        default_factory=lambda: Reader(_presence_sample), repr=False, compare=False)
    """The presence answer, read in proportion to what changed since the last loop."""
    _presence_seen: tuple[object, dict[str, int], dict[str, str]] | None = field(
        default=None, repr=False, compare=False)

    def answer(self, expr: str) -> bytes:
        """An instant query's answer as sent, or SourceError."""
        return fetch(self.url, "/api/v1/query", expr, self.timeout, "prometheus")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector, or SourceError."""
        return decode_vector(self.answer(expr), "prometheus")

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
        reporting = self._presence(failed, bad)
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
        if EXPORTER_SIGNAL in every:
            every.add(GPU_COUNT_SIGNAL)
        out = {}
        plain = self._plain
        self._plain = {}
        for name in nodes:
            count = reporting.get(name)
            if not every and count is not None and count >= 0 and name not in evidence and name not in bad:
                obs = plain.get(name)  # most nodes, every loop: the same Observation as last loop
                if obs is None or obs.gpus_reporting != count:
                    obs = Observation(name, gpus_reporting=count)
                out[name] = self._plain[name] = obs
                continue
            found = tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu)))
            unknown = every | bad.get(name, set())
            if count is None or count < 0:
                unknown.add(EXPORTER_SIGNAL)
            usable = count is not None and count >= 0 and not {EXPORTER_SIGNAL, GPU_COUNT_SIGNAL} & unknown
            out[name] = Observation(name, found, gpus_reporting=count if usable else None,
                                    unknown_signals=tuple(sorted(unknown)))
        return out

    def _presence(self, failed: list[str], bad: dict[str, set[str]]) -> dict[str, int]:
        """Each node's GPUs reporting (-1: its exporter is down; absent: no exporter target).
        Every node is named here every loop: only the samples that changed since the last loop
        are decoded (see answers.py), and an answer the same as the last one costs no decoding."""
        try:
            body = self.answer(PRESENCE_QUERY)
            read = self.presence.read(body)
            if read is None:  # not Prometheus' own shape: decoded whole, every sample checked
                read = [_presence_raw(raw) for raw in decode_vector(body, "prometheus")]
        except SourceError:
            failed.append(EXPORTER_SIGNAL)
            return {}
        if self._presence_seen is not None and self._presence_seen[0] is read:
            _, out, why = self._presence_seen
        else:
            out, why = _presence_of(read)
            self._presence_seen = (read, out, why)
        for node, signal in why.items():
            bad[node].add(signal)
        return out


def _presence_of(read: list[tuple[str | None, float, str | None]]) -> tuple[dict[str, int], dict[str, str]]:
    """GPUs reporting per node, and the signal made unknown on each node whose sample is bad."""
    out: dict[str, int] = {}
    why: dict[str, str] = {}
    for node, value, bad_node in read:
        if node is None:
            if bad_node is not None:
                why.setdefault(bad_node, EXPORTER_SIGNAL)
            continue
        if not (-1 <= value <= MAX_GPUS_PER_NODE and value == int(value)) or out.get(node, value) != value:
            why[node] = GPU_COUNT_SIGNAL  # not a count, or a node named twice with two counts
            continue
        out[node] = int(value)
    for node in why:
        out.pop(node, None)
    return out, why


def _presence_raw(raw: object) -> tuple[str | None, float, str | None]:
    """One decoded presence sample: (node, value, None), or (None, 0, the node if it could be read)."""
    item = parse(raw)
    if isinstance(item, Bad):
        return None, 0.0, item.node
    return item.node, item.value, None


def _presence_sample(part: bytes) -> tuple[str | None, float, str | None]:
    """One presence sample from its bytes (SourceError when they are not JSON, as for a whole answer)."""
    try:
        raw = json.loads(part)
    except (ValueError, RecursionError):
        raise SourceError("prometheus answered something that is not JSON", answered=True) from None
    return _presence_raw(raw)


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
    _quiet: dict[str, Observation] = field(default_factory=dict, repr=False, compare=False)
    """Last loop's Observations of nodes with nothing in the kernel log."""

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
        quiet, self._quiet = self._quiet, {}
        out = {}
        for name in nodes:
            if name in evidence or name in unknown:
                out[name] = Observation(name, tuple(evidence.get(name, ())),
                                        unknown_signals=(KERNEL_LOG_SIGNAL,) if name in unknown else ())
            else:  # most nodes, every loop: nothing in the kernel log, the same Observation as last loop
                out[name] = self._quiet[name] = quiet.get(name) or Observation(name)
        return out

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
