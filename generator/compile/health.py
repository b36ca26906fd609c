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


RBAC = "rbac.authorization.k8s.io"


def compile_health(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Namespace, RBAC, policy ConfigMap, Deployment, Service and ServiceMonitor."""
    cfg = cluster.config
    if not (cfg.health.enabled and cfg.monitoring.enabled):
        return []
    roles = [_node_role(cfg), _own_objects_role(cfg), _events_role(cfg)]
    bodies = [_namespace(cfg), _service_account(cfg), *(body for role in roles for body in (role, _binding(cfg, role))),
              _policy(cfg), _deployment(cfg), _disruption_budget(cfg), _service(cfg),
              network_policy(cfg, {"labels": _labels(cfg)}, _selector()), _service_monitor(cfg), _alert_rules(cfg)]
    src = cluster.at("health")
    return [Manifest(FOLDER, body, src) for body in bodies]


def _selector() -> dict[str, str]:
    """The label of the reconciler's pods, and of everything fleetgen makes for it."""
    return {"app.kubernetes.io/name": NAME}


def _labels(cfg: ClusterConfig) -> dict[str, str]:
    """The cluster's fleetgen labels and the reconciler's own."""
    return {**labels(cfg.name), **_selector()}


def _meta(cfg: ClusterConfig, namespace: str | None, name: str = NAME, custom: bool = False) -> dict[str, Any]:
    """Name, namespace (None: cluster-scoped) and labels; on a custom resource of the monitoring
    chart's CRDs, the annotation that lets Argo CD apply it in the sync that installs them."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": _labels(cfg)}
    if custom and cfg.gitops.engine == "argocd":
        meta["annotations"] = dict(ARGOCD_CRD_IN_SAME_SYNC)
    return meta


def _namespace(cfg: ClusterConfig) -> dict[str, Any]:
    """The reconciler's own namespace: its pods, Lease and breaker apart from teams and monitoring."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cfg.health.namespace,
                                                                  "labels": labels(cfg.name)}}


def _service_account(cfg: ClusterConfig) -> dict[str, Any]:
    """The identity the reconciler's pods run as: every grant below is made to it and to nothing else."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(cfg, cfg.health.namespace)}


def _node_role(cfg: ClusterConfig) -> dict[str, Any]:
    """Cluster-wide rights on Nodes, to cordon, taint and report on them (and evict, with drain on)."""
    # nodes/status carries the GPUHealthy condition (patch only: the kubelet owns the rest).
    # Pods and evictions only when the cluster file turns drain on.
    drain = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
             {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(cfg, None),
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                      {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                      *(drain if cfg.health.drain.enabled else [])]}


def _own_objects_role(cfg: ClusterConfig) -> dict[str, Any]:
    """Rights on the reconciler's own Lease (one active replica) and breaker ConfigMap, held to them by name."""
    # RBAC cannot name the object of a create, so create stands alone; every other verb is
    # held to the reconciler's own Lease and breaker ConfigMap (not its policy: that is
    # mounted, never read through the API, so it cannot rewrite its own limits).
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": _meta(cfg, cfg.health.namespace),
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                      {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
                       "verbs": ["get", "update"]},
                      {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
                      {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [BREAKER],
                       "verbs": ["get", "patch"]}]}


def _events_role(cfg: ClusterConfig) -> dict[str, Any]:
    """The right to write Events about Nodes, in the one namespace the API server accepts them in."""
    # Events about a Node (cluster-scoped) must live in `default`: the API server refuses them
    # anywhere else (k8s v1.36.3 pkg/apis/core/validation/events.go:146-150). So Events are
    # allowed there and nowhere else; patch updates a repeated warning's count.
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": _meta(cfg, EVENTS_NAMESPACE, EVENTS_ROLE),
            "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]}


def _binding(cfg: ClusterConfig, role: dict[str, Any]) -> dict[str, Any]:
    """The grant of `role` (a ClusterRole or Role) to the service account: a role alone grants nothing."""
    kind, meta = role["kind"], role["metadata"]
    return {"apiVersion": f"{RBAC}/v1", "kind": f"{kind}Binding",
            "metadata": _meta(cfg, meta.get("namespace"), meta["name"]),
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": meta["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": cfg.health.namespace}]}


def _policy(cfg: ClusterConfig) -> dict[str, Any]:
    """The reconciler's limits and sources (`policy_document`), mounted read-only: reviewable in git."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cfg, cfg.health.namespace),
            "data": {"policy.json": json.dumps(policy_document(cfg), indent=2, sort_keys=True) + "\n"}}


def _deployment(cfg: ClusterConfig) -> dict[str, Any]:
    """The reconciler itself: two replicas, one active (the Lease), the other ready to take over."""
    app = _selector()
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(cfg, cfg.health.namespace),
            "spec": {"replicas": 2, "selector": {"matchLabels": app},
                     "template": {"metadata": {"labels": app}, "spec": _pod_spec(cfg)}}}


def _pod_spec(cfg: ClusterConfig) -> dict[str, Any]:
    """A replica: non-root, read-only root file system, probes on /healthz, the policy mounted."""
    app = _selector()
    return {
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
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "reconciler", "image": own_image(cfg, "health-reconciler"),
            "args": ["health", "run", "--config", "/etc/fleetgen/policy.json", "--in-cluster", f"--listen=:{PORT}"],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "ports": [{"name": "metrics", "containerPort": PORT}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 20},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10},
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "policy", "mountPath": "/etc/fleetgen", "readOnly": True}]}],
        "volumes": [{"name": "policy", "configMap": {"name": NAME}}]}


def _disruption_budget(cfg: ClusterConfig) -> dict[str, Any]:
    """Keeps a replica up through node drains and upgrades: the GPU nodes are never left unguarded."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(cfg, cfg.health.namespace),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": _selector()}}}


def _service(cfg: ClusterConfig) -> dict[str, Any]:
    """The metrics port of both replicas under one name, for the ServiceMonitor to find."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(cfg, cfg.health.namespace),
            "spec": {"selector": _selector(), "ports": [{"name": "metrics", "port": PORT, "targetPort": "metrics"}]}}


def _service_monitor(cfg: ClusterConfig) -> dict[str, Any]:
    """Has Prometheus scrape the reconciler's metrics, which its own alerts are written on."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": _meta(cfg, cfg.health.namespace, custom=True),
            "spec": {"selector": {"matchLabels": _selector()}, "endpoints": [{"port": "metrics", "interval": "30s"}]}}


def _alert_rules(cfg: ClusterConfig) -> dict[str, Any]:
    """Alerts on the reconciler itself (`reconciler_rules`): a stalled loop or a tripped breaker is seen."""
    stall = STALL_PERIODS * seconds(cfg.health.period)
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": _meta(cfg, cfg.health.namespace, custom=True),
            "spec": {"groups": [{"name": "fleetgen-health", "rules": reconciler_rules(stall)}]}}
