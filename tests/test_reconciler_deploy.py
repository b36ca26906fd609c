"""The reconciler's rendered deployment and its operations endpoints."""

from __future__ import annotations

import json
import urllib.request

import yaml

from generator.reconciler.model import Breaker, Cordon, Decision, Evidence, NodeState
from generator.reconciler.serve import Metrics, serve
from tests.conftest import REPO
from tests.upstream.processes import free_port


def load(rel: str) -> dict:
    return yaml.safe_load((REPO / "rendered" / rel).read_text())


def test_least_privilege_and_hardened_deployment() -> None:
    role = load("prod-east/health/clusterrole-fleetgen-health.yaml")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                             # patch: a repeated warning updates its Event's count
                             {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]
    local = load("prod-east/health/role-fleetgen-health.yaml")
    assert local["metadata"]["namespace"] == "fleetgen-system"
    assert {r["resources"][0] for r in local["rules"]} == {"leases", "configmaps"}
    deploy = load("prod-east/health/deployment-fleetgen-health.yaml")
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2 and spec["securityContext"]["runAsNonRoot"] is True
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["image"] == "ghcr.io/acme/fleetgen:0.1.0"
    assert container["args"][:2] == ["health", "run"]
    # issue 13: it must survive what it guards.
    assert spec["priorityClassName"] == "system-cluster-critical"
    spread = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"] == {
        "matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"}]}
    pdb = load("prod-east/health/poddisruptionbudget-fleetgen-health.yaml")
    assert pdb["spec"] == {"minAvailable": 1,
                           "selector": {"matchLabels": {"app.kubernetes.io/name": "fleetgen-health"}}}
    monitor = load("prod-east/health/servicemonitor-fleetgen-health.yaml")
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "interval": "30s"}]


def test_policy_comes_from_the_cluster_file() -> None:
    cm = load("prod-east/health/configmap-fleetgen-health.yaml")
    policy = json.loads(cm["data"]["policy.json"])
    assert policy["policy"] == {"healthyChecksToRelease": 3, "cooldownSeconds": 900.0, "flapCount": 3,
                                "flapWindowSeconds": 86400.0, "maxUnhealthyPercent": 50.0}
    assert policy["prometheusUrl"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert policy["pools"] == [{"name": "h100", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}]
    assert policy["periodSeconds"] == 30.0 and policy["dryRun"] is False


def test_metrics_and_healthz() -> None:
    metrics = Metrics()
    port = free_port()
    server = serve(metrics, "127.0.0.1", port)
    try:
        nodes = {"a": NodeState("a", "h100", unschedulable=True, owned=True, reason="xid-79")}
        cordon = Cordon("a", "xid-79", (Evidence("xid-79", "cordon"),), (1.0,), False)
        metrics.record(Decision((cordon,), Breaker(True, "too many", 1.0), ("x: health unknown, nothing done",)),
                       nodes, 0.25)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'fleetgen_health_nodes_cordoned{reason="xid-79"} 1.0' in text
        assert "fleetgen_health_breaker_tripped 1.0" in text and "fleetgen_health_leader 1.0" in text
        assert "fleetgen_health_cordons_total 1.0" in text and "fleetgen_health_source_errors_total 1.0" in text
        assert "fleetgen_health_loop_seconds_count 1.0" in text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200
    finally:
        server.shutdown()
