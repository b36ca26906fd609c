"""Issue 28: one bad sample makes one node's signal unknown, never the loop fail; evidence and
cordons bounded against a forged flood.

Loopback endpoints answer in Prometheus' and Loki's instant-vector format with the hostile answers
the attacker sent (a real Prometheus or Loki would pass most of them through: label values and
log lines are whatever was written); the cordon patch goes to the real API server.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from generator.reconciler.decide import decide
from generator.reconciler.model import ANNOTATION_EVIDENCE, Cordon, Decision, Evidence, NodeState, Observation, Policy
from generator.reconciler.nodes import MAX_EVIDENCE_BYTES, evidence_annotation
from generator.reconciler.sources import (
    EXPORTER_SIGNAL,
    GPU_COUNT_SIGNAL,
    KERNEL_LOG_SIGNAL,
    PRESENCE_QUERY,
    XID_METRIC_SIGNAL,
    LokiSource,
    PrometheusSource,
)
from tests.conftest import SERVER_POLL

NODES = ["gpu-0", "gpu-1", "gpu-2"]


def _vector(result: Any) -> bytes:
    """An answer written as Prometheus writes it (compact: the presence query's answer is then
    read sample by sample, see answers.py)."""
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}},
                      separators=(",", ":")).encode()


@pytest.fixture
def endpoint() -> Iterator[Callable[[Callable[[str], bytes]], str]]:
    """A loopback server answering every query with `answer(query)`; its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[str], bytes]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
                body = answer(query)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def _healthy(query: str, node: str) -> list[dict[str, Any]]:
    """What a healthy node answers to each of the source's queries."""
    if query == PRESENCE_QUERY:
        return [{"metric": {"node": node}, "value": [1, "8"]}]
    return []


QUERIES = {  # a prefix of each query kind -> the signal a bad sample there makes unknown
    PRESENCE_QUERY: EXPORTER_SIGNAL, "max by (node, gpu, xid)": XID_METRIC_SIGNAL,
    "DCGM_FI_DEV_ECC_DBE": "ecc_dbe",
}
BAD = {
    "nan": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}, "value": [1, "NaN"]},
    "inf": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}, "value": [1, "+Inf"]},
    "text": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}, "value": [1, "eleven"]},
    "no-value": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}},
    "value-shape": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}, "value": {"v": 1}},
    "number-label": {"metric": {"node": "gpu-1", "gpu": 0, "xid": "79"}, "value": [1, "1"]},
    "huge-xid": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "9" * 4301}, "value": [1, "1"]},
    "huge-count": {"metric": {"node": "gpu-1", "gpu": "0", "xid": "79"}, "value": [1, "1e300"]},
}


def _ecc_query(query: str) -> bool:
    return "DCGM_FI_DEV_ECC_DBE" in query


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("kind", sorted(QUERIES), ids=lambda k: "presence" if k == PRESENCE_QUERY else k)
def test_one_bad_prometheus_sample_makes_one_nodes_signal_unknown(endpoint: Any, kind: str, bad: str) -> None:
    def answer(query: str) -> bytes:
        result = [s for node in NODES for s in _healthy(query, node)]
        hit = _ecc_query(query) if kind == "DCGM_FI_DEV_ECC_DBE" else query.startswith(kind)
        if hit:
            result = [s for s in result if s["metric"]["node"] != "gpu-1"] + [BAD[bad]]
        if query.startswith("max by (node, gpu, xid)"):  # a real fault on another node still counts
            result.append({"metric": {"node": "gpu-2", "gpu": "3", "xid": "79"}, "value": [1, "1"]})
        return _vector(result)

    observed = PrometheusSource(endpoint(answer)).observe(NODES)
    signal = GPU_COUNT_SIGNAL if kind == PRESENCE_QUERY and bad == "huge-count" else QUERIES[kind]
    # 1e300 is a finite number: bad only where a GPU count or 0/1 is expected; elsewhere it is a
    # (forged) fault like any other, which the breaker and the budget bound.
    if not (bad == "huge-count" and kind in ("max by (node, gpu, xid)", "DCGM_FI_DEV_ECC_DBE")):
        assert signal in observed["gpu-1"].unknown_signals, observed["gpu-1"]
        assert observed["gpu-1"].state == "unknown"
    assert observed["gpu-0"].state == "healthy", observed["gpu-0"]
    assert observed["gpu-2"].state == "faulty" and observed["gpu-2"].cordon_signals() == ("xid-79",)


@pytest.mark.parametrize("body", [b"[1, 2]", b'{"status": "success", "data": {"resultType": "vector", "result": 5}}',
                                  b'{"status": "success", "data": []}', b"not json", b"{" * 100_000])
def test_a_malformed_answer_makes_its_query_unknown_everywhere_and_nothing_fails(endpoint: Any, body: bytes) -> None:
    def answer(query: str) -> bytes:
        if query.startswith("max by (node, gpu, xid)"):
            return body
        return _vector([s for node in NODES for s in _healthy(query, node)])

    observed = PrometheusSource(endpoint(answer)).observe(NODES)
    assert all(XID_METRIC_SIGNAL in observed[n].unknown_signals for n in NODES)


def test_a_forged_kernel_line_blinds_only_its_node(endpoint: Any) -> None:
    """The 4,301-digit XID of the issue: int() refuses it (Python's digit limit) and the whole loop
    used to fail; now gpu-1's kernel log is unknown and gpu-2's XID 79 still cordons."""
    def answer(query: str) -> bytes:
        label, node = ("sxid", "gpu-0") if "SXid" in query else ("xid", "gpu-1")
        result = [{"metric": {"k8s_node_name": node, label: "9" * 4301}, "value": [1, "1"]}]
        if label == "xid":
            result.append({"metric": {"k8s_node_name": "gpu-2", "xid": "79"}, "value": [1, "3"]})
            result.append({"metric": {"k8s_node_name": "gpu-1", "xid": "13"}, "value": [1, "1"]})
        return _vector(result)

    observed = LokiSource(endpoint(answer)).observe(NODES)
    assert observed["gpu-0"].unknown_signals == (KERNEL_LOG_SIGNAL,)
    assert observed["gpu-1"].unknown_signals == (KERNEL_LOG_SIGNAL,)
    assert [e.signal for e in observed["gpu-1"].evidence] == ["xid-13"]  # what parsed still counts
    assert observed["gpu-2"].cordon_signals() == ("xid-79",)


# --- bounded against a flood ----------------------------------------------------------------------

def test_the_evidence_annotation_is_capped() -> None:
    flood = tuple(Evidence(f"sxid-{i}", "count", str(i % 8), "kernel log, " + "x" * 500) for i in range(5000))
    text = evidence_annotation((Evidence("xid-79", "cordon", "3"), *flood))
    items = json.loads(text)
    assert len(text) <= MAX_EVIDENCE_BYTES + 200
    assert items[0]["signal"] == "xid-79"  # what justified the cordon first
    assert items[-1]["signal"] == "more" and items[-1]["detail"].endswith("more signals not recorded")


def test_a_forged_flood_is_cordoned_at_most_a_budget_per_loop() -> None:
    nodes = {f"n{i:02d}": NodeState(f"n{i:02d}", "h100") for i in range(40)}
    forged = {name: Observation(name, (Evidence("xid-79", "cordon"),)) for name in list(nodes)[:12]}
    healthy = {name: Observation(name) for name in list(nodes)[12:]}
    decision = decide({**forged, **healthy}, nodes, Policy(cordons_per_loop=5), {}, 1000.0)
    cordons = [a for a in decision.actions if isinstance(a, Cordon)]
    assert len(cordons) == 5
    assert sum("had its 5 cordons this loop" in s for s in decision.skipped) == 7
    # A burst past the breaker's share cordons nothing at all.
    everything = {name: Observation(name, (Evidence("xid-79", "cordon"),)) for name in nodes}
    burst = decide(everything, nodes, Policy(), {}, 1000.0)
    assert not [a for a in burst.actions if isinstance(a, Cordon)] and burst.breakers["h100"].tripped


def test_warnings_from_a_flood_are_one_summary_event_per_node() -> None:
    from generator.reconciler.model import Event

    nodes = {"n0": NodeState("n0", "h100")}
    flood = Observation("n0", tuple(Evidence(f"sxid-{i}", "count") for i in range(1000)))
    decision = decide({"n0": flood}, nodes, Policy(), {}, 1000.0)
    events = [a for a in decision.actions if isinstance(a, Event)]
    assert len(events) == 9 and events[-1].message == "and 992 more warning signals"


def test_a_cordon_with_thousands_of_signals_is_accepted_by_the_api_server(kube_stack: Any) -> None:
    """The 422 of the issue (annotations over 256 KiB): the capped evidence fits."""
    from generator.reconciler.nodes import Executor
    from tests.upstream.reconciler_env import Pool, reconciler_api

    pool = Pool(kube_stack)
    pool.add(1)
    name = pool.name(0)
    flood = tuple(Evidence(f"sxid-{i}", "count", str(i % 8), "kernel log, " + "x" * 200) for i in range(5000))
    cordon = Cordon(name, "xid-79", (Evidence("xid-79", "cordon", "3"), *flood), (5000.0,), False)
    Executor(reconciler_api(kube_stack), clock=lambda: 5000.0).apply(Decision((cordon,), {}))
    node = pool.get(name)
    assert node["spec"]["unschedulable"] is True
    assert json.loads(node["metadata"]["annotations"][ANNOTATION_EVIDENCE])[0]["signal"] == "xid-79"
