"""Upstream components, pinned in versions.yaml, installed through the cluster's GitOps engine.

Each component is (name, namespace, order, values); the engine decides the wrapping: Argo CD
Applications ordered by sync waves, or Flux sources and HelmReleases ordered by dependsOn.
Values come from the cluster config, so retention, storage, scrape interval, placement and the
Kueue Configuration are all reviewable in git.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from generator.compile.gitops import ARGOCD_RETRY, platform_project
from generator.compile.manifest import TEAM_LABEL, Manifest, labels
from generator.compile.monitoring import (
    COUNTERS,
    KERNEL_LOG_TENANT,
    LOKI_HTPASSWD_SECRET,
    LOKI_READ,
    XID_WINDOW_MS,
    exporter_namespace,
    gpu_tolerations,
)
from generator.config.cluster import ClusterConfig, kueue_tuple
from generator.config.fleet import Loaded, fair_sharing
from generator.config.team import TeamConfig
from generator.kinds import frameworks_of
from generator.kinds.ray import KUBERAY
from generator.versions import Component, component
from generator.yamltext import to_yaml

FOLDER = ("platform",)


@dataclass(frozen=True)
class Install:
    """One chart release: where it goes, what it waits for, and its values."""

    name: str
    namespace: str
    wave: int
    values: dict[str, Any]
    depends_on: tuple[str, ...] = field(default=())
    version: str | None = None
    """The chart version the cluster runs (`kueue.version`, `versions.<component>`, else the fleet's pin)."""

    @property
    def chart(self) -> Component:
        pinned = component(self.name)
        return replace(pinned, version=self.version) if self.version else pinned


# --- values ------------------------------------------------------------------------------------

def kueue_configuration(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]]) -> dict[str, Any]:
    """The Kueue controller Configuration: JobSet integration, waitForPodsReady, fair sharing."""
    v1beta2 = kueue_tuple(cfg.kueue.version)[:2] >= (0, 16)
    fair = fair_sharing(cfg, teams)
    wait = cfg.kueue.wait_for_pods_ready
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2" if v1beta2 else "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 300, "burst": 500},
        # Multi-node jobs are admitted all or nothing: a job whose pods are not all ready in time
        # releases its quota and is requeued with backoff, so a half-started job never holds GPUs.
        "waitForPodsReady": {"timeout": wait.timeout, "blockAdmission": False,
                             "requeuingStrategy": {"timestamp": "Eviction",
                                                   "backoffBaseSeconds": wait.backoff_base_seconds,
                                                   "backoffMaxSeconds": wait.backoff_max_seconds}},
        "integrations": {"frameworks": frameworks_of(cfg)},
        "manageJobsWithoutQueueName": cfg.kueue.manage_jobs_without_queue_name,
        # Kueue manages team namespaces only. The chart also makes this the namespaceSelector of
        # its webhooks (charts/kueue/templates/webhook/manifests.yaml:42-52 at v0.19.2), so with
        # Kueue down, pods still start in monitoring, gpu-operator, argocd, flux-system and the
        # reconciler's namespace (the `pod` webhook fails closed everywhere it matches; issue 14).
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
    }
    if cfg.multikueue is not None:  # origin: the label on what this manager creates on its workers
        config["multiKueue"] = {"gcInterval": cfg.multikueue.gc_interval, "origin": cfg.name,
                                "workerLostTimeout": cfg.multikueue.worker_lost_timeout}
    afs = cfg.kueue.admission_fair_sharing
    if afs is not None and cfg.shared_pools:
        weights = afs.resource_weights
        if weights is None:  # GPUs only: Kueue's default of 1 for everything would rank teams by memory bytes
            weights = {"cpu": 0.0, "memory": 0.0,
                       **{p.gpu.resource: 1.0 for p in cfg.node_pools if p.name in cfg.shared_pools}}
        config["admissionFairSharing"] = {"usageHalfLifeTime": afs.usage_half_life_time,
                                          "usageSamplingInterval": afs.usage_sampling_interval,
                                          "resourceWeights": {k: _number(v) for k, v in sorted(weights.items())}}
    if cfg.kueue.exclude_resource_prefixes:
        config["resources"] = {"excludeResourcePrefixes": list(cfg.kueue.exclude_resource_prefixes)}
    if not v1beta2:
        config["waitForPodsReady"] = {"enable": True, **config["waitForPodsReady"]}
    if fair:
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
        if not v1beta2:
            config["fairSharing"] = {"enable": True, **config["fairSharing"]}
    return config


def _number(value: float) -> int | float:
    """A weight as YAML writes it plainly: 1, not 1.0."""
    return int(value) if value == int(value) else value


def _placement(cfg: ClusterConfig) -> dict[str, Any]:
    """nodeSelector/affinity for the monitoring stack (kept off GPU nodes unless told otherwise)."""
    out: dict[str, Any] = {}
    mon = cfg.monitoring
    if mon.stack_node_selector:
        out["nodeSelector"] = dict(sorted(mon.stack_node_selector.items()))
    if mon.avoid_gpu_nodes and mon.gpu_node_selector:
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": "NotIn", "values": [v]}
                                  for k, v in sorted(mon.gpu_node_selector.items())]}]}}}
    return out


def _resources(res: Any) -> dict[str, Any]:
    return {"requests": {"cpu": str(res.cpu), "memory": str(res.memory)}, "limits": {"memory": str(res.memory)}}


def _pvc(storage: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(storage.size)}}}
    if storage.storage_class:
        spec["storageClassName"] = storage.storage_class
    return spec


def _prometheus_stack(cfg: ClusterConfig) -> dict[str, Any]:
    mon, place = cfg.monitoring, _placement(cfg)
    return {
        "fullnameOverride": "kube-prometheus-stack",
        "prometheus": {"prometheusSpec": {
            "retention": mon.prometheus.retention,
            "scrapeInterval": mon.scrape_interval,
            "evaluationInterval": mon.scrape_interval,
            "enableRemoteWriteReceiver": True,  # the Loki ruler writes its kernel-log counts here
            "ruleSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "podMonitorSelectorNilUsesHelmValues": False,
            "resources": _resources(mon.prometheus.resources),
            "storageSpec": {"volumeClaimTemplate": {"spec": _pvc(mon.prometheus.storage)}},
            **place}},
        "alertmanager": {"alertmanagerSpec": dict(place)},
        "grafana": {"sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1",
                                               "searchNamespace": "ALL"}},
                    # The kernel-log XID lines are in Loki: Grafana gets it as a data source.
                    "additionalDataSources": [{"name": "Loki", "type": "loki", "uid": "loki", "access": "proxy",
                                               "url": LOKI_READ.format(namespace=mon.namespace),
                                               "jsonData": {"httpHeaderName1": "X-Scope-OrgID"},
                                               "secureJsonData": {"httpHeaderValue1": KERNEL_LOG_TENANT}}],
                    **place},
        "prometheusOperator": dict(place),
        "kube-state-metrics": dict(place),
    }


def _loki(cfg: ClusterConfig) -> dict[str, Any]:
    mon, place, ns = cfg.monitoring, _placement(cfg), cfg.monitoring.namespace
    persistence: dict[str, Any] = {"enabled": True, "size": str(mon.loki.storage.size)}
    if mon.loki.storage.storage_class:
        persistence["storageClass"] = mon.loki.storage.storage_class
    return {
        "fullnameOverride": "loki",
        "deploymentMode": "SingleBinary",
        "loki": {
            # The release tests/test_loki_ruler.py runs with this chart's configuration.
            "image": {"tag": component("loki").app},
            # Multi-tenant: the gateway makes the authenticated user the tenant (locationSnippet),
            # so only the collector's credentials write the kernel-log tenant.
            "auth_enabled": True,
            "commonConfig": {"replication_factor": 1},
            "storage": {"type": "filesystem"},
            "schemaConfig": {"configs": [{"from": "2024-01-01", "store": "tsdb", "object_store": "filesystem",
                                          "schema": "v13", "index": {"prefix": "index_", "period": "24h"}}]},
            "limits_config": {"retention_period": mon.loki.retention,
                              # the node name becomes the stream label k8s_node_name
                              "otlp_config": {"resource_attributes": {"attributes_config": [
                                  {"action": "index_label", "attributes": ["k8s.node.name"]}]}}},
            "compactor": {"retention_enabled": True, "delete_request_store": "filesystem"},
            "rulerConfig": {
                "alertmanager_url": f"http://kube-prometheus-stack-alertmanager.{ns}.svc:9093",
                "enable_api": True,
                "storage": {"type": "local", "local": {"directory": "/rules"}},
                "remote_write": {"enabled": True, "client": {
                    "url": f"http://kube-prometheus-stack-prometheus.{ns}.svc:9090/api/v1/write"}},
                "wal": {"dir": "/var/loki/ruler-wal"},
            },
        },
        "singleBinary": {"replicas": 1, "persistence": persistence, "resources": _resources(mon.loki.resources),
                         **place},
        "read": {"replicas": 0}, "write": {"replicas": 0}, "backend": {"replicas": 0},
        "gateway": {**place,
                    "basicAuth": {"enabled": True, "existingSecret": LOKI_HTPASSWD_SECRET},
                    # The tenant is whoever logged in: a client's own X-Scope-OrgID is overwritten.
                    "nginxConfig": {"locationSnippet": "proxy_set_header X-Scope-OrgID $remote_user;"}},
        # The ruler reads <directory>/<tenant>/: the kernel-log rules belong to that tenant.
        "sidecar": {"rules": {"enabled": True, "label": "loki_rule", "labelValue": "true",
                              "folder": f"/rules/{KERNEL_LOG_TENANT}"}},
        "chunksCache": {"enabled": False}, "resultsCache": {"enabled": False},
        "lokiCanary": {"enabled": False}, "test": {"enabled": False},
    }


def _dcgm_exporter(cfg: ClusterConfig) -> dict[str, Any]:
    return {
        # One `--flag=value` per argument: the chart writes each unquoted (`- {{ . }}`,
        # deployment/templates/daemonset.yaml:119-122 at 4.4.1-4.6.0), so a bare `300000` became
        # an integer and strict validation refused the DaemonSet (issue 14).
        "arguments": ["--collectors=/etc/dcgm-exporter/fleetgen/counters.csv",
                      f"--xid-count-window-size={XID_WINDOW_MS}"],
        "extraConfigMapVolumes": [{"name": "fleetgen-counters", "configMap": {"name": COUNTERS}}],
        "extraVolumeMounts": [{"name": "fleetgen-counters", "mountPath": "/etc/dcgm-exporter/fleetgen",
                               "readOnly": True}],
        "serviceMonitor": {"enabled": False},  # fleetgen's own ServiceMonitor adds the node label
        "nodeSelector": dict(sorted(cfg.monitoring.gpu_node_selector.items())),
        "tolerations": gpu_tolerations(cfg),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    }


GPU_OPERATOR_DEFAULT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
"""The chart's own `daemonsets.tolerations` (deployments/gpu-operator/values.yaml:38-41 at v25.10.0):
setting the list replaces it, so it is kept beside the pools' taints."""
GPU_OPERATOR_OFF = ("driver", "toolkit", "devicePlugin", "migManager")
"""Operands the node image provides (values.yaml:129-130, 220-221, 231-232, 340-341 at v25.10.0); GFD
and NFD stay on: the pools are selected by GFD's `nvidia.com/gpu.product` label."""


def _gpu_operator(cfg: ClusterConfig) -> dict[str, Any]:
    tolerations = gpu_tolerations(cfg)
    if GPU_OPERATOR_DEFAULT_TOLERATION not in tolerations:
        tolerations.insert(0, dict(GPU_OPERATOR_DEFAULT_TOLERATION))
    return {
        **{operand: {"enabled": False} for operand in GPU_OPERATOR_OFF},
        "gfd": {"enabled": True}, "nfd": {"enabled": True},
        "daemonsets": {"tolerations": tolerations},
        "dcgmExporter": {
            "enabled": True,
            "config": {"name": COUNTERS},
            "env": [{"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/dcgm-metrics.csv"},
                    {"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": str(XID_WINDOW_MS)}],
            "serviceMonitor": {"enabled": False},
        },
    }


def _kuberay_operator(cfg: ClusterConfig) -> dict[str, Any]:
    """KubeRay's chart: its ServiceMonitor where Prometheus runs, and no batch scheduler: Kueue queues
    Ray kinds by suspending them. Placed like Kueue's and JobSet's managers (anywhere untainted)."""
    return {"batchScheduler": {"enabled": False},
            "metrics": {"enabled": True, "serviceMonitor": {"enabled": cfg.monitoring.enabled}}}


def _kubeflow_trainer(cfg: ClusterConfig) -> dict[str, Any]:
    """Kubeflow Trainer's chart on the cluster's own JobSet (the chart would otherwise install a second,
    older one: its `jobset.install` defaults to true), with the one runtime the profiles use. On a
    MultiKueue manager, its CRDs and that runtime only: Trainer v2.2.1's controller ignores a TrainJob's
    spec.managedBy and would run the manager's copies of what MultiKueue dispatches, so it runs no
    replica there, and its webhooks, with nothing behind them, are passed by (the worker's judge the copy)."""
    values: dict[str, Any] = {"jobset": {"install": False}, "runtimes": {"torchDistributed": {"enabled": True}}}
    if cfg.multikueue is not None:
        values |= {"manager": {"replicas": 0}, "webhook": {"failurePolicy": "Ignore"}}
    return values


def _lws(cfg: ClusterConfig) -> dict[str, Any]:
    """The LeaderWorkerSet chart with its image pinned: the chart in the lws module defaults to the `main`
    tag, always pulled, which its release script (hack/push-chart.sh at v0.9.0) replaces by the release."""
    return {"image": {"manager": {"tag": cfg.pin("lws"), "pullPolicy": "IfNotPresent"}},
            "enablePrometheus": cfg.monitoring.enabled}


WAVES: dict[str, int] = {"kube-prometheus-stack": -30, "jobset": -25, "kueue": -20, "kuberay-operator": -15,
                         "kubeflow-trainer": -15, "lws": -15, "loki": -10, "gpu-operator": -10, "dcgm-exporter": -10}
"""The order each engine syncs the charts in (Argo CD sync waves; Flux's dependsOn follows it): Prometheus's
CRDs first, JobSet before Kueue (its integration), the operators after Kueue (its webhooks queue what they
run)."""


def installs(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]]) -> list[Install]:
    """Every component of the cluster with its namespace, order and values."""
    out = [
        Install("jobset", "jobset-system", WAVES["jobset"], {}, version=cfg.pin("jobset")),
        Install("kueue", "kueue-system", WAVES["kueue"], {
            "enablePrometheus": cfg.monitoring.enabled,
            "managerConfig": {"controllerManagerConfigYaml": to_yaml(kueue_configuration(cfg, teams))}},
            ("jobset", "kube-prometheus-stack") if cfg.monitoring.enabled else ("jobset",),
            # The controller the cluster file declares (issue 14: dev declared v0.15 and got the
            # pin); Kueue's chart versions carry no `v`.
            cfg.kueue.version.removeprefix("v")),
    ]
    if cfg.operators.ray:  # after Kueue, whose webhooks suspend Ray kinds until they are admitted
        after = ("kueue", "kube-prometheus-stack") if cfg.monitoring.enabled else ("kueue",)
        out.append(Install(KUBERAY.release, KUBERAY.namespace, WAVES[KUBERAY.release], _kuberay_operator(cfg), after,
                           cfg.pin(KUBERAY.release)))
    if cfg.operators.trainer:  # after Kueue (its webhooks suspend TrainJobs) and JobSet (what a TrainJob makes)
        after = ("jobset", "kueue")
        out.append(Install("kubeflow-trainer", "kubeflow-system", WAVES["kubeflow-trainer"], _kubeflow_trainer(cfg),
                           after, cfg.pin("kubeflow-trainer")))
    if cfg.operators.lws:  # after Kueue, whose webhooks gate a LeaderWorkerSet's pods until admitted
        after = ("kueue", "kube-prometheus-stack") if cfg.monitoring.enabled else ("kueue",)
        out.append(Install("lws", "lws-system", WAVES["lws"], _lws(cfg), after, cfg.pin("lws")))
    if cfg.monitoring.enabled:
        ns = cfg.monitoring.namespace
        out.insert(0, Install("kube-prometheus-stack", ns, WAVES["kube-prometheus-stack"], _prometheus_stack(cfg)))
        out.append(Install("loki", ns, WAVES["loki"], _loki(cfg), ("kube-prometheus-stack",)))
        if cfg.monitoring.gpu_exporter == "gpu-operator":
            out.append(Install("gpu-operator", exporter_namespace(cfg), WAVES["gpu-operator"], _gpu_operator(cfg),
                               ("kube-prometheus-stack",)))
        else:
            out.append(Install("dcgm-exporter", ns, WAVES["dcgm-exporter"], _dcgm_exporter(cfg),
                               ("kube-prometheus-stack",)))
    return out


# --- engines -----------------------------------------------------------------------------------

WRITTEN_BY_THE_CONTROLLER: dict[str, list[dict[str, Any]]] = {
    # charts/jobset/templates/internalcert/secret.yaml at v0.12.0 declares the four keys empty; JobSet's
    # cert-controller fills them. Compared, the Secret is always OutOfSync and self-heal empties it
    # (the fleet twin saw Argo CD v3.6.1 do so), leaving the webhooks without a certificate until the
    # controller writes it again. Kueue's chart declares no data, so server-side apply leaves it alone.
    "jobset": [{"group": "", "kind": "Secret", "name": "jobset-webhook-server-cert", "jsonPointers": ["/data"]}],
    # The same for Kubeflow Trainer's (charts/kubeflow-trainer/templates/webhook/secret.yaml at v2.2.1),
    # which its cert-controller fills.
    "kubeflow-trainer": [{"group": "", "kind": "Secret", "name": "kubeflow-trainer-webhook-cert",
                          "jsonPointers": ["/data"]}],
}
"""Per release, fields its own controller writes into objects its chart declares: Argo CD ignores
them in the diff and, with `RespectIgnoreDifferences`, in the sync; Flux's drift detection ignores
them (`driftDetection.ignore`, helm-controller v1.6.4 api/v2/helmrelease_types.go:301-315), or its
correction would empty them as Argo CD's self-heal did."""

VALIDATES_ITS_OWN_OBJECTS: dict[str, str] = {
    # charts/kubeflow-trainer at v2.2.1 installs ClusterTrainingRuntimes, which its own controller's
    # webhook `validator.clustertrainingruntime.trainer.kubeflow.org` (failurePolicy Fail) admits.
    "kubeflow-trainer": "30s",
}
"""Per release, how long Flux waits between install attempts: charts whose own objects are admitted by
the webhook of the controller they install. Helm applies those objects right after that controller's
Deployment, before its pod serves the webhook, so a first install fails. helm-controller's default then
uninstalls (the pod goes with it) and tries again into the same race, until its retries run out (the
fleet twin saw Trainer Stalled after 4 attempts under helm-controller v1.6.4). `RetryOnFailure` keeps
the failed release and its pod and tries again after the interval (api/v2/helmrelease_types.go:544-548,
670-684). Upgrades retry the same way: helm-controller makes the retry of a failed install an upgrade
(internal/reconcile/atomic_release.go:476-480), which would otherwise fall under upgrade remediation
(three tries, then rollback) while the webhook's pod may still be starting. So a failed upgrade of
these releases is retried, not rolled back. Argo CD needs nothing: its sync retries (30 s backoff)
leave the pod running."""


def _argocd(cluster: Loaded[ClusterConfig], inst: Install) -> list[Manifest]:
    cfg = cluster.config
    chart = inst.chart.mirrored(cfg.gitops.chart_mirror)
    source: dict[str, Any] = {"repoURL": chart.oci_repository if chart.is_oci else chart.repo,
                              "chart": chart.chart_name, "targetRevision": chart.version,
                              "helm": {"releaseName": inst.name, "valuesObject": inst.values}}
    body: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": f"{cfg.name}-{inst.name}", "namespace": cfg.gitops.controller_namespace,
                     "labels": labels(cfg.name),
                     "annotations": {"argocd.argoproj.io/sync-wave": str(inst.wave)},
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": {"project": platform_project(cfg.name), "source": source,
                 "destination": {"server": cfg.gitops.destination, "namespace": inst.namespace},
                 "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"],
                                "retry": ARGOCD_RETRY}},
    }
    ignored = WRITTEN_BY_THE_CONTROLLER.get(inst.name)
    if ignored:
        spec = body["spec"]
        spec["syncPolicy"]["syncOptions"].append("RespectIgnoreDifferences=true")
        spec["ignoreDifferences"] = [{**rule, "namespace": inst.namespace} for rule in ignored]
    return [Manifest(FOLDER, body, cluster.at("gitops"))]


def _drift_detection(inst: Install) -> dict[str, Any]:
    """What Argo CD's self-heal does, for Flux: at each reconcile helm-controller compares the release's
    objects with the cluster by server-side dry run and, in mode `enabled`, upgrades to put back what was
    changed by hand (helm-controller v1.6.4 api/v2/helmrelease_types.go:264-289,
    internal/reconcile/atomic_release.go:384-452); off by default. The fields the release's own controller
    writes are left out, as on Argo CD (WRITTEN_BY_THE_CONTROLLER)."""
    out: dict[str, Any] = {"mode": "enabled"}
    ignored = [{"paths": rule["jsonPointers"],
                "target": {**({"group": rule["group"]} if rule["group"] else {}), "kind": rule["kind"],
                           "name": rule["name"], "namespace": inst.namespace}}
               for rule in WRITTEN_BY_THE_CONTROLLER.get(inst.name, [])]
    if ignored:
        out["ignore"] = ignored
    return out


def _flux(cluster: Loaded[ClusterConfig], inst: Install) -> list[Manifest]:
    cfg = cluster.config
    chart, ns = inst.chart.mirrored(cfg.gitops.chart_mirror), cfg.gitops.controller_namespace
    meta = {"name": inst.name, "namespace": ns, "labels": labels(cfg.name)}
    if chart.is_oci:
        source = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "metadata": dict(meta),
                  "spec": {"interval": "1h", "url": chart.chart, "ref": {"tag": chart.version},
                           "layerSelector": {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                                             "operation": "copy"}}}
        chart_spec: dict[str, Any] = {"chartRef": {"kind": "OCIRepository", "name": inst.name, "namespace": ns}}
    else:
        source = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": dict(meta),
                  "spec": {"interval": "1h", "url": chart.repo}}
        chart_spec = {"chart": {"spec": {"chart": chart.chart_name, "version": chart.version,
                                         "sourceRef": {"kind": "HelmRepository", "name": inst.name,
                                                       "namespace": ns}}}}
    release: dict[str, Any] = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": dict(meta),
        "spec": {"interval": "30m", "releaseName": inst.name, "targetNamespace": inst.namespace,
                 "storageNamespace": inst.namespace, **chart_spec,
                 "install": {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
                 "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
                 "values": inst.values}}
    release["spec"]["driftDetection"] = _drift_detection(inst)
    if inst.depends_on:
        release["spec"]["dependsOn"] = [{"name": d, "namespace": ns} for d in inst.depends_on]
    retry = VALIDATES_ITS_OWN_OBJECTS.get(inst.name)
    if retry:
        for action in ("install", "upgrade"):
            del release["spec"][action]["remediation"]
            release["spec"][action]["strategy"] = {"name": "RetryOnFailure", "retryInterval": retry}
    return [Manifest(FOLDER, source, cluster.at("gitops")), Manifest(FOLDER, release, cluster.at("gitops"))]


def compile_platform(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Installs of every upstream component, wrapped for the cluster's GitOps engine."""
    wrap = _argocd if cluster.config.gitops.engine == "argocd" else _flux
    return [m for inst in installs(cluster.config, teams) for m in wrap(cluster, inst)]
