"""The reconciler's rendered deployment and its operations endpoints."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from generator import __version__
from generator.reconciler.model import Breaker, Cordon, Decision, Evidence, NodeState
from generator.reconciler.serve import Metrics, serve
from tests.conftest import REPO
from tests.upstream.processes import free_port


def load(rel: str) -> dict:
    return yaml.safe_load((REPO / "rendered" / rel).read_text())


def test_least_privilege_and_hardened_deployment() -> None:
    role = load("prod-east/health/clusterrole-fleetgen-health.yaml")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                             {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    local = load("prod-east/health/role-fleetgen-health.yaml")
    assert local["metadata"]["namespace"] == "fleetgen-system"
    assert {r["resources"][0] for r in local["rules"]} == {"leases", "configmaps"}
    events = load("prod-east/health/role-fleetgen-health-events.yaml")
    assert events["metadata"]["namespace"] == "default" and events["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]
    deploy = load("prod-east/health/deployment-fleetgen-health.yaml")
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2 and spec["securityContext"]["runAsNonRoot"] is True
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["image"] == f"ghcr.io/acme/fleetgen:{__version__}"  # prod-east: images.registry ghcr.io/acme
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


def test_the_image_dockerfile_passes_buildkits_own_checks(upstream_tools: None, tmp_path: Path) -> None:
    """Issue 13: nothing built the reconciler's image. The Dockerfile is checked by BuildKit's
    DockerfileLint (what `docker build --check` runs) at the pinned version, which must also catch
    a broken one; and it runs what the Deployment expects: the fleetgen entrypoint, its user, its port."""
    from tests.upstream import tools

    lint = str(tools.binary("dockerfile-lint"))
    dockerfiles = [REPO / "Dockerfile", *sorted(REPO.glob("images/*/Dockerfile"))]
    assert len(dockerfiles) == 2
    proc = subprocess.run([lint, *map(str, dockerfiles)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11-slim as Build\nENV A=$UNSET\nENTRYPOINT fleetgen\n")
    proc = subprocess.run([lint, str(bad)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert [line.split(": ")[1] for line in proc.stdout.splitlines()] == [
        "StageNameCasing", "FromAsCasing", "UndefinedVar", "JSONArgsRecommended"]
    text = (REPO / "Dockerfile").read_text()
    deploy = load("prod-east/health/deployment-fleetgen-health.yaml")["spec"]["template"]["spec"]
    (container,) = deploy["containers"]
    assert 'ENTRYPOINT ["fleetgen"]' in text and container["args"][:2] == ["health", "run"] and \
        "command" not in container
    assert f"USER {deploy['securityContext']['runAsUser']}:" in text
    assert f"EXPOSE {container['ports'][0]['containerPort']}" in text


def test_policy_comes_from_the_cluster_file() -> None:
    cm = load("prod-east/health/configmap-fleetgen-health.yaml")
    policy = json.loads(cm["data"]["policy.json"])
    assert policy["policy"] == {"healthyChecksToRelease": 3, "cooldownSeconds": 900.0, "flapCount": 3,
                                "flapWindowSeconds": 86400.0, "maxUnhealthyPercent": 50.0, "cordonsPerLoop": 5}
    assert policy["prometheusUrl"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert policy["pools"] == [{"name": "h100", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}]
    assert policy["periodSeconds"] == 30.0 and policy["dryRun"] is False


def test_metrics_and_healthz() -> None:
    clock = [100.0]
    metrics = Metrics(["h100", "a100"], period=2.0, monotonic=lambda: clock[0])
    port = free_port()
    server = serve(metrics, "127.0.0.1", port)

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        nodes = {"a": NodeState("a", "h100", unschedulable=True, owned=True, reason="xid-79")}
        cordon = Cordon("a", "xid-79", (Evidence("xid-79", "cordon"),), (1.0,), False)
        metrics.record(Decision((cordon,), {"h100": Breaker(True, "too many", 1.0)},
                                ("x: health unknown, nothing done",)), nodes, 0.25, write_failures=2)
        code, text = get("/metrics")
        assert 'fleetgen_health_nodes_cordoned{reason="xid-79"} 1.0' in text
        assert 'fleetgen_health_breaker_tripped{pool="h100"} 1.0' in text
        assert 'fleetgen_health_breaker_tripped{pool="a100"} 0.0' in text and "fleetgen_health_leader 1.0" in text
        assert "fleetgen_health_cordons_total 1.0" in text and "fleetgen_health_source_errors_total 1.0" in text
        assert "fleetgen_health_loop_seconds_count 1.0" in text and "fleetgen_health_write_failures_total 2.0" in text
        assert "fleetgen_health_last_loop_completed_timestamp_seconds" in text
        assert get("/healthz")[0] == 200
        # Issue 13: /healthz was always 200. Loops that fail, or no loop at all, for 5 periods: 503.
        clock[0] += 9
        metrics.record(None, {}, 9.0, failed=True)
        assert get("/healthz")[0] == 200
        clock[0] += 2
        code, text = get("/healthz")
        assert code == 503 and "no reconcile loop completed" in text
        assert "fleetgen_health_loop_failures_total 1.0" in get("/metrics")[1]
        metrics.record(None, {}, 0.1)  # a follower's loop completes too
        assert get("/healthz")[0] == 200
    finally:
        server.shutdown()


def test_journald_clusters_run_a_collector_that_has_journalctl() -> None:
    """Issue 14: the journald receiver runs `journalctl`, but the pinned collector image is built
    FROM scratch. Clusters reading the journal get images/otelcol-journald (the same collector
    binary on a base with journalctl); the others keep the upstream image."""
    import re

    from generator import __version__
    from generator.versions import lock

    pins = lock()
    dockerfile = (REPO / "images/otelcol-journald/Dockerfile").read_text()
    default = re.search(r"^ARG OTELCOL_VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert default and default.group(1) == pins["otel-collector"].version
    digest = re.search(r"^ARG OTELCOL_DIGEST=(\S+)$", dockerfile, re.MULTILINE)  # issue 52: the binary by digest
    assert digest and digest.group(1) == pins["otel-collector"].digest
    assert ":${OTELCOL_VERSION}@${OTELCOL_DIGEST} AS otelcol" in dockerfile
    assert "systemd" in dockerfile and 'ENTRYPOINT ["/otelcol-contrib"]' in dockerfile
    own = f"ghcr.io/acme/{pins['otel-collector-journald'].image}:{__version__}"  # prod-west's images.registry
    upstream = f"{pins['otel-collector'].image}:{pins['otel-collector'].version}@{pins['otel-collector'].digest}"
    for cluster, image in (("prod-west", own), ("prod-east", upstream)):
        ds = load(f"{cluster}/monitoring/daemonset-fleetgen-kernel-log.yaml")
        (container,) = ds["spec"]["template"]["spec"]["containers"]
        assert container["image"] == image, cluster
