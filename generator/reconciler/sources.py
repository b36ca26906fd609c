"""Health sources: PromQL over Prometheus (DCGM series) and LogQL over Loki (kernel log lines).

Both use the signals table and the same queries as the rendered rules.

A query that cannot be answered makes its own signal *unknown* for the nodes it covers; what the
other queries found still counts. A node whose exporter is down or absent has every DCGM signal
unknown (kernel-log XIDs from Loki still count).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC
from generator.reconciler.model import Changed, Evidence, Observation
from generator.reconciler.presence import (
    EXPORTER_SIGNAL,
    GPU_COUNT_SIGNAL,
    AnswerError,
    Presence,
    presence_sample,
)
from generator.reconciler.samples import Bad, Sample, checked, code
from generator.signals import CONDITIONS, xid_class
from generator.transport import read_within


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
        body = read_within(timeout, request, MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise SourceError(f"{what} answered {exc.code}: {_body(exc)}", answered=True) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"{what} query failed: {exc}") from None
    except http.client.HTTPException as exc:  # a status line, header or chunk that is not HTTP's
        said = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        raise SourceError(f"{what} query failed: not an HTTP answer ({said})") from None
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


XID_METRIC_SIGNAL = "xid"
"""Unknown signal when the DCGM XID query failed."""
KERNEL_LOG_SIGNAL = "kernel_log"
"""Unknown signal of a node whose kernel-log query failed."""
LOKI_NODES_PER_QUERY = 100
"""Nodes per Loki query once the whole-cluster query was refused (Loki's max_query_series is 500
by default, and 100 node names keep the URL near 3 KB)."""


@dataclass(frozen=True)
class _Seen:
    """What a source said last time, so that this time only what changed is worked out again."""

    names: list[str]
    out: dict[str, Observation]
    noisy: frozenset[str]
    """Nodes with evidence, or something unknown of their own (a bad sample, a failed batch)."""
    every: frozenset[str] = frozenset()
    """Signals unknown on every node (their query failed)."""


def _same(obs: Observation, last: dict[str, Observation]) -> Observation:
    """Last loop's Observation of the node when it says the same (what was worked out about it,
    such as its cordon signals, is kept, and nothing downstream sees a change)."""
    prev = last.get(obs.node)
    return prev if prev is not None and prev == obs else obs


def _again(last: dict[str, Observation], touched: AbstractSet[str],
           observation: Callable[[str], Observation]) -> tuple[dict[str, Observation], set[str]]:
    """Last loop's Observations with the `touched` nodes' worked out again; the nodes whose
    Observation is not last loop's object (only nodes observed last loop are)."""
    out = dict(last)
    changed = set()
    for name in touched:
        if name in out:
            obs = out[name] = observation(name)
            if obs is not last[name]:
                changed.add(name)
    return out, changed


@dataclass
class PrometheusSource:
    """DCGM-based findings per node and GPU from a Prometheus server.

    Every query stands alone: one that fails makes only its own signal unknown, so a broken
    recording of one metric does not blind the reconciler to the rest.
    """

    url: str
    timeout: float = 10.0
    presence: Presence = field(default_factory=Presence, repr=False, compare=False)
    """GPUs reporting per node, read in proportion to what changed in the presence answer."""
    _seen: _Seen | None = field(default=None, repr=False, compare=False)

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
        return self.observe_changes(nodes)[0]

    def observe_changes(self, nodes: list[str]) -> tuple[dict[str, Observation], Changed]:
        """One Observation per node, and the nodes whose Observation may have changed since the
        last call (None: any). Only those are worked out again: a node whose presence sample did
        not change, with no evidence and nothing of its own unknown now or last loop, keeps last
        loop's Observation without being looked at."""
        before, self._seen = self._seen, None  # a call that fails leaves the next to start over
        failed: list[str] = []
        bad: dict[str, set[str]] = defaultdict(set)
        moved = self._presence(failed, bad)
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
        counts = {} if EXPORTER_SIGNAL in every else self.presence.counts
        noisy = frozenset(evidence.keys() | bad.keys())
        last = before.out if before is not None else {}

        def observation(name: str) -> Observation:
            count = counts.get(name)
            if not every and count is not None and count >= 0 and name not in evidence and name not in bad:
                prev = last.get(name)  # most nodes, every loop: the same Observation as last loop
                if prev is not None and prev.quiet and prev.gpus_reporting == count:
                    return prev
                return Observation(name, gpus_reporting=count)
            found = tuple(sorted(evidence.get(name, []), key=lambda e: (e.signal, e.gpu)))
            unknown = every | bad.get(name, set())
            if count is None or count < 0:
                unknown.add(EXPORTER_SIGNAL)
            usable = count is not None and count >= 0 and not {EXPORTER_SIGNAL, GPU_COUNT_SIGNAL} & unknown
            return _same(Observation(name, found, gpus_reporting=count if usable else None,
                                     unknown_signals=tuple(sorted(unknown))), last)

        if before is None or moved is None or before.every != every or before.names != nodes:
            out, changed = {name: observation(name) for name in nodes}, None
        else:
            out, changed = _again(last, moved | noisy | before.noisy, observation)
        self._seen = _Seen(nodes, out, noisy, frozenset(every))
        return out, changed

    def _presence(self, failed: list[str], bad: dict[str, set[str]]) -> set[str] | None:
        """Read the presence answer into `self.presence` (each node's GPUs reporting; -1: its exporter
        is down; absent: no exporter target); the nodes whose count may have changed (None: any).
        Only the samples that changed since the last loop are decoded (see answers.py)."""
        try:
            body = self.answer(PRESENCE_QUERY)
            try:
                moved = self.presence.take(body)
            except AnswerError:
                raise SourceError("prometheus answered something that is not JSON", answered=True) from None
            if moved is None and not self.presence.reader.split:  # another shape: decoded whole
                self.presence.whole([presence_sample(raw) for raw in decode_vector(body, "prometheus")])
        except SourceError:
            failed.append(EXPORTER_SIGNAL)
            return None
        for node, signal in self.presence.why.items():
            bad[node].add(signal)
        return moved


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
    _seen: _Seen | None = field(default=None, repr=False, compare=False)

    def query(self, expr: str) -> list[dict[str, Any]]:
        headers = {"X-Scope-OrgID": self.tenant} if self.tenant else {}
        return instant_vector(self.url, "/loki/api/v1/query", expr, self.timeout, "loki", headers)

    def observe(self, nodes: list[str]) -> dict[str, Observation]:
        return self.observe_changes(nodes)[0]

    def observe_changes(self, nodes: list[str]) -> tuple[dict[str, Observation], Changed]:
        """One Observation per node, and the nodes whose Observation may have changed since the
        last call (None: any): those Loki names now or named last loop."""
        before, self._seen = self._seen, None
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
        noisy = frozenset(evidence.keys() | unknown)
        last = before.out if before is not None else {}

        def observation(name: str) -> Observation:
            if name in noisy:
                return _same(Observation(name, tuple(evidence.get(name, ())),
                                         unknown_signals=(KERNEL_LOG_SIGNAL,) if name in unknown else ()), last)
            prev = last.get(name)  # most nodes, every loop: nothing in the kernel log
            return prev if prev is not None and prev.quiet else Observation(name)

        if before is None or before.names != nodes:
            out, changed = {name: observation(name) for name in nodes}, None
        else:
            out, changed = _again(last, noisy | before.noisy, observation)
        self._seen = _Seen(nodes, out, noisy)
        return out, changed

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
