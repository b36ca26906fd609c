"""Reconciler benchmark at fleet scale: N nodes x 8 GPUs, each Node object ~14 KB as real GPU nodes
are (GFD/NFD labels, annotations, a long image list). Every figure is against a floor measured in
the same run, and the workload takes the expensive path: 1% of nodes have a fatal XID (79 or 48),
and one in 1000 reports 7 of its 8 GPUs,
so the decision cordons them, the per-pool breaker is evaluated, and every planned write (the
merge patch against the Node as read) is computed; 1% run hot (warnings and Events).

- node list: the reconciler's paginated read (the official client, raw JSON pages, NodeState
  per page) from a local HTTP server answering like the API server's list with limit/continue;
  floor: json.loads of the same pages. It is made once, when the reconciler starts (and again
  only when the API server lets the watch's version go).
- node view per loop: what the node cache does between two loops when 1% of the Nodes changed
  (a watch request whose stream carries their MODIFIED events and a bookmark, each applied), and
  the loop's copy of the view; floor: json.loads of the same event lines.
- loop: the reconciler's observe (Prometheus and Loki, merged) + decide (`Reconciler.think`) +
  planned writes, one loop after another: the presence answer (a sample per node) changes in 1%
  of its samples between two loops (the `changing` nodes' exporters go down, then up again), its
  time always does, and the same 1% of Nodes changed (the watch's events); only what changed is
  decoded, observed, merged and decided again (answers.py, presence.py, `observe_changes`,
  `merge_changes`, `decide(calm=)`); every other answer is decoded whole; floor: json.loads of all
  the answers (Prometheus' and Loki's).
- peak memory of the read and of the loop (tracemalloc), against the 200 MiB target.

    python benchmarks/bench_health.py                 # 10,000 nodes
    python benchmarks/bench_health.py --nodes 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC, sxid_lines_query, xid_lines_query
from generator.reconciler.decide import decide
from generator.reconciler.informer import NodeCache
from generator.reconciler.loop import Reconciler, settle_heap
from generator.reconciler.model import CONDITION_TYPE, Cordon, NodeState, Policy
from generator.reconciler.nodes import PAGE, Executor, PoolSelector, _patch_for
from generator.reconciler.sources import PRESENCE_QUERY, LokiSource, PrometheusSource, decode_vector
from generator.signals import CONDITIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table import print_table  # noqa: E402

POOLS = [PoolSelector(f"pool-{i}", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": f"pool-{i}"})
         for i in range(4)]
NAME = "gpu-node-{:05d}"


def fatal(i: int) -> bool:
    return i % 100 == 0


def hot(i: int) -> bool:
    return i % 100 == 7


def node_object(i: int) -> dict[str, Any]:
    """A GPU Node as the API server returns it, ~14 KB of JSON."""
    name = NAME.format(i)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": f"zone-{i % 3}",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": f"pool-{i % 4}",
              "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/cuda.driver.major": "550",
              **{f"feature.node.kubernetes.io/cpu-cpuid.{f}": "true" for f in
                 ("AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512VL", "AMXBF16", "AMXINT8",
                  "FMA3", "SHA", "VAES", "VPCLMULQDQ", "XSAVE", "ADX", "AESNI")}}
    images = [{"names": [f"registry.example.com/ml/image-{k:02d}@sha256:{(str(i) + str(k)) * 4:0>64.64}",
                         f"registry.example.com/ml/image-{k:02d}:v{k}.{i % 7}"], "sizeBytes": 1_000_000_000 + k}
              for k in range(56)]
    return {"metadata": {"name": name, "uid": f"00000000-0000-4000-8000-{i:012d}", "resourceVersion": str(1000 + i),
                         "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                         "nfd.node.kubernetes.io/feature-labels": ",".join(sorted(labels))}},
            "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24",
                     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "110"},
                       "allocatable": {"cpu": "190", "memory": "2000000Mi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                                       "reason": f"Kubelet{t}", "message": f"kubelet reports {t}",
                                       "lastHeartbeatTime": "2026-11-23T00:00:00Z",
                                       "lastTransitionTime": "2026-11-01T00:00:00Z"}
                                      for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")]
                       + [{"type": CONDITION_TYPE, "status": "True", "reason": "GPUsHealthy",  # written an hour ago
                           "message": "8 GPUs report, no fault signal", "lastHeartbeatTime": "2026-11-23T00:00:00Z",
                           "lastTransitionTime": "2026-11-01T00:00:00Z"}],
                       "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"machineID": f"{i:032x}", "systemUUID": f"{i:032x}", "bootID": f"{i:032x}",
                                    "kernelVersion": "6.8.0-1015-aws", "osImage": "Ubuntu 24.04.1 LTS",
                                    "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.36.3",
                                    "operatingSystem": "linux", "architecture": "amd64"},
                       "images": images}}


class NodeLister:
    """Answers GET /api/v1/nodes?limit=&continue= like the API server, from pages prepared before
    anything is measured (tracemalloc does not count them: the server's memory is not the
    reconciler's, and its time is not either)."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.pages = {start: self.page(start, PAGE) for start in range(0, nodes, PAGE)}
        self.events = watch_events(nodes)
        self.stream = b"".join(line + b"\n" for line in self.events)
        lister = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                if query.get("watch") == ["true"]:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(lister.stream)))
                    self.end_headers()
                    self.wfile.write(lister.stream)
                    return
                start = int(query.get("continue", ["0"])[0])
                limit = int(query.get("limit", [str(nodes)])[0])
                body = lister.pages[start] if limit == PAGE and start in lister.pages else lister.page(start, limit)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def page(self, start: int, limit: int) -> bytes:
        end = min(self.nodes, start + limit)
        meta = {"resourceVersion": "99999", **({"continue": str(end)} if end < self.nodes else {})}
        return json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": meta,
                           "items": [node_object(i) for i in range(start, end)]}).encode()


def changing(i: int) -> bool:
    """The 1% of nodes that changed since the last loop (a node-problem-detector condition, a
    label, a human's cordon: any change to the object sends the whole Node)."""
    return i % 100 == 42


def watch_events(nodes: int) -> list[bytes]:
    """A watch stream between two loops: a MODIFIED event per changed node, then a bookmark."""
    lines = []
    for i in range(nodes):
        if changing(i):
            obj = node_object(i)
            obj["metadata"]["resourceVersion"] = str(200_000 + i)
            obj["metadata"]["labels"]["fleetgen.io/changed"] = "true"
            lines.append(json.dumps({"type": "MODIFIED", "object": obj}).encode())
    lines.append(json.dumps({"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {
        "resourceVersion": "300000"}}}).encode())
    return lines


def responses(nodes: int, turn: int = 0) -> dict[str, bytes]:
    """Prepared Prometheus answers, keyed by the exact query the source sends, written as Prometheus
    writes them (compact, the evaluation time in every sample). Loops alternate between two turns:
    the time moves on, and the exporters of the 1% of `changing` nodes go down, then up again."""
    when = 1_700_000_000 + 30 * turn

    vector = _vector

    def presence(i: int) -> str:
        if turn % 2 and changing(i):
            return "-1"
        return "7" if i % 1000 == 450 else "8"  # one node in 1000 lost a GPU

    names = [NAME.format(i) for i in range(nodes)]
    out = {PRESENCE_QUERY: vector([{"metric": {"node": n}, "value": [when + 0.25, presence(i)]}
                                   for i, n in enumerate(names)])}
    out[f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0"] = vector(
        [{"metric": {"node": n, "gpu": str(i % 8), "xid": "79" if (i // 100) % 2 else "48"},
          "value": [when + 0.25, "1"]} for i, n in enumerate(names) if fatal(i)]
        + [{"metric": {"node": n, "gpu": "3", "xid": "13"}, "value": [when + 0.25, "2"]}
           for i, n in enumerate(names) if i % 50 == 25])  # application XIDs: counted, never cordoned
    for condition in CONDITIONS:
        if condition.action == "unknown":
            continue
        warm = [{"metric": {"node": n, "gpu": str(g), "UUID": f"GPU-{i}-{g}"}, "value": [when + 0.25, "91"]}
                for i, n in enumerate(names) if hot(i) for g in range(8)] if condition.name == "thermal" else []
        out[condition.promql(EXPORTER)] = vector(warm)
    return out


class Replay(PrometheusSource):
    """The real source, answering from prepared bytes instead of the network (`turn` picks the loop's)."""

    def __init__(self, turns: list[dict[str, bytes]]) -> None:
        super().__init__("http://replay")
        self.turns = turns
        self.turn = 0

    def answer(self, expr: str) -> bytes:
        return self.turns[self.turn % len(self.turns)][expr]


class LokiReplay(LokiSource):
    """The real Loki source, answering from prepared bytes: the fatal nodes' kernel logs hold their
    XID lines (Loki's instant-vector answers have Prometheus' format)."""

    def __init__(self, nodes: int) -> None:
        super().__init__("http://replay")
        lines = [{"metric": {"k8s_node_name": NAME.format(i), "xid": "79"}, "value": [1_700_000_000, "3"]}
                 for i in range(nodes) if fatal(i)]
        self.answers = {xid_lines_query(window=self.window): _vector(lines),
                        sxid_lines_query(window=self.window): _vector([])}

    def query(self, expr: str) -> list[dict[str, Any]]:
        return decode_vector(self.answers[expr], "loki")


class NoBreakers:
    """No breaker tripped (the ConfigMap read is an API call, not the loop's work)."""

    def load(self) -> dict[str, Any]:
        return {}


def _vector(samples: list[dict[str, Any]]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": samples}},
                      separators=(",", ":")).encode()


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _peak(fn: Callable[[], Any]) -> tuple[Any, float]:
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, peak / 1024 / 1024


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of the table, by name (bench_all.py reports the loop)."""
    from generator.jobs import connect

    lister = NodeLister(args.nodes)
    executor = Executor(connect(token="bench", server=lister.url), dry_run=True)
    turns = [responses(args.nodes, turn) for turn in range(2)]
    answers = turns[0]
    policy = Policy()
    raw = {i: json.dumps(node_object(i)) for i in range(0, args.nodes, max(1, args.nodes // 4))}
    node_kb = sum(len(text) for text in raw.values()) / len(raw) / 1024
    pages = list(lister.pages.values())

    def list_floor() -> None:
        for page in pages:
            json.loads(page)

    def read() -> dict[str, NodeState]:
        return executor.read(POOLS)

    cache = NodeCache(executor.api, POOLS)
    cache.relist()
    listed = cache.version

    def between_loops() -> Any:
        cache.version = listed  # the same changes again, each time
        cache.watch()
        return cache.view()

    def events_floor() -> None:
        for line in lister.events:
            json.loads(line)

    nodes = read()
    # What the loop's planned writes patch: the Node as listed (the executor reads each again).
    by_name = {NAME.format(i): json.loads(raw[i]) if i in raw else node_object(i)
               for i in range(args.nodes) if fatal(i) or hot(i) or i % 1000 == 450}

    # A loop an hour into the run: signals with a `for:` (thermal, NVLink) have lasted, so the hot
    # nodes' warnings and every fault count, as they would in a steady state.
    source = Replay(turns)  # the sources and the reconciler live as long as `health run`
    warm = decide(source.observe(sorted(nodes)), nodes, policy, {}, 1_700_000_000.0 - 3600).pending
    loki = LokiReplay(args.nodes)
    reconciler = Reconciler(executor, [source, loki], POOLS, policy, NoBreakers(),  # type: ignore[arg-type]
                            clock=lambda: 1_700_000_000.0, pending=warm)
    moved = {NAME.format(i) for i in range(args.nodes) if changing(i)}  # the Nodes the watch changed

    def loop() -> Any:
        source.turn += 1  # the next loop: 1% of the presence samples changed
        decision, _ = reconciler.think(nodes, moved)
        patches = [_patch_for(a, by_name[a.node], 1_700_000_000.0) for a in decision.actions if isinstance(a, Cordon)]
        return decision, patches

    def answers_floor() -> None:
        for body in (*answers.values(), *loki.answers.values()):
            json.loads(body)

    loop()
    settle_heap()  # what `health run` does after its first loop (and after a list)
    best_list_floor = min(_timed(list_floor) for _ in range(args.repeat))
    best_read = min(_timed(read) for _ in range(args.repeat))
    best_floor = min(_timed(answers_floor) for _ in range(args.repeat))
    best_loop = min(_timed(loop) for _ in range(args.repeat))
    best_view = min(_timed(between_loops) for _ in range(args.repeat))
    best_events_floor = min(_timed(events_floor) for _ in range(args.repeat))
    view = between_loops()
    assert view is not None and len(view[0]) == len(nodes) and cache.lists == 1
    _, read_peak = _peak(read)
    (decision, patches), loop_peak = _peak(loop)
    cordons = [a for a in decision.actions if isinstance(a, Cordon)]
    return {"list_floor": best_list_floor, "read": best_read, "answers_floor": best_floor, "loop": best_loop,
            "read_peak": read_peak, "loop_peak": loop_peak, "decision": decision, "patches": patches,
            "node_kb": node_kb, "cordons": cordons, "server": lister.server, "view": best_view,
            "events_floor": best_events_floor, "changed": len(lister.events) - 1,
            "decoded": source.presence.reader.decoded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    m = measure(args)
    best_list_floor, best_read, best_floor, best_loop = m["list_floor"], m["read"], m["answers_floor"], m["loop"]
    read_peak, loop_peak, decision, patches, node_kb, cordons = (m["read_peak"], m["loop_peak"], m["decision"],
                                                                 m["patches"], m["node_kb"], m["cordons"])
    rows = [("fleet", f"{args.nodes} nodes x 8 GPUs, Node objects {node_kb:.1f} KB, {len(POOLS)} pools; "
                      f"{sum(fatal(i) for i in range(args.nodes))} with a fatal XID"),
            (f"node list floor: json.loads of the pages (best of {args.repeat})", f"{best_list_floor:.2f} s"),
            (f"node list: paginated read, {PAGE} per page (best of {args.repeat})",
             f"{best_read:.2f} s = {best_read / best_list_floor:.2f}x"),
            ("peak memory of the node list (tracemalloc)", f"{read_peak:.1f} MiB (target < 200 MiB)"),
            (f"node view per loop, {m['changed']} Nodes changed: watch events applied + copy (best of "
             f"{args.repeat})", f"{m['view'] * 1000:.1f} ms; floor {m['events_floor'] * 1000:.1f} ms "
                                f"= {m['view'] / m['events_floor']:.2f}x"),
            (f"loop floor: json.loads of the Prometheus and Loki answers (best of {args.repeat})",
             f"{best_floor * 1000:.1f} ms"),
            (f"loop: observe, decide, planned writes; {m['decoded']} presence samples and {m['changed']} Nodes changed "
             f"(best of {args.repeat})",
             f"{best_loop * 1000:.1f} ms = {best_loop / best_floor:.2f}x (target < 100 ms)"),
            ("peak memory of the loop (tracemalloc)", f"{loop_peak:.1f} MiB"),
            ("decision", f"{len(cordons)} cordons ({len(patches)} patches planned), "
                         f"{sum(a.__class__.__name__ == 'Event' for a in decision.actions)} events, "
                         f"{sum(a.__class__.__name__ == 'SetCondition' for a in decision.actions)} condition writes "
                         "(capped per loop), "
                         f"breakers tripped: {sorted(decision.breakers) or 'none'}")]
    print_table(rows)
    m["server"].shutdown()


if __name__ == "__main__":
    main()
