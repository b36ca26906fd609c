"""The GPU health reconciler's deployment, from the cluster's `health:` block.

Least privilege: nodes get/list/watch/patch cluster-wide; Events only in `default` (where
Events about Nodes must be); its own Lease and breaker ConfigMap by name. Two replicas, one
active (Lease), non-root with a read-only root file system, probes on /healthz, metrics scraped
by a ServiceMonitor, alerts on its own metrics.
"""

from __future__ import annotations

import json
from typing import Any

from generator.compile import podnetwork
from generator.compile.manifest import ARGOCD_CRD_IN_SAME_SYNC, Manifest, labels, own_image
from generator.compile.monitoring import KERNEL_LOG_TENANT, LOKI_POD, LOKI_PORT, LOKI_READ, PROMETHEUS_POD
from generator.compile.rules import alert
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.durations import seconds

FOLDER = ("health",)
NAME = "fleetgen-health"
LEASE = NAME
"""The reconciler's Lease (leader election), in its namespace."""
BREAKER = f"{NAME}-breaker"
"""The ConfigMap holding every pool's circuit breaker, in its namespace."""
EVENTS_NAMESPACE = "default"
"""Where Events about Nodes go: the only namespace the API server accepts them in."""
EVENTS_ROLE = f"{NAME}-events"
PORT = 8080
PROMETHEUS_PORT = 9090
"""Port of Prometheus' pods and of its Service (kube-prometheus-stack)."""


def policy_document(cfg: ClusterConfig) -> dict[str, Any]:
    """What the reconciler reads at start (ConfigMap `fleetgen-health`, key policy.json)."""
    health, mon = cfg.health, cfg.monitoring
    return {
        "cluster": cfg.name,
        "dryRun": health.dry_run,
        "periodSeconds": seconds(health.period),
        "prometheusUrl": health.prometheus_url or
        f"http://kube-prometheus-stack-prometheus.{mon.namespace}.svc:{PROMETHEUS_PORT}",
        "lokiUrl": health.loki_url or LOKI_READ.format(namespace=mon.namespace),
        "lokiTenant": KERNEL_LOG_TENANT,
        "namespace": health.namespace,
        "policy": {"healthyChecksToRelease": health.healthy_checks_to_release,
                   "cooldownSeconds": seconds(health.cooldown), "flapCount": health.flap_count,
                   "flapWindowSeconds": seconds(health.flap_window),
                   "maxUnhealthyPercent": health.max_unhealthy_percent,
                   "cordonsPerLoop": health.cordons_per_loop},
        "drain": {"enabled": health.drain.enabled, "maxPercent": health.drain.max_percent,
                  "evictionsPerLoop": health.drain.evictions_per_loop,
                  "gracePeriodSeconds": int(seconds(health.drain.grace_period)) if health.drain.grace_period
                  else None},
        "pools": [{"name": p.name, "labels": dict(sorted(p.node_labels.items()))} for p in cfg.node_pools],
    }


GPU_NODE_LABEL = "nvidia.com/gpu.product"
"""Set on every GPU node by GPU Feature Discovery (the GPU operator)."""


STALL_PERIODS = 5
"""A replica that completes no loop for this many periods fails /healthz (and is restarted), and
the FleetgenHealthLoopStalled alert fires: stuck in a call that never returns, or failing every loop."""
RECONCILER = f'{{job="{NAME}"}}'
"""The ServiceMonitor scrapes the Service `fleetgen-health`: its series carry job="fleetgen-health"."""
RUNBOOK = "docs/how-to/health.md: `fleetgen health status` shows each pool and every held node."


def reconciler_rules(stall_seconds: float) -> list[dict[str, Any]]:
    """Alerts on the reconciler's own metrics: a stalled or failing loop, no leader, a tripped
    breaker, writes given up. `stall_seconds` matches the replicas' liveness threshold."""
    def own(name: str, expr: str, for_: str, severity: str, summary: str) -> dict[str, Any]:
        return alert(name, expr, for_, severity, "none", "reconciler", summary, RUNBOOK)

    metric = "fleetgen_health_"
    return [
        own("FleetgenHealthLoopStalled",
            f"time() - {metric}last_loop_completed_timestamp_seconds{RECONCILER} > {stall_seconds:g}", "2m",
            "critical", "health reconciler {{ $labels.pod }} has completed no loop for {{ $value }} seconds"),
        own("FleetgenHealthLoopsFailing", f"increase({metric}loop_failures_total{RECONCILER}[10m]) > 0", "10m",
            "warning", "health reconciler {{ $labels.pod }}: reconcile loops keep failing (see its log)"),
        own("FleetgenHealthNoLeader", f"(sum({metric}leader{RECONCILER}) or vector(0)) < 1", "5m", "critical",
            "no health reconciler replica holds the Lease: faulty GPU nodes are not being cordoned"),
        own("FleetgenHealthBreakerTripped", f"max by (pool) ({metric}breaker_tripped{RECONCILER}) == 1", "0m",
            "critical", "circuit breaker of pool {{ $labels.pool }} tripped: nothing in it is cordoned or "
                        "released until `fleetgen health reset-breaker --pool {{ $labels.pool }}`"),
        own("FleetgenHealthDrainBreakerTripped", f"max by (pool) ({metric}drain_breaker_tripped{RECONCILER}) == 1",
            "0m", "warning", "drain breaker of pool {{ $labels.pool }} tripped: no pod there is evicted until "
                             "`fleetgen health reset-breaker --drain --pool {{ $labels.pool }}`"),
        own("FleetgenHealthWritesFailing",
            f"sum by (pod) (increase({metric}write_failures_total{RECONCILER}[15m])) > 0", "0m", "warning",
            "health reconciler {{ $labels.pod }} gave up node or Event writes in the last 15m"),
    ]


def network_policy(cfg: ClusterConfig, meta: dict[str, Any], pods: dict[str, str]) -> dict[str, Any]:
    """In: only Prometheus, to the metrics port. Out: DNS, the API server, Prometheus and Loki (their
    pods' ports, or what the cluster file's URLs name)."""
    health, mon = cfg.health, cfg.monitoring.namespace
    prometheus = podnetwork.in_namespace(mon, PROMETHEUS_POD)
    egress = [podnetwork.dns_rule(), podnetwork.api_server_rule(),
              podnetwork.url_rule(health.prometheus_url) if health.prometheus_url
              else {"to": [prometheus], "ports": podnetwork.tcp(PROMETHEUS_PORT)},
              podnetwork.url_rule(health.loki_url) if health.loki_url
              else {"to": [podnetwork.in_namespace(mon, LOKI_POD)], "ports": podnetwork.tcp(LOKI_PORT)}]
    return podnetwork.policy(NAME, health.namespace, meta, pods,
                             [{"from": [prometheus], "ports": podnetwork.tcp(PORT)}], egress)


def compile_health(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Namespace, RBAC, policy ConfigMap, Deployment, Service and ServiceMonitor."""
    cfg = cluster.config
    if not (cfg.health.enabled and cfg.monitoring.enabled):
        return []
    ns, src = cfg.health.namespace, cluster.at("health")
    app = {"app.kubernetes.io/name": NAME}
    meta = {"labels": {**labels(cfg.name), **app}}
    image = own_image(cfg, "health-reconciler")
    rbac = "rbac.authorization.k8s.io"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels(cfg.name)}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, **meta}},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": NAME, **meta},
         # nodes/status carries the GPUHealthy condition (patch only: the kubelet owns the rest).
         # Pods and evictions only when the cluster file turns drain on.
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                   {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                   *([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                      {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
                     if cfg.health.drain.enabled else [])]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME, **meta},
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": NAME, "namespace": ns, **meta},
         # RBAC cannot name the object of a create, so create stands alone; every other verb is
         # held to the reconciler's own Lease and breaker ConfigMap (not its policy: that is
         # mounted, never read through the API, so it cannot rewrite its own limits).
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
                    "verbs": ["get", "update"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [BREAKER],
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": NAME, "namespace": ns, **meta},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]},
        # Events about a Node (cluster-scoped) must live in `default`: the API server refuses them
        # anywhere else (k8s v1.36.3 pkg/apis/core/validation/events.go:146-150). So Events are
        # allowed there and nowhere else; patch updates a repeated warning's count.
        {"apiVersion": f"{rbac}/v1", "kind": "Role",
         "metadata": {"name": EVENTS_ROLE, "namespace": EVENTS_NAMESPACE, **meta},
         "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
         "metadata": {"name": EVENTS_ROLE, "namespace": EVENTS_NAMESPACE, **meta},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": EVENTS_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": ns, **meta},
         "data": {"policy.json": json.dumps(policy_document(cfg), indent=2, sort_keys=True) + "\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME, "namespace": ns, **meta},
         "spec": {"replicas": 2, "selector": {"matchLabels": app},
                  "template": {"metadata": {"labels": app}, "spec": {
                      "serviceAccountName": NAME,
                      # It guards the GPU nodes, so it must outlive what it guards: critical priority,
                      # replicas on different nodes, and preferably off GPU nodes (a drained or
                      # faulty GPU node must not take the reconciler with it).
                      "priorityClassName": "system-cluster-critical",
                      "affinity": {
                          "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                              "weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": app},
                                                                 "topologyKey": "kubernetes.io/hostname"}}]},
                          "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                              "weight": 50, "preference": {"matchExpressions": [
                                  {"key": GPU_NODE_LABEL, "operator": "DoesNotExist"}]}}]}},
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile":
                                          {"type": "RuntimeDefault"}},
                      "containers": [{
                          "name": "reconciler", "image": image,
                          "args": ["health", "run", "--config", "/etc/fleetgen/policy.json", "--in-cluster",
                                   f"--listen=:{PORT}"],
                          "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                          "ports": [{"name": "metrics", "containerPort": PORT}],
                          "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                                            "periodSeconds": 20},
                          "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                                             "periodSeconds": 10},
                          "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                        "limits": {"memory": "512Mi"}},
                          "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                              "capabilities": {"drop": ["ALL"]}},
                          "volumeMounts": [{"name": "policy", "mountPath": "/etc/fleetgen", "readOnly": True}]}],
                      "volumes": [{"name": "policy", "configMap": {"name": NAME}}]}}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": NAME, "namespace": ns, **meta},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": app}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "namespace": ns, **meta},
         "spec": {"selector": app, "ports": [{"name": "metrics", "port": PORT, "targetPort": "metrics"}]}},
        network_policy(cfg, meta, app),
    ]
    monitor: dict[str, Any] = {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": NAME, "namespace": ns, **meta},
        "spec": {"selector": {"matchLabels": app}, "endpoints": [{"port": "metrics", "interval": "30s"}]}}
    stall = STALL_PERIODS * seconds(cfg.health.period)
    rule: dict[str, Any] = {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": NAME, "namespace": ns, **meta},
        "spec": {"groups": [{"name": "fleetgen-health", "rules": reconciler_rules(stall)}]}}
    for custom in (monitor, rule):  # CRDs from the monitoring chart, in the same sync
        if cfg.gitops.engine == "argocd":
            custom["metadata"]["annotations"] = dict(ARGOCD_CRD_IN_SAME_SYNC)
        objects.append(custom)
    return [Manifest(FOLDER, body, src) for body in objects]
