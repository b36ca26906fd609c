"""The reconcile loop against a real Prometheus (Debian package) and the real API server.

A simulated fleet of GPU nodes (Node objects of a pool only the test uses), one DCGM-format
exporter endpoint per node as in production, scraped every second under the job and node labels
the rendered ServiceMonitor produces. The reconciler runs as the rendered ServiceAccount with a
token of its own per replica, so the audit log tells replicas apart by credential.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from generator.compile.rules import EXPORTER_JOB
from generator.jobs import connect
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import ANNOTATION_OWNED, CONDITION_TYPE, TAINT_KEY, Policy, Release, SetCondition
from generator.reconciler.nodes import Executor
from generator.reconciler.sources import EXPORTER_SIGNAL, PrometheusSource, SourceError
from tests.faultproxy import HANG, FaultProxy
from tests.metrics import MetricsEndpoint, dcgm_node
from tests.upstream.absent import skip_or_fail
from tests.upstream.cluster import Identity, Stack
from tests.upstream.processes import free_port, wait_for
from tests.upstream.prometheus_server import PrometheusServer, tool
from tests.upstream.reconciler_env import (
    NAMESPACE,
    Pool,
    credential_id,
    misshapen,
    reconciler_identity,
    reset_leadership,
    token_of,
    writers,
)

NODES = 10
PERIOD = 1.5  # loop period; Prometheus scrapes and evaluates every second


class Fleet:
    """DCGM series of simulated 8-GPU nodes; XIDs can be injected and cleared."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.xids: dict[str, tuple[int, int]] = {}  # node -> (gpu, xid)
        self.gpus: dict[str, int] = {}  # node -> GPUs its exporter sees (8 unless set)
        self.broken: set[str] = set()  # nodes whose exporter answers what no scrape can parse

    def render(self, node: str) -> str:
        with self.lock:
            if node in self.broken:
                return "this is not { the exposition format\n"
            return dcgm_node(node, self.gpus.get(node, 8), "NVIDIA H100 80GB HBM3", self.xids.get(node))


@contextmanager
def simulated(tmp_path: Path, stack: Stack,
              flags: tuple[str, ...] = ()) -> Iterator[tuple[Fleet, PrometheusServer, Pool]]:
    tool("prometheus")
    fleet = Fleet()
    pool = Pool(stack)
    pool.add(NODES)
    reset_leadership(stack)
    with ExitStack() as stack_:
        targets = {}
        for i in range(NODES):
            name = pool.name(i)
            endpoint = stack_.enter_context(MetricsEndpoint(lambda n=name: fleet.render(n)))
            targets[f"{EXPORTER_JOB}-{name}"] = (endpoint.port, {"node": name, "job": EXPORTER_JOB})
        prom = stack_.enter_context(PrometheusServer(tmp_path, [], targets, flags=flags))
        assert wait_for(lambda: len(PrometheusSource(prom.url).query(f'up{{job="{EXPORTER_JOB}"}} == 1')) >= NODES,
                        20), "targets never came up"
        yield fleet, prom, pool


def reconciler(stack: Stack, prom: PrometheusServer, pool: Pool, policy: Policy, identity: str = "replica-a",
               who: Identity | None = None) -> Reconciler:
    client = connect(kubeconfig=str((who or reconciler_identity(stack)).kubeconfig))
    return Reconciler(Executor(client), [PrometheusSource(prom.url, timeout=2)], pool.selector, policy,
                      BreakerStore(client, NAMESPACE), LeaderLease(client, NAMESPACE, identity))


def write_policy(path: Path, prometheus: str, period: float, pool: Pool, **policy: float) -> Path:
    """A policy document like the rendered ConfigMap's, for the simulated pool."""
    import json as jsonlib

    rules = {"healthyChecksToRelease": 3, "cooldownSeconds": 600, "flapCount": 3, "flapWindowSeconds": 3600,
             "maxUnhealthyPercent": 50, **policy}
    path.write_text(jsonlib.dumps({"cluster": "sim", "dryRun": False, "periodSeconds": period,
                                   "prometheusUrl": prometheus, "namespace": NAMESPACE,
                                   "pools": [{"name": "h100", "labels": pool.labels}], "policy": rules}))
    return path


def boot(stack: Stack, node: str, boot_id: str) -> None:
    """What the kubelet reports after a (re)boot: a new status.nodeInfo.bootID."""
    from kubernetes import client

    client.CoreV1Api(stack.client()).patch_node_status(node, {"status": {"nodeInfo": {"bootID": boot_id}}})


def cordoned(pool: Pool) -> set[str]:
    return pool.cordoned(ANNOTATION_OWNED)


def loops_until(rec: Reconciler, condition: Any, most: int) -> int:
    for i in range(1, most + 1):
        time.sleep(PERIOD)
        rec.once()
        if condition():
            return i
    raise AssertionError(f"condition not met within {most} loops")


def test_xid_cordons_within_two_periods_and_is_released_only_after_a_reboot(tmp_path: Path, kube_stack: Stack) -> None:
    policy = Policy(healthy_checks_to_release=2, cooldown_seconds=3)
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        rec = reconciler(kube_stack, prom, pool, policy)
        boot(kube_stack, pool.name(3), "boot-first")
        rec.once()
        assert cordoned(pool) == set()
        with fleet.lock:
            fleet.xids[pool.name(3)] = (5, 79)
        assert loops_until(rec, lambda: cordoned(pool) == {pool.name(3)}, 2) <= 2
        node = pool.get(pool.name(3))
        assert TAINT_KEY in [t["key"] for t in node["spec"]["taints"]]
        assert any(e["reason"] == "GPUHealthCordoned" for e in pool.events(pool.name(3)))
        with fleet.lock:
            del fleet.xids[pool.name(3)]
        # XID 79 is reset-class: quiet metrics alone do not release it (issue 13) ...
        for _ in range(4):
            time.sleep(PERIOD)
            rec.once()
        assert cordoned(pool) == {pool.name(3)}
        boot(kube_stack, pool.name(3), "boot-after-reset")  # ... the node's reboot (a new bootID) does
        loops_until(rec, lambda: cordoned(pool) == set(), 8)
        assert TAINT_KEY not in [t["key"] for t in pool.get(pool.name(3))["spec"].get("taints") or []]


def test_presence_query_on_the_real_prometheus(tmp_path: Path, kube_stack: Stack) -> None:
    """Issue 33: one query names every node (GPUs reporting; 0 when the exporter answers without a
    GPU; -1 when its scrape fails), in the shape that is read sample by sample: an answer that did
    not change costs no decoding, and a change costs its own samples."""
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        names = [pool.name(i) for i in range(NODES)]
        source = PrometheusSource(prom.url, timeout=2)
        with fleet.lock:
            fleet.gpus.update({names[1]: 6, names[2]: 0})
            fleet.broken.add(names[3])

        def settled() -> bool:
            seen = source.observe(names)
            return seen[names[1]].gpus_reporting == 6 and seen[names[2]].gpus_reporting == 0 \
                and EXPORTER_SIGNAL in seen[names[3]].unknown_signals

        assert wait_for(settled, 20), source.observe(names)
        seen = source.observe(names)
        assert seen[names[3]].gpus_reporting is None
        assert all(seen[n].gpus_reporting == 8 and seen[n].unknown_signals == () for n in names[4:])
        assert source.presence.reader.split  # the real answer has the shape answers.py splits
        time.sleep(2)  # two scrapes later: the same values, a later time
        source.observe(names)
        assert source.presence.reader.split and source.presence.reader.decoded == 0
        with fleet.lock:
            fleet.gpus[names[5]] = 7
        assert wait_for(lambda: source.observe(names)[names[5]].gpus_reporting == 7, 20)
        source.observe(names)
        assert source.presence.reader.decoded == 0
        with fleet.lock:
            fleet.gpus[names[6]] = 5
        assert wait_for(lambda: source.observe(names)[names[6]].gpus_reporting == 5
                        and source.presence.reader.decoded == 1, 20)


def test_sixty_percent_failing_trips_the_breaker(tmp_path: Path, kube_stack: Stack) -> None:
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        rec = reconciler(kube_stack, prom, pool, Policy(max_unhealthy_percent=50))
        with fleet.lock:
            for i in range(6):
                fleet.xids[pool.name(i)] = (0, 79)
        loops_until(rec, lambda: "h100" in rec.breaker.load(), 3)
        assert cordoned(pool) == set()
        with fleet.lock:
            fleet.xids = {pool.name(9): (1, 48)}
        for _ in range(2):  # tripped: holds even for a single new fault
            time.sleep(PERIOD)
            rec.once()
        assert cordoned(pool) == set()
        rec.reset_breaker()
        loops_until(rec, lambda: cordoned(pool) == {pool.name(9)}, 2)


def test_prometheus_stopped_mid_run_causes_no_action(tmp_path: Path, kube_stack: Stack) -> None:
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        who = reconciler_identity(kube_stack)
        rec = reconciler(kube_stack, prom, pool, Policy(healthy_checks_to_release=1, cooldown_seconds=0), who=who)
        with fleet.lock:
            fleet.xids[pool.name(2)] = (1, 79)
        loops_until(rec, lambda: cordoned(pool) == {pool.name(2)}, 2)
        with fleet.lock:
            fleet.xids.clear()  # the node is fine now, but nobody can tell:
        prom.stop()

        def node_writes() -> int:  # to the Node itself; its status carries only the condition
            return len([e for e in kube_stack.audit() if (e.get("objectRef") or {}).get("resource") == "nodes"
                        and e.get("verb") == "patch" and not e["objectRef"].get("subresource")])

        before = node_writes()
        for loop in range(3):
            decision = rec.once()
            assert decision is not None
            assert [a for a in decision.actions if not isinstance(a, SetCondition)] == []
            # The first loop says so on every node (GPUHealthy Unknown, or False for the held
            # one); the next ones have nothing new to say.
            assert len(decision.actions) == (NODES if loop == 0 else 0)
        assert cordoned(pool) == {pool.name(2)}
        assert node_writes() == before
        assert condition(kube_stack, pool.name(5)) == ("Unknown", "GPUHealthUnknown")
        assert condition(kube_stack, pool.name(2)) == ("False", "CordonedByHealthReconciler")


def condition(stack: Stack, node: str) -> tuple[str, str]:
    """Status and reason of the node's GPUHealthy condition."""
    from kubernetes import client

    found = client.CoreV1Api(stack.client()).read_node(node).status.conditions or []
    (mine,) = [c for c in found if c.type == CONDITION_TYPE]
    return mine.status, mine.reason


def test_a_failing_query_makes_only_its_signal_unknown(tmp_path: Path, kube_stack: Stack) -> None:
    """Issue 13: one failed query made every node unknown. Here the real Prometheus refuses every
    query that would hold more than 40 samples at once (its own `--query.max-samples`, HTTP 422):
    the 80-series instant queries (presence, which counts the GPU series; health status) at
    once, the range queries (ecc_dbe's increase over 10m, thermal's max_over_time) once a series
    has 40 scrapes; the XID query (one series) still answers. An XID 48 still cordons, the Unknown
    condition names the refused signals (presence's are `exporter` and `gpu_count`), and a node
    with unknown signals is never released, though it rebooted."""
    with simulated(tmp_path, kube_stack, flags=("--query.max-samples=40",)) as (fleet, prom, pool):
        assert wait_for(lambda: _refused(prom, "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])"), 90)
        rec = reconciler(kube_stack, prom, pool, Policy(healthy_checks_to_release=1, cooldown_seconds=0))
        with fleet.lock:
            fleet.xids[pool.name(4)] = (2, 48)  # double-bit ECC XID: a reset-class fault
        loops_until(rec, lambda: cordoned(pool) == {pool.name(4)}, 2)
        assert condition(kube_stack, pool.name(0)) == ("Unknown", "GPUHealthUnknown")
        from kubernetes import client

        message = [c for c in client.CoreV1Api(kube_stack.client()).read_node(pool.name(0)).status.conditions
                   if c.type == CONDITION_TYPE][0].message
        prefix, _, names = message.partition(": ")
        assert prefix == "unknown or still settling" and {"ecc_dbe", "thermal", "gpu_count", "exporter",
                                                          "health_fail"} <= set(names.split(", ")), message
        assert "xid" not in names.split(", "), message
        with fleet.lock:
            fleet.xids.clear()
        boot(kube_stack, pool.name(4), "rebooted")  # the reset happened; only the unknowns hold it
        for _ in range(3):
            time.sleep(PERIOD)
            decision = rec.once()
            assert decision is not None and not [a for a in decision.actions if isinstance(a, Release)]
        assert cordoned(pool) == {pool.name(4)}


def _refused(prom: PrometheusServer, expr: str) -> bool:
    try:
        PrometheusSource(prom.url, timeout=2).query(expr)
    except SourceError as exc:
        return "too many samples" in str(exc)
    return False


def test_two_replicas_never_both_write(tmp_path: Path, kube_stack: Stack) -> None:
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        who = {name: reconciler_identity(kube_stack) for name in ("replica-a", "replica-b")}
        replicas = [reconciler(kube_stack, prom, pool, Policy(), name, who[name]) for name in who]
        stop = threading.Event()
        threads = [threading.Thread(target=r.run, args=(0.3, stop)) for r in replicas]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        with fleet.lock:
            fleet.xids[pool.name(4)] = (2, 79)
        wait_for(lambda: cordoned(pool) == {pool.name(4)}, 15)
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        assert cordoned(pool) == {pool.name(4)}
        credentials = {credential_id(i): name for name, i in who.items()}
        node_writers = {credentials[c] for c in writers(kube_stack, set(credentials))}
        assert len(node_writers) == 1, node_writers
        from kubernetes import client

        lease = client.CoordinationV1Api(kube_stack.client()).read_namespaced_lease("fleetgen-health", NAMESPACE)
        assert lease.spec.holder_identity in node_writers


def test_health_cli_once_status_and_reset(tmp_path: Path, kube_stack: Stack) -> None:
    from tests.conftest import REPO, run

    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        policy = write_policy(tmp_path / "policy.json", prom.url, 1, pool, healthyChecksToRelease=2,
                              cooldownSeconds=0)
        kubeconfig = str(reconciler_identity(kube_stack).kubeconfig)
        conn = ["--config", str(policy), "--kubeconfig", kubeconfig]
        with fleet.lock:
            fleet.xids[pool.name(7)] = (4, 79)
        time.sleep(2)
        observer = reconciler_identity(kube_stack)  # a credential of its own: its writes are its alone
        dry = run(REPO, "health", "once", "--dry-run", "--config", str(policy), "--kubeconfig",
                  str(observer.kubeconfig))
        assert dry.code == 0 and "would Cordon" in dry.out and cordoned(pool) == set()
        # Nothing written, not even the Lease (issue 13: a dry run used to take leadership).
        assert writers(kube_stack, {credential_id(observer)}, ("nodes", "events", "leases", "configmaps")) == set()
        once = run(REPO, "health", "once", *conn)
        assert once.code == 0 and "Cordon" in once.out and cordoned(pool) == {pool.name(7)}
        status = run(REPO, "health", "status", *conn)
        assert "breaker: ok" in status.out and "1 of 10 GPU nodes cordoned" in status.out
        assert f"{pool.name(7)} [h100]: xid-79" in status.out
        # With drain on (as prod-west has it) status raised TypeError (issue 29: found by mypy).
        document = json.loads(policy.read_text())
        drained = tmp_path / "drain-policy.json"
        drained.write_text(json.dumps({**document, "drain": {"enabled": True, "maxPercent": 10}}))
        status = run(REPO, "health", "status", "--config", str(drained), "--kubeconfig", kubeconfig)
        assert status.code == 0, status.err
        assert "drain breaker ok" in status.out and "1 of 10 GPU nodes cordoned" in status.out
        reset = run(REPO, "health", "reset-breaker", *conn)
        assert reset.code == 0 and "breaker reset (was not tripped)" in reset.out
        missing = run(REPO, "health", "once", "--kubeconfig", kubeconfig)
        assert missing.code == 2 and "give --config FILE" in missing.err


SKEW = {"a": "-20s", "b": "+20s"}
"""Wall-clock offsets of the two processes (libfaketime): 40 s apart, longer than a Lease."""


FAKETIME_LIBRARY = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
"""Debian's libfaketime (multi-threaded variant), preloaded straight into the process: the
`faketime` wrapper forks, so terminating it would leave the replica running."""


def faketime(offset: str) -> dict[str, str]:
    """Environment that runs a process with its wall clock `offset` away; the monotonic clock is
    left alone, as a skewed node's would be."""
    if not FAKETIME_LIBRARY.is_file():
        skip_or_fail("libfaketime is not installed: apt-get install -y faketime")
    return {"LD_PRELOAD": str(FAKETIME_LIBRARY), "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1"}


def health_run(policy: Path, who: Identity, replica: str, port: int, skew: str | None = None,
               log: Path | None = None) -> subprocess.Popen[bytes]:
    """A real `fleetgen health run` process, as one of the Deployment's replicas."""
    command = [sys.executable, "-m", "generator", "health", "run", "--config", str(policy), "--kubeconfig",
               str(who.kubeconfig), f"--listen=127.0.0.1:{port}"]
    env = {**os.environ, "POD_NAME": f"replica-{replica}"}
    if skew:
        env.update(faketime(skew))
    out = log.open("wb") if log else subprocess.DEVNULL
    return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:  # not listening yet
        return 0, str(exc)


@pytest.mark.parametrize("skewed", [False, True], ids=["same-clock", "clocks-40s-apart"])
def test_two_reconciler_processes_never_both_write(tmp_path: Path, kube_stack: Stack, skewed: bool) -> None:
    """Two real `fleetgen health run` processes (as the Deployment's two replicas) share one Lease;
    with their wall clocks 40 s apart (issue 13: a replica 20 s ahead took a freshly renewed Lease)
    still only one of them ever writes."""
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        policy = write_policy(tmp_path / "policy.json", prom.url, 0.5, pool)
        procs, ports, credentials = [], [], {}
        for replica in ("a", "b"):
            port = free_port()
            ports.append(port)
            who = reconciler_identity(kube_stack)
            credentials[credential_id(who)] = f"replica-{replica}"
            procs.append(health_run(policy, who, replica, port, SKEW[replica] if skewed else None,
                                    tmp_path / f"replica-{replica}.log"))
        try:
            time.sleep(3)
            with fleet.lock:
                fleet.xids[pool.name(5)] = (6, 48)
            wait_for(lambda: cordoned(pool) == {pool.name(5)}, 20, step=0.3)
            time.sleep(3)  # both keep looping, renewing and checking; the follower must keep its hands off
            leaders = ["fleetgen_health_leader 1.0" in scrape(port)[1] for port in ports]
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=15)
        assert cordoned(pool) == {pool.name(5)}
        node_writers = {credentials[c] for c in writers(kube_stack, set(credentials))}
        assert len(node_writers) == 1, node_writers
        lease_writers = {credentials[c] for c in writers(kube_stack, set(credentials), ("leases",))}
        assert lease_writers == node_writers, "the follower never took the Lease from a live leader"
        assert sorted(leaders) == [False, True]
        if skewed:  # the skew was real: the holder wrote renewTime on its own, offset clock
            from kubernetes import client

            from generator.reconciler.lease import _seconds

            lease = client.CoordinationV1Api(kube_stack.client()).read_namespaced_lease("fleetgen-health", NAMESPACE)
            offset = _seconds(lease.spec.renew_time) - time.time()
            assert (offset > 10) if lease.spec.holder_identity == "replica-b" else (offset < -10), offset
        agents = {e["userAgent"] for e in kube_stack.audit()
                  if set(((e.get("user") or {}).get("extra") or {}).get(
                      "authentication.kubernetes.io/credential-id", [])) & set(credentials)}
        assert {a.split("(")[-1].rstrip(")") for a in agents} <= {"replica-a", "replica-b"}, agents


def test_a_replica_stuck_in_its_loop_fails_its_liveness_probe(tmp_path: Path, kube_stack: Stack) -> None:
    """Issue 13: /healthz was always 200. A Prometheus that accepts connections and never answers
    holds the loop for the source timeout (10 s); with a 0.5 s period /healthz says 503 within
    5 periods, so the kubelet restarts the pod."""
    import socket

    pool = Pool(kube_stack)
    pool.add(1)
    reset_leadership(kube_stack)
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)  # connections are queued, never accepted: every query hangs
        policy = write_policy(tmp_path / "policy.json", f"http://127.0.0.1:{hole.getsockname()[1]}", 0.5, pool)
        port = free_port()
        proc = health_run(policy, reconciler_identity(kube_stack), "a", port, log=tmp_path / "replica.log")
        try:
            assert wait_for(lambda: scrape(port, "/healthz")[0] == 200, 10, step=0.1), (
                (tmp_path / "replica.log").read_text())
            answers: list[tuple[int, str]] = []
            assert wait_for(lambda: answers.append(scrape(port, "/healthz")) or answers[-1][0] == 503, 8, step=0.2)
            assert "no reconcile loop completed" in answers[-1][1]
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def test_health_run_counts_a_node_it_cannot_read_and_decides_the_others(tmp_path: Path, kube_stack: Stack) -> None:
    """A real `fleetgen health run` reaches the real API server through tests/faultproxy.py, which
    makes one Node the wrong shape in every node list (and holds the watch unanswered), with an XID 79
    on that Node and on another. Its loops do not fail; /metrics says
    `fleetgen_health_nodes_unreadable 1.0`; its log names the Node and the field; the other Node is
    cordoned on the real server and the unreadable one is left alone. Before, every loop failed."""
    with simulated(tmp_path, kube_stack) as (fleet, prom, pool):
        proxy = FaultProxy(kube_stack.server, kube_stack.workdir / "ca.crt")
        proxy.serve()
        proxy.add("GET", r"/api/v1/nodes\?.*watch=true", HANG)
        proxy.add("GET", r"/api/v1/nodes\?", 200, edit=misshapen(pool.name(0)))
        fleet.xids[pool.name(0)] = (0, 79)
        fleet.xids[pool.name(1)] = (0, 79)
        policy = write_policy(tmp_path / "policy.json", prom.url, PERIOD, pool)
        port, log = free_port(), tmp_path / "replica.log"
        command = [sys.executable, "-m", "generator", "health", "run", "--config", str(policy), "--server",
                   proxy.url, "--token", token_of(reconciler_identity(kube_stack)), f"--listen=127.0.0.1:{port}"]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, env={**os.environ, "POD_NAME": "replica-a"}, stdout=out,
                                    stderr=subprocess.STDOUT)
        try:
            assert wait_for(lambda: cordoned(pool) == {pool.name(1)}, 30, step=0.2), log.read_text()
            assert wait_for(lambda: "fleetgen_health_nodes_unreadable 1.0" in scrape(port)[1], 10, step=0.2)
            text = log.read_text()
            assert f'"{pool.name(0)}": "status.conditions is a string, not a list"' in text, text
            assert '"unreadableNodes": 1' in text and '"loop": "failed"' not in text and "Traceback" not in text
            assert cordoned(pool) == {pool.name(1)}
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            proxy.shutdown()
