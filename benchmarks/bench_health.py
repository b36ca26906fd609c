"""Reconciler benchmark: one decision loop over N nodes x 8 GPUs, against the time to just parse
the Prometheus responses it reads (json.loads), measured in the same run; and peak memory.

The loop = parse every query's answer, build observations (PrometheusSource.observe), and
decide() over every node. Responses are what Prometheus returns for a fleet where 2% of nodes
have an XID and 1% run hot; `up` lists every node.

    python benchmarks/bench_health.py                 # 10,000 nodes
    python benchmarks/bench_health.py --nodes 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from generator.compile.rules import EXPORTER, XID_METRIC
from generator.reconciler.decide import decide
from generator.reconciler.model import Breaker, NodeState, Policy
from generator.reconciler.sources import PrometheusSource
from generator.signals import CONDITIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table import print_table  # noqa: E402


def responses(nodes: int) -> dict[str, bytes]:
    """Prepared answers, keyed by the exact query the source sends."""
    def vector(samples: list[dict[str, Any]]) -> bytes:
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": samples}}).encode()

    names = [f"gpu-node-{i:05d}" for i in range(nodes)]
    out = {f"up{EXPORTER}": vector([{"metric": {"__name__": "up", "job": "gpu-exporter", "node": n,
                                                "instance": f"10.0.{i // 250}.{i % 250}:9400"},
                                     "value": [1700000000.0, "1"]} for i, n in enumerate(names)])}
    out[f"max by (node, gpu, xid) ({XID_METRIC}{EXPORTER}) > 0"] = vector(
        [{"metric": {"node": n, "gpu": str(i % 8), "xid": "79" if i % 2 else "13"}, "value": [1700000000.0, "1"]}
         for i, n in enumerate(names) if i % 50 == 0])
    for condition in CONDITIONS:
        if condition.action == "unknown":
            continue
        hot = [{"metric": {"node": n, "gpu": str(g), "UUID": f"GPU-{i}-{g}"}, "value": [1700000000.0, "91"]}
               for i, n in enumerate(names) if i % 100 == 7 for g in range(8)] if condition.name == "thermal" else []
        out[condition.promql(EXPORTER)] = vector(hot)
    return out


class Replay(PrometheusSource):
    """The real source, answering from prepared bytes instead of the network."""

    def __init__(self, answers: dict[str, bytes]) -> None:
        super().__init__("http://replay")
        self.answers = answers

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(json.loads(self.answers[expr])["data"]["result"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    answers = responses(args.nodes)
    nodes = {f"gpu-node-{i:05d}": NodeState(f"gpu-node-{i:05d}", f"pool-{i % 4}") for i in range(args.nodes)}
    policy = Policy()

    def floor() -> None:
        for body in answers.values():
            json.loads(body)

    def loop() -> Any:
        observations = Replay(answers).observe(sorted(nodes))
        return decide(observations, nodes, policy, Breaker(), 1_700_000_000.0)

    best_floor = min(_timed(floor) for _ in range(args.repeat))
    best_loop = min(_timed(loop) for _ in range(args.repeat))
    tracemalloc.start()
    decision = loop()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows = [("fleet", f"{args.nodes} nodes x 8 GPUs ({len(answers)} queries, "
                      f"{sum(len(b) for b in answers.values()) // 1024} KiB of answers)"),
            (f"floor: json.loads of the answers (best of {args.repeat})", f"{best_floor * 1000:.1f} ms"),
            (f"one loop: parse, observe, decide (best of {args.repeat})", f"{best_loop * 1000:.1f} ms"),
            ("ratio loop / floor", f"{best_loop / best_floor:.2f}x"),
            ("peak memory of one loop (tracemalloc)", f"{peak / 1024 / 1024:.1f} MiB"),
            ("decision", f"{len(decision.actions)} actions, breaker tripped: {decision.breaker.tripped}")]
    print_table(rows)


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
