"""The reconcile loop against a real Prometheus (Debian package) and the Kubernetes API stand-in.

A simulated fleet of GPU nodes, one DCGM-format exporter endpoint per node as in production,
scraped every second under the job and node labels the rendered ServiceMonitor produces.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from generator.compile.rules import EXPORTER_JOB
from generator.jobs import connect
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import ANNOTATION_OWNED, TAINT_KEY, Policy
from generator.reconciler.nodes import Executor, PoolSelector
from generator.reconciler.sources import PrometheusSource
from tests.kubeapi import KubeApi
from tests.prom import MetricsEndpoint, PrometheusServer, exposition, tool

NODES = 10
LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
POOLS = [PoolSelector("h100", LABELS)]
PERIOD = 1.5  # loop period; Prometheus scrapes and evaluates every second


class Fleet:
    """DCGM series of simulated 8-GPU nodes; XIDs can be injected and cleared."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.xids: dict[str, tuple[int, int]] = {}  # node -> (gpu, xid)

    def render(self, node: str) -> str:
        with self.lock:
            samples = []
            for gpu in range(8):
                base = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "modelName": "NVIDIA H100 80GB HBM3"}
                samples += [("DCGM_FI_DEV_GPU_TEMP", base, 50.0), ("DCGM_EXP_GPU_HEALTH_STATUS", base, 0.0),
                            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", base, 0.0)]
                if self.xids.get(node, (None,))[0] == gpu:
                    samples.append(("DCGM_EXP_XID_ERRORS_COUNT", {**base, "xid": str(self.xids[node][1])}, 1.0))
            return exposition(samples)


@contextmanager
def simulated(tmp_path: Path) -> Iterator[tuple[Fleet, PrometheusServer, KubeApi, str]]:
    tool("prometheus")
    fleet = Fleet()
    api = KubeApi()
    url = api.serve()
    for i in range(NODES):
        api.put("", "nodes", None, {"metadata": {"name": f"gpu-{i}", "labels": dict(LABELS)}, "spec": {}})
    with ExitStack() as stack:
        targets = {}
        for i in range(NODES):
            name = f"gpu-{i}"
            endpoint = stack.enter_context(MetricsEndpoint(lambda n=name: fleet.render(n)))
            targets[f"{EXPORTER_JOB}-{name}"] = (endpoint.port, {"node": name, "job": EXPORTER_JOB})
        prom = stack.enter_context(PrometheusServer(tmp_path, [], targets))
        assert wait_for(lambda: len(PrometheusSource(prom.url).query(f'up{{job="{EXPORTER_JOB}"}} == 1')) >= NODES,
                        20), "targets never came up"
        try:
            yield fleet, prom, api, url
        finally:
            api.shutdown()


def reconciler(url: str, prom: PrometheusServer, policy: Policy, identity: str = "replica-a",
               token: str = "admin-token") -> Reconciler:
    client = connect(token=token, server=url)
    return Reconciler(Executor(client), [PrometheusSource(prom.url, timeout=2)], POOLS, policy,
                      BreakerStore(client, "fleetgen-system"), LeaderLease(client, "fleetgen-system", identity))


def write_policy(path: Path, prometheus: str, period: float, **policy: float) -> Path:
    """A policy document like the rendered ConfigMap's, for the simulated pool."""
    import json as jsonlib

    rules = {"healthyChecksToRelease": 3, "cooldownSeconds": 600, "flapCount": 3, "flapWindowSeconds": 3600,
             "maxUnhealthyPercent": 50, **policy}
    path.write_text(jsonlib.dumps({"cluster": "sim", "dryRun": False, "periodSeconds": period,
                                   "prometheusUrl": prometheus, "namespace": "fleetgen-system",
                                   "pools": [{"name": "h100", "labels": LABELS}], "policy": rules}))
    return path


def wait_for(condition: Any, seconds: float, step: float = 0.2) -> bool:
    """Poll `condition` until it holds or `seconds` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True


def cordoned(api: KubeApi) -> set[str]:
    return {n["metadata"]["name"] for n in api.list("", "nodes")
            if n["spec"].get("unschedulable") and (n["metadata"].get("annotations") or {}).get(ANNOTATION_OWNED)}


def loops_until(rec: Reconciler, condition: Any, most: int) -> int:
    for i in range(1, most + 1):
        time.sleep(PERIOD)
        rec.once()
        if condition():
            return i
    raise AssertionError(f"condition not met within {most} loops")


def test_xid_cordons_within_two_periods_and_releases_after_cooldown(tmp_path: Path) -> None:
    policy = Policy(healthy_checks_to_release=2, cooldown_seconds=3)
    with simulated(tmp_path) as (fleet, prom, api, url):
        rec = reconciler(url, prom, policy)
        rec.once()
        assert cordoned(api) == set()
        with fleet.lock:
            fleet.xids["gpu-3"] = (5, 79)
        assert loops_until(rec, lambda: cordoned(api) == {"gpu-3"}, 2) <= 2
        node = api.get("", "nodes", None, "gpu-3")
        assert node is not None and node["spec"]["taints"][0]["key"] == TAINT_KEY
        assert any(e["reason"] == "GPUHealthCordoned" for e in api.list("", "events"))
        with fleet.lock:
            del fleet.xids["gpu-3"]
        started = time.monotonic()
        loops_until(rec, lambda: cordoned(api) == set(), 8)
        assert time.monotonic() - started >= policy.cooldown_seconds - PERIOD
        node = api.get("", "nodes", None, "gpu-3")
        assert node is not None and not node["spec"].get("taints")


def test_sixty_percent_failing_trips_the_breaker(tmp_path: Path) -> None:
    with simulated(tmp_path) as (fleet, prom, api, url):
        rec = reconciler(url, prom, Policy(max_unhealthy_percent=50))
        with fleet.lock:
            for i in range(6):
                fleet.xids[f"gpu-{i}"] = (0, 79)
        loops_until(rec, lambda: rec.breaker.load().tripped, 3)
        assert len(cordoned(api)) <= 5 and cordoned(api) == set()
        with fleet.lock:
            fleet.xids = {"gpu-9": (1, 48)}
        for _ in range(2):  # tripped: holds even for a single new fault
            time.sleep(PERIOD)
            rec.once()
        assert cordoned(api) == set()
        rec.reset_breaker()
        loops_until(rec, lambda: cordoned(api) == {"gpu-9"}, 2)


def test_prometheus_stopped_mid_run_causes_no_action(tmp_path: Path) -> None:
    with simulated(tmp_path) as (fleet, prom, api, url):
        rec = reconciler(url, prom, Policy(healthy_checks_to_release=1, cooldown_seconds=0))
        with fleet.lock:
            fleet.xids["gpu-2"] = (1, 79)
        loops_until(rec, lambda: cordoned(api) == {"gpu-2"}, 2)
        with fleet.lock:
            fleet.xids.clear()  # the node is fine now, but nobody can tell:
        prom.stop()
        writes = len(api.writes)
        for _ in range(3):
            decision = rec.once()
            assert decision is not None and decision.actions == ()
        assert cordoned(api) == {"gpu-2"}
        assert [w for w in api.writes[writes:] if "/nodes/" in w[2]] == []


def test_two_replicas_never_both_write(tmp_path: Path) -> None:
    with simulated(tmp_path) as (fleet, prom, api, url):
        api.tokens.update({"token-a": "replica-a", "token-b": "replica-b"})
        replicas = [reconciler(url, prom, Policy(), "replica-a", "token-a"),
                    reconciler(url, prom, Policy(), "replica-b", "token-b")]
        stop = threading.Event()
        threads = [threading.Thread(target=r.run, args=(0.3, stop)) for r in replicas]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        with fleet.lock:
            fleet.xids["gpu-4"] = (2, 79)
        wait_for(lambda: cordoned(api) == {"gpu-4"}, 15)
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        assert cordoned(api) == {"gpu-4"}
        node_writers = {user for user, _, path in api.writes if "/nodes/" in path or "/events" in path}
        assert len(node_writers) == 1, node_writers
        lease = api.get("coordination.k8s.io", "leases", "fleetgen-system", "fleetgen-health")
        assert lease is not None and lease["spec"]["holderIdentity"] in node_writers


def test_health_cli_once_status_and_reset(tmp_path: Path) -> None:
    from tests.conftest import REPO, run

    with simulated(tmp_path) as (fleet, prom, api, url):
        policy = write_policy(tmp_path / "policy.json", prom.url, 1, healthyChecksToRelease=2, cooldownSeconds=0)
        conn = ["--config", str(policy), "--server", url, "--token", "admin-token"]
        with fleet.lock:
            fleet.xids["gpu-7"] = (4, 79)
        time.sleep(2)
        dry = run(REPO, "health", "once", "--dry-run", *conn)
        assert dry.code == 0 and "would Cordon" in dry.out and cordoned(api) == set()
        once = run(REPO, "health", "once", *conn)
        assert once.code == 0 and "Cordon" in once.out and cordoned(api) == {"gpu-7"}
        status = run(REPO, "health", "status", *conn)
        assert "breaker: ok" in status.out and "1 of 10 GPU nodes cordoned" in status.out
        assert "gpu-7 [h100]: xid-79" in status.out
        reset = run(REPO, "health", "reset-breaker", *conn)
        assert reset.code == 0 and "breaker reset (was not tripped)" in reset.out
        missing = run(REPO, "health", "once", "--server", url, "--token", "admin-token")
        assert missing.code == 2 and "give --config FILE" in missing.err


def test_two_reconciler_processes_never_both_write(tmp_path: Path) -> None:
    """Two real `fleetgen health run` processes (as the Deployment's two replicas) share one Lease."""
    import os
    import subprocess
    import sys
    import urllib.request

    from tests.prom import free_port

    with simulated(tmp_path) as (fleet, prom, api, url):
        api.tokens.update({"token-a": "replica-a", "token-b": "replica-b"})
        policy = write_policy(tmp_path / "policy.json", prom.url, 0.5)
        procs, ports = [], []
        for replica in ("a", "b"):
            port = free_port()
            ports.append(port)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "generator", "health", "run", "--config", str(policy), "--server", url,
                 "--token", f"token-{replica}", f"--listen=127.0.0.1:{port}"],
                env={**os.environ, "POD_NAME": f"replica-{replica}"}, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        try:
            time.sleep(3)
            with fleet.lock:
                fleet.xids["gpu-5"] = (6, 48)
            wait_for(lambda: cordoned(api) == {"gpu-5"}, 20, step=0.3)
            time.sleep(2)  # both keep looping; the follower must keep its hands off
            leaders = []
            for port in ports:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    leaders.append("fleetgen_health_leader 1.0" in resp.read().decode())
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=15)
        assert cordoned(api) == {"gpu-5"}
        node_writers = {user for user, _, path in api.writes if "/nodes/" in path or "/events" in path}
        assert len(node_writers) == 1, node_writers
        assert sorted(leaders) == [False, True]
