"""GPU observability objects: exporter counters and scraping, alert rules, kernel-log shipping,
Loki rules and dashboards. All are plain manifests under `monitoring/`, so each is checked
against its schema; the charts that run Prometheus, Loki and the exporter are in platform.py.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from generator.compile import podnetwork
from generator.compile.dashboards import DASHBOARDS, dashboard
from generator.compile.kueue import toleration
from generator.compile.manifest import ARGOCD_CRD_IN_SAME_SYNC, Manifest, labels, own_image
from generator.compile.rules import EXPORTER_JOB, loki_groups, prometheus_groups
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.signals import HEALTH_TAINT_KEY, KERNEL_LOG_SERVICE
from generator.versions import component
from generator.yamltext import to_yaml

FOLDER = ("monitoring",)
COUNTERS = "fleetgen-dcgm-counters"
COLLECTOR = "fleetgen-kernel-log"
GPU_OPERATOR_NAMESPACE = "gpu-operator"
LOKI_GATEWAY = "http://loki-gateway.{namespace}.svc.cluster.local"
"""Loki's gateway Service (the Loki chart's nginx): the write path, behind basic auth."""
LOKI_OTLP = LOKI_GATEWAY + "/otlp"
LOKI_PORT = 3100
"""Loki's HTTP port, on its pods and its Service."""
LOKI_READ = "http://loki.{namespace}.svc.cluster.local:" + str(LOKI_PORT)
"""Loki itself: the read path of Grafana, the ruler and the reconciler, which only they may reach
(NetworkPolicy `fleetgen-loki`)."""
KERNEL_LOG_TENANT = "kernel-logs"
"""Loki tenant of the kernel log. Loki runs multi-tenant; the gateway sets the tenant to the
authenticated user, and only the collector's credentials are that user, so only the collector
can write to it. Readers name it in X-Scope-OrgID."""
LOKI_WRITER_SECRET = "fleetgen-loki-writer"
"""Secret (monitoring namespace, created out of band, never in git) with the collector's
`password`; the gateway's htpasswd (Secret `loki-gateway-htpasswd`) holds the same user."""
LOKI_HTPASSWD_SECRET = "loki-gateway-htpasswd"
GATEWAY_POD_PORT = 8080
"""Port of the gateway's pods (the chart's nginx listens there, unprivileged, behind Service port 80)."""
LOKI_PASSWORD_DIR = "/secrets/loki"
LOKI_PASSWORD_FILE = f"{LOKI_PASSWORD_DIR}/password"
"""The collector's password, mounted from the Secret and read by the collector's `file` config provider:
never in an environment variable, where every process of the container and a crash dump would see it."""

# DCGM fields the exporter collects: (field, Prometheus type, help). The upstream default file
# comments out ECC, NVLink, row remapping and the XID window counter, which the alerts need.
DCGM_COUNTERS: list[tuple[str, str, str]] = [
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (W)."),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (MHz)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (%)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (%)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error (hides repeats; corroboration only)."),
    ("DCGM_EXP_XID_ERRORS_COUNT", "gauge", "XID errors within the exporter's window, by xid."),
    ("DCGM_EXP_GPU_HEALTH_STATUS", "gauge", "DCGM health watch result: 0 pass, 10 warn, 20 fail."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether row remapping failed."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether a row remap is pending (a GPU reset completes it)."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for uncorrectable errors."),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for correctable errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "NVLink replay errors."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "NVLink recovery errors."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe replays."),
]
XID_WINDOW_MS = 300_000
"""dcgm-exporter's XID counting window; the Prometheus and Loki rules use the same 5 minutes."""


def counters_csv() -> str:
    """The counters file in dcgm-exporter's CSV format, written by a CSV writer: dcgm-exporter
    reads it with Go's encoding/csv and exits on a record that is not three fields, so a help
    text with a comma must be quoted (issue 14: two unquoted ones crashed every exporter)."""
    out = io.StringIO()
    out.write("# Generated by fleetgen. Format: DCGM field, Prometheus metric type, help message.\n")
    csv.writer(out, lineterminator="\n").writerows(DCGM_COUNTERS)
    return out.getvalue()


def exporter_namespace(cfg: ClusterConfig) -> str:
    """Where the GPU exporter (and its counters ConfigMap) lives."""
    return GPU_OPERATOR_NAMESPACE if cfg.monitoring.gpu_exporter == "gpu-operator" else cfg.monitoring.namespace


def gpu_tolerations(cfg: ClusterConfig) -> list[dict[str, Any]]:
    """Tolerations for node agents: every GPU pool's taints and the health reconciler's taint."""
    out: list[dict[str, Any]] = []
    for pool in cfg.node_pools:
        for taint in pool.taints:
            tol = toleration(taint)
            if tol not in out:
                out.append(tol)
    for effect in ("NoSchedule", "NoExecute"):
        out.append({"key": HEALTH_TAINT_KEY, "operator": "Exists", "effect": effect})
    return out


def _meta(cfg: ClusterConfig, name: str, namespace: str, extra: dict[str, str] | None = None,
          custom: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {**labels(cfg.name), **(extra or {})}}
    if custom and cfg.gitops.engine == "argocd":
        meta["annotations"] = dict(ARGOCD_CRD_IN_SAME_SYNC)
    return meta


PLATFORM = ("platform",)
"""What the exporter's chart release needs before it can become ready (its namespace and counters
file) goes with the releases, not in `monitoring/`: Flux's monitoring Kustomization waits for the
platform one, which waits for the exporter release, which waited for the counters file in
monitoring/ (issue 14: a deadlock on every Flux cluster)."""
BEFORE_RELEASES = {"argocd.argoproj.io/sync-wave": "-40"}
"""Argo CD sync wave ahead of every platform Application (the earliest is -30)."""


def _namespaces(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg = cluster.config
    names = sorted({cfg.monitoring.namespace, exporter_namespace(cfg)})
    out = []
    for ns in names:
        meta: dict[str, Any] = {"name": ns, "labels": labels(cfg.name)}
        if cfg.gitops.engine == "argocd":
            meta["annotations"] = dict(BEFORE_RELEASES)
        out.append(Manifest(PLATFORM, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
                            cluster.at("monitoring")))
    return out


def _counters(cluster: Loaded[ClusterConfig]) -> Manifest:
    cfg = cluster.config
    key = "dcgm-metrics.csv" if cfg.monitoring.gpu_exporter == "gpu-operator" else "counters.csv"
    meta = _meta(cfg, COUNTERS, exporter_namespace(cfg))
    if cfg.gitops.engine == "argocd":
        meta["annotations"] = dict(BEFORE_RELEASES)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {key: counters_csv()}}
    return Manifest(PLATFORM, body, cluster.at("monitoring"))


def _service_monitor(cluster: Loaded[ClusterConfig]) -> Manifest:
    cfg = cluster.config
    operator = cfg.monitoring.gpu_exporter == "gpu-operator"
    selector = {"app": "nvidia-dcgm-exporter"} if operator else {"app.kubernetes.io/name": "dcgm-exporter"}
    endpoint = {
        "port": "gpu-metrics" if operator else "metrics",
        "interval": cfg.monitoring.scrape_interval,
        "relabelings": [
            {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"},
            {"action": "replace", "targetLabel": "job", "replacement": EXPORTER_JOB},
        ],
    }
    body = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": _meta(cfg, EXPORTER_JOB, cfg.monitoring.namespace, custom=True),
            "spec": {"selector": {"matchLabels": selector},
                     "namespaceSelector": {"matchNames": [exporter_namespace(cfg)]},
                     "endpoints": [endpoint]}}
    return Manifest(FOLDER, body, cluster.at("monitoring", "gpuExporter"))


def _prometheus_rules(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg = cluster.config
    out = []
    for concern, rules in prometheus_groups():
        body = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                "metadata": _meta(cfg, f"fleetgen-{concern}", cfg.monitoring.namespace, custom=True),
                "spec": {"groups": [{"name": f"fleetgen-{concern}", "rules": rules}]}}
        out.append(Manifest(FOLDER, body, cluster.at("monitoring")))
    return out


def _loki_rules(cluster: Loaded[ClusterConfig]) -> Manifest:
    cfg = cluster.config
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(cfg, "fleetgen-loki-rules", cfg.monitoring.namespace, {"loki_rule": "true"}),
            "data": {"fleetgen-kernel-log.yaml": to_yaml({"groups": loki_groups()})}}
    return Manifest(FOLDER, body, cluster.at("monitoring", "kernelLogs"))


def collector_config(cfg: ClusterConfig) -> dict[str, Any]:
    """OpenTelemetry collector pipeline: kernel log -> node and cluster attributes -> Loki (OTLP)."""
    logs = cfg.monitoring.kernel_logs
    if logs.source == "journald":
        receiver_name = "journald/kernel"
        receiver: dict[str, Any] = {"directory": "/var/log/journal", "matches": [{"_TRANSPORT": "kernel"}]}
    else:
        receiver_name = "filelog/kernel"
        receiver = {"include": [f"/host{logs.path}"], "start_at": "end"}
    return {
        "receivers": {receiver_name: receiver},
        "processors": {
            "memory_limiter": {"check_interval": "5s", "limit_percentage": 80, "spike_limit_percentage": 25},
            "resource/node": {"attributes": [
                {"key": "k8s.node.name", "value": "${env:K8S_NODE_NAME}", "action": "upsert"},
                {"key": "k8s.cluster.name", "value": cfg.name, "action": "upsert"},
                {"key": "service.name", "value": KERNEL_LOG_SERVICE, "action": "upsert"}]},
            "batch": {"timeout": "5s"},
        },
        "extensions": {"basicauth/loki": {"client_auth": {"username": KERNEL_LOG_TENANT,
                                                          "password": f"${{file:{LOKI_PASSWORD_FILE}}}"}}},
        "exporters": {"otlphttp/loki": {"endpoint": LOKI_OTLP.format(namespace=cfg.monitoring.namespace),
                                        "auth": {"authenticator": "basicauth/loki"}}},
        "service": {"extensions": ["basicauth/loki"], "pipelines": {"logs": {"receivers": [receiver_name],
                                           "processors": ["memory_limiter", "resource/node", "batch"],
                                           "exporters": ["otlphttp/loki"]}}},
    }


def _collector(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg = cluster.config
    ns = cfg.monitoring.namespace
    app = {"app.kubernetes.io/name": COLLECTOR}
    # The journald receiver runs `journalctl`, which the upstream image (FROM scratch) lacks.
    if cfg.monitoring.kernel_logs.source == "journald":
        image = own_image(cfg, "otel-collector-journald")
    else:
        image = component("otel-collector").reference
    source = cluster.at("monitoring", "kernelLogs")
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(cfg, COLLECTOR, ns, app),
               "automountServiceAccountToken": False}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(cfg, COLLECTOR, ns, app),
              "data": {"collector.yaml": to_yaml(collector_config(cfg))}}
    if cfg.monitoring.kernel_logs.source == "journald":
        host = [("journal", "/var/log/journal", "/var/log/journal"), ("run-journal", "/run/log/journal",
                                                                       "/run/log/journal"),
                ("machine-id", "/etc/machine-id", "/etc/machine-id")]
    else:
        host = [("host-log", "/var/log", "/host/var/log")]
    container = {
        "name": "collector",
        "image": image,
        "args": ["--config=/conf/collector.yaml"],
        "env": [{"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "GOMEMLIMIT", "value": "160MiB"}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "200Mi"}},
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False, "runAsUser": 0,
                            "capabilities": {"drop": ["ALL"], "add": ["DAC_READ_SEARCH"]}},
        "volumeMounts": [{"name": "config", "mountPath": "/conf", "readOnly": True},
                         {"name": "loki-password", "mountPath": LOKI_PASSWORD_DIR, "readOnly": True}]
        + [{"name": name, "mountPath": mount, "readOnly": True} for name, _, mount in host],
    }
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(cfg, COLLECTOR, ns, app),
        "spec": {
            "selector": {"matchLabels": app},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {
                "metadata": {"labels": app},
                "spec": {
                    "serviceAccountName": COLLECTOR,
                    "automountServiceAccountToken": False,
                    "priorityClassName": "system-node-critical",
                    # Root for the journal's files, but under the runtime's default syscall filter.
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "nodeSelector": dict(sorted(cfg.monitoring.gpu_node_selector.items())),
                    "tolerations": gpu_tolerations(cfg),
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": COLLECTOR}},
                                {"name": "loki-password", "secret": {
                                    "secretName": LOKI_WRITER_SECRET, "defaultMode": 0o400,
                                    "items": [{"key": "password", "path": "password"}]}}]
                    + [{"name": name, "hostPath": {"path": path}} for name, path, _ in host],
                },
            },
        },
    }
    # Nothing scrapes it (no port is open); it only resolves names and pushes to the gateway.
    egress = [podnetwork.dns_rule(), {"to": [{"podSelector": {"matchLabels": GATEWAY_POD}}],
                                      "ports": podnetwork.tcp(GATEWAY_POD_PORT)}]
    network = podnetwork.policy(COLLECTOR, ns, {"labels": {**labels(cfg.name), **app}}, app, [], egress)
    return [Manifest(FOLDER, body, source) for body in (account, config, daemonset, network)]


def _dashboards(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg = cluster.config
    out = []
    for uid in DASHBOARDS:
        text = json.dumps(dashboard(uid, cfg.name), indent=2, sort_keys=True) + "\n"
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": _meta(cfg, f"fleetgen-dashboard-{uid}", cfg.monitoring.namespace,
                                  {"grafana_dashboard": "1"}),
                "data": {f"fleetgen-{uid}.json": text}}
        out.append(Manifest(FOLDER, body, cluster.at("monitoring")))
    return out


LOKI_POD = {"app.kubernetes.io/name": "loki", "app.kubernetes.io/component": "single-binary"}
GATEWAY_POD = {"app.kubernetes.io/name": "loki", "app.kubernetes.io/component": "gateway"}
GRAFANA_POD = {"app.kubernetes.io/name": "grafana"}
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
EXPORTER_POD = {"app.kubernetes.io/name": "dcgm-exporter"}
"""Pod labels of the charts' workloads (Loki 6.55.0, kube-prometheus-stack, dcgm-exporter), checked
against `helm template` of the pinned Loki chart in tests/test_trust_loki.py."""


def _ingress_policy(cfg: ClusterConfig, name: str, namespace: str, pods: dict[str, str],
                    sources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(cfg, name, namespace),
            "spec": {"podSelector": {"matchLabels": dict(pods)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": sources}]}}


def _signal_policies(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """Who may reach the health signals: the gateway (the write path) only from the collector pods;
    Loki only from the gateway, itself, Grafana and the reconciler's namespace; the GPU exporter
    only from Prometheus. Enforced by the cluster's CNI."""
    cfg = cluster.config
    ns = cfg.monitoring.namespace
    health = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cfg.health.namespace}}}
    loki_from = [{"podSelector": {"matchLabels": GATEWAY_POD}}, {"podSelector": {"matchLabels": LOKI_POD}},
                 {"podSelector": {"matchLabels": GRAFANA_POD}}, {"podSelector": {"matchLabels": PROMETHEUS_POD}},
                 *([health] if cfg.health.enabled else [])]
    out = [_ingress_policy(cfg, "fleetgen-loki", ns, LOKI_POD, loki_from),
           _ingress_policy(cfg, "fleetgen-loki-gateway", ns, GATEWAY_POD,
                           [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": COLLECTOR}}}])]
    prometheus = {"podSelector": {"matchLabels": PROMETHEUS_POD}}
    if exporter_namespace(cfg) != ns:
        prometheus["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    out.append(_ingress_policy(cfg, "fleetgen-gpu-exporter", exporter_namespace(cfg),
                               EXPORTER_POD if cfg.monitoring.gpu_exporter == "dcgm-exporter"
                               else {"app": "nvidia-dcgm-exporter"}, [prometheus]))
    return [Manifest(FOLDER, body, cluster.at("monitoring")) for body in out]


def compile_monitoring(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every monitoring object of one cluster (none when monitoring is disabled)."""
    if not cluster.config.monitoring.enabled:
        return []
    return [*_namespaces(cluster), _counters(cluster), _service_monitor(cluster), *_prometheus_rules(cluster),
            _loki_rules(cluster), *_collector(cluster), *_dashboards(cluster), *_signal_policies(cluster)]
