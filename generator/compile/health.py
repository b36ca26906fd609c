"""The GPU health reconciler's deployment, from the cluster's `health:` block.

Least privilege: nodes get/list/watch/patch and events create cluster-wide; its Lease and
breaker ConfigMap only in its own namespace. Two replicas, one active (Lease), non-root with a
read-only root file system, probes on /healthz, metrics scraped by a ServiceMonitor.
"""

from __future__ import annotations

import json
from typing import Any

from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.durations import seconds
from generator.versions import component

FOLDER = ("health",)
NAME = "fleetgen-health"
PORT = 8080


def policy_document(cfg: ClusterConfig) -> dict[str, Any]:
    """What the reconciler reads at start (ConfigMap `fleetgen-health`, key policy.json)."""
    health, mon = cfg.health, cfg.monitoring
    return {
        "cluster": cfg.name,
        "dryRun": health.dry_run,
        "periodSeconds": seconds(health.period),
        "prometheusUrl": health.prometheus_url or
        f"http://kube-prometheus-stack-prometheus.{mon.namespace}.svc:9090",
        "lokiUrl": health.loki_url or f"http://loki-gateway.{mon.namespace}.svc.cluster.local",
        "namespace": health.namespace,
        "policy": {"healthyChecksToRelease": health.healthy_checks_to_release,
                   "cooldownSeconds": seconds(health.cooldown), "flapCount": health.flap_count,
                   "flapWindowSeconds": seconds(health.flap_window),
                   "maxUnhealthyPercent": health.max_unhealthy_percent},
        "pools": [{"name": p.name, "labels": dict(sorted(p.node_labels.items()))} for p in cfg.node_pools],
    }


GPU_NODE_LABEL = "nvidia.com/gpu.product"
"""Set on every GPU node by GPU Feature Discovery (the GPU operator)."""


def compile_health(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Namespace, RBAC, policy ConfigMap, Deployment, Service and ServiceMonitor."""
    cfg = cluster.config
    if not (cfg.health.enabled and cfg.monitoring.enabled):
        return []
    ns, src = cfg.health.namespace, cluster.at("health")
    app = {"app.kubernetes.io/name": NAME}
    meta = {"labels": {**labels(cfg.name), **app}}
    image = component("health-reconciler")
    rbac = "rbac.authorization.k8s.io"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels(cfg.name)}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, **meta}},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": NAME, **meta},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
                   {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME, **meta},
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": NAME, "namespace": ns, **meta},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "verbs": ["get", "create", "update"]},
                   {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": NAME, "namespace": ns, **meta},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": NAME},
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
                          "name": "reconciler", "image": f"{image.image}:{image.version}",
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
    ]
    monitor: dict[str, Any] = {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": NAME, "namespace": ns, **meta},
        "spec": {"selector": {"matchLabels": app}, "endpoints": [{"port": "metrics", "interval": "30s"}]}}
    if cfg.gitops.engine == "argocd":
        monitor["metadata"]["annotations"] = {"argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"}
    objects.append(monitor)
    return [Manifest(FOLDER, body, src) for body in objects]
