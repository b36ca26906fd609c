"""Issue 30, user story 4: a GPU goes bad on the prod-east twin; the health reconciler cordons and
taints its node, Kueue moves the job off it, and the hold lifts once the GPU is reset.

The twin of test_twin_scheduling.py (prod-east as rendered on the real API server, Kueue and JobSet,
Nodes from its cluster file, kube-scheduler and kwok), plus what the reconciler reads in the cluster:
- one DCGM exporter endpoint per GPU node, in dcgm-exporter's exposition format, scraped every second
  by the real Prometheus under the job and node labels the rendered ServiceMonitor gives them;
- the real Loki (v3.7.8, with the configuration the pinned chart makes of prod-east's values), which
  the reconciler asks for kernel XID lines under the kernel-log tenant; none arrive here.
The reconciler is the program the rendered Deployment runs (`fleetgen health run --config`), with the
rendered ConfigMap's policy as the API server holds it and the rendered ServiceAccount's token, so
its RBAC is the rendered one. Only the policy's clocks are shortened (a 2 s loop, a 10 s cooldown) and
its URLs pointed at the loopback Prometheus and Loki. prod-east's drain is off, so the pod on the
faulty GPU ends as the failing GPU ends it, here by deleting it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from generator.compile.rules import EXPORTER_JOB
from generator.config.cluster import ClusterConfig
from generator.reconciler.model import ANNOTATION_OWNED, CONDITION_TYPE, TAINT_KEY
from tests.conftest import REPO
from tests.metrics import MetricsEndpoint, dcgm_node
from tests.rendered import chart_values, kubernetes_version
from tests.upstream.cluster import Stack
from tests.upstream.fleet import JOBSET, brief_workload, condition, custom, fake_nodes, hosts_of, workload_of
from tests.upstream.loki_server import LokiServer, Receiver, helm_template
from tests.upstream.processes import Process, free_port, spawn, wait_for, wait_until
from tests.upstream.prometheus_server import PrometheusServer, tool
from tests.upstream.reconciler_env import NAMESPACE, SERVICE_ACCOUNT
from tests.upstream.twin import MANAGED, bound_pods, pods, running_twin, submit

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE, JOB = "prod-east", "llm-pretrain", "pretrain-70b", "twin-gpu-fault"
SELECTOR = f"jobset.sigs.k8s.io/jobset-name={JOB}"
PERIOD, COOLDOWN = 2.0, 10.0
"""The policy's loop period and cooldown for the twin (rendered: 30 s and 900 s)."""
FAULT = 79
"""XID 79, GPU fallen off the bus: a hardware-class fault, held until the GPU is reset (bootID changes)."""


class Exporters:
    """dcgm-exporter's series for every GPU of the cluster's GPU nodes; an XID can be raised on one GPU."""

    def __init__(self, cluster: ClusterConfig) -> None:
        pools = {pool.name: pool for pool in cluster.node_pools}
        self.nodes = {n["metadata"]["name"]: pools[n["metadata"]["labels"][MANAGED]] for n in fake_nodes(cluster)
                      if n["metadata"]["labels"][MANAGED] in pools}
        """GPU node -> its pool (GPUs per node, product)."""
        self.lock = threading.Lock()
        self.xids: dict[str, tuple[int, int]] = {}
        """node -> (gpu, xid) it reports."""

    def render(self, node: str) -> str:
        gpu = self.nodes[node].gpu
        with self.lock:
            return dcgm_node(node, gpu.per_node, gpu.product.replace("-", " "), self.xids.get(node), temperature=52.0)


@dataclass
class Health:
    exporters: Exporters
    reconciler: Process

    def logs(self) -> str:
        return self.reconciler.tail(40)


def _policy(stack: Stack, loki: str, prometheus: str) -> dict[str, Any]:
    """The policy the rendered ConfigMap holds on the twin, its clocks shortened and its URLs local."""
    from kubernetes import client

    live = client.CoreV1Api(stack.client()).read_namespaced_config_map("fleetgen-health", NAMESPACE)
    document: dict[str, Any] = json.loads(live.data["policy.json"])
    assert document["cluster"] == CLUSTER and document["lokiUrl"] and not document["dryRun"]
    document.update(periodSeconds=PERIOD, lokiUrl=loki, prometheusUrl=prometheus)
    document["policy"]["cooldownSeconds"] = COOLDOWN
    return document


@contextmanager
def health_loop(stack: Stack, cluster: ClusterConfig, workdir: Path) -> Iterator[Health]:
    """Exporters, Prometheus and Loki as the cluster has them, and the reconciler running against them."""
    tool("prometheus")
    exporters = Exporters(cluster)
    with ExitStack() as running:
        targets = {}
        for name in exporters.nodes:
            endpoint = running.enter_context(MetricsEndpoint(lambda n=name: exporters.render(n)))
            targets[f"{EXPORTER_JOB}-{name}"] = (endpoint.port, {"node": name, "job": EXPORTER_JOB})
        (workdir / "prometheus").mkdir()
        prom = running.enter_context(PrometheusServer(workdir / "prometheus", [], targets))
        receiver = Receiver()
        running.callback(receiver.close)
        (workdir / "loki").mkdir()
        docs = helm_template(chart_values(CLUSTER, "loki"), workdir, f"{kubernetes_version(CLUSTER)}.0")
        loki = LokiServer(workdir / "loki", docs, {}, receiver.url, receiver.url + "/api/v1/write").start()
        running.callback(loki.stop)
        policy = workdir / "policy.json"
        policy.write_text(json.dumps(_policy(stack, loki.url, prom.url)))
        identity = stack.token_identity(NAMESPACE, SERVICE_ACCOUNT)
        port = free_port()
        proc = spawn("fleetgen-health", [sys.executable, "-m", "generator", "health", "run", "--config", str(policy),
                                         "--kubeconfig", str(identity.kubeconfig), f"--listen=127.0.0.1:{port}"],
                     workdir / "reconciler.log", env={"POD_NAME": "fleetgen-health-twin"}, cwd=REPO)
        running.callback(proc.stop)

        def healthz() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)

        wait_until(proc, healthz, 30, "serving /healthz")
        yield Health(exporters, proc)


def _node(stack: Stack, name: str) -> Any:
    from kubernetes import client

    return client.CoreV1Api(stack.client()).read_node(name)


def _held(stack: Stack, name: str) -> bool:
    """Cordoned and tainted by the reconciler, with its ownership annotation."""
    node = _node(stack, name)
    return bool(node.spec.unschedulable and TAINT_KEY in [t.key for t in node.spec.taints or []]
                and (node.metadata.annotations or {}).get(ANNOTATION_OWNED))


def _released(stack: Stack, name: str) -> bool:
    node = _node(stack, name)
    return not node.spec.unschedulable and TAINT_KEY not in [t.key for t in node.spec.taints or []] \
        and not (node.metadata.annotations or {}).get(ANNOTATION_OWNED)


def _gpu_healthy(stack: Stack, name: str) -> str:
    found = [c for c in _node(stack, name).status.conditions or [] if c.type == CONDITION_TYPE]
    return found[0].status if found else ""


def test_a_gpu_fault_is_cordoned_the_job_moves_and_the_hold_lifts_after_a_reset(upstream_etcd: Any,
                                                                                 tmp_path: Path) -> None:
    from kubernetes import client

    with running_twin(CLUSTER, upstream_etcd, tmp_path / "stack") as (stack, fleet, running), \
            health_loop(stack, fleet.clusters[CLUSTER].config, tmp_path) as health:
        core = client.CoreV1Api(stack.client())
        gpu_nodes = sorted(health.exporters.nodes)
        # The reconciler has read every node and found it healthy.
        assert wait_for(lambda: all(_gpu_healthy(stack, n) == "True" for n in gpu_nodes), 60), \
            f"{[(n, _gpu_healthy(stack, n)) for n in gpu_nodes]}\n{health.logs()}"

        profile = next(p for p in fleet.teams[TEAM].config.job_profiles if p.name == PROFILE)
        assert profile.topology is not None and profile.topology.slice is None
        ns, _ = submit(stack, fleet, JOB, tmp_path, TEAM, PROFILE, runs_for="30m")
        assert wait_for(lambda: condition(workload_of(stack, ns, JOB), "Admitted").get("status") == "True", 90)
        before = bound_pods(stack, ns, JOB, profile.nodes, 120)
        assert before, running.logs()
        assert wait_for(lambda: all(p.status.phase == "Running" for p in pods(stack, ns, SELECTOR)), 60), \
            [(p.metadata.name, p.status.phase) for p in pods(stack, ns, SELECTOR)]
        victim = sorted(before, key=lambda p: p.metadata.name)[-1]
        faulty = victim.spec.node_name
        block_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(profile.topology.level)
                    for n in fake_nodes(fleet.clusters[CLUSTER].config)}

        # A GPU of that node falls off the bus: dcgm-exporter reports XID 79 for it.
        started = time.monotonic()
        with health.exporters.lock:
            health.exporters.xids[faulty] = (3, FAULT)
        assert wait_for(lambda: _held(stack, faulty), 30, step=0.5), health.logs()
        cordoned_after = time.monotonic() - started
        assert [n for n in gpu_nodes if _node(stack, n).spec.unschedulable] == [faulty]
        assert any(e.reason == "GPUHealthCordoned" for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={faulty}").items)

        # Kueue leaves the job alone while its pod on that node runs (the taint is NoSchedule) ...
        assert not wait_for(lambda: condition(workload_of(stack, ns, JOB), "Evicted").get("status") == "True", 10), \
            f"{brief_workload(workload_of(stack, ns, JOB))}\n" \
            f"{[(p.metadata.name, p.spec.node_name, p.status.phase) for p in pods(stack, ns, SELECTOR)]}"
        assert condition(workload_of(stack, ns, JOB), "Admitted").get("status") == "True"
        # ... and once the failing GPU has ended that pod, finds no replacement host in the job's block
        # (16 hosts of 16): it evicts the workload, naming the node, and admits it again elsewhere.
        core.delete_namespaced_pod(victim.metadata.name, ns, grace_period_seconds=0)

        def node_failure() -> dict[str, Any]:
            conditions = ((workload_of(stack, ns, JOB) or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conditions
                         if c.get("reason") == "NodeFailures" and faulty in (c.get("message") or "")), {})

        failure = wait_for(node_failure, 120)
        assert failure, brief_workload(workload_of(stack, ns, JOB))
        assert "no replacement for unhealthy node" in failure["message"], failure

        def readmitted() -> set[str]:
            workload = workload_of(stack, ns, JOB)
            hosts = hosts_of(workload)
            again = condition(workload, "Admitted").get("status") == "True" and \
                condition(workload, "Evicted").get("status") == "False"
            return hosts if again and hosts else set()

        hosts = wait_for(readmitted, 180)
        assert len(hosts) == profile.nodes and faulty not in hosts, brief_workload(workload_of(stack, ns, JOB))

        def moved() -> set[str]:
            """Where the JobSet's live pods are bound, once it is one pod on each host Kueue chose."""
            live = [p for p in pods(stack, ns, SELECTOR) if p.spec.node_name and not p.metadata.deletion_timestamp
                    and p.status.phase in ("Pending", "Running")]
            on = {p.spec.node_name for p in live}
            return on if len(live) == profile.nodes and on == hosts else set()

        placed = wait_for(moved, 120)
        assert placed and faulty not in placed, (
            sorted(hosts), sorted(hosts_of(workload_of(stack, ns, JOB))),
            sorted((p.metadata.name, p.spec.node_name, p.status.phase, bool(p.metadata.deletion_timestamp))
                   for p in pods(stack, ns, SELECTOR)))

        # The exporter's series go quiet, but XID 79 needs a reset: the node stays held ...
        with health.exporters.lock:
            del health.exporters.xids[faulty]
        time.sleep(COOLDOWN + 4 * PERIOD)
        assert _held(stack, faulty), health.logs()
        # ... until its GPU is reset (the kubelet reports a new bootID), then the reconciler lifts it.
        reset = time.monotonic()
        core.patch_node_status(faulty, {"status": {"nodeInfo": {"bootID": f"{faulty}-boot-1"}}})
        assert wait_for(lambda: _released(stack, faulty), 60, step=0.5), health.logs()
        released_after = time.monotonic() - reset
        assert wait_for(lambda: _gpu_healthy(stack, faulty) == "True", 30)
        assert health.reconciler.alive(), health.logs()
        # The bootID change reached the reconciler through its node watch, not a list per loop.
        assert '"nodeList": false' in health.logs() and '"nodeList": true' not in health.logs(), health.logs()
        print(f"\nXID {FAULT} on {faulty}: cordoned and tainted {cordoned_after:.1f} s after the exporter "
              f"reported it; {failure['reason']}: {failure['message']}; admitted again on {len(hosts)} hosts in "
              f"{sorted({block_of[h] for h in hosts})}; released {released_after:.1f} s after the reset "
              f"(loop {PERIOD:.0f} s)")
        custom(stack).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", JOB)
