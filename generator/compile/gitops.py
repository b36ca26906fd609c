"""GitOps wiring: how Argo CD or Flux syncs `rendered/<cluster>/` into each cluster.

Rendered under `rendered/gitops/<cluster>/` and applied once to the GitOps control plane (Argo
CD's cluster, or the cluster itself for Flux); every later change arrives through git.
- Argo CD: an AppProject that allows only this repository and the pinned chart repositories,
  only the cluster's destination, and only the kinds fleetgen emits; and one Application for
  `rendered/<cluster>` (app of apps: it contains the platform Applications) with server-side
  apply and ignoreDifferences for fields Kueue's webhooks default.
- Flux: a GitRepository and one Kustomization per folder, ordered with dependsOn (platform
  first, then Kueue objects, then teams and monitoring), all with prune.

Every object's name starts with the cluster's, so `rendered/gitops/` as a whole is one valid
kustomization (and a diff tells clusters apart) even though each cluster applies only its own.
"""

from __future__ import annotations

from typing import Any

from generator.compile.manifest import MANAGED_BY, Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet, Loaded
from generator.versions import lock

GITOPS = "gitops"
CLUSTER_KINDS = [("", "Namespace"), ("rbac.authorization.k8s.io", "ClusterRole"),
                 ("rbac.authorization.k8s.io", "ClusterRoleBinding"), ("kueue.x-k8s.io", "ClusterQueue"),
                 ("kueue.x-k8s.io", "ResourceFlavor"), ("kueue.x-k8s.io", "Cohort"), ("kueue.x-k8s.io", "Topology"),
                 ("kueue.x-k8s.io", "WorkloadPriorityClass"), ("kueue.x-k8s.io", "AdmissionCheck"),
                 ("kueue.x-k8s.io", "ProvisioningRequestConfig"), ("kueue.x-k8s.io", "MultiKueueCluster"),
                 ("kueue.x-k8s.io", "MultiKueueConfig"),
                 ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
                 ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
                 ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
                 ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding")]
NAMESPACED_KINDS = [("kueue.x-k8s.io", "LocalQueue"), ("rbac.authorization.k8s.io", "RoleBinding"),
                    ("rbac.authorization.k8s.io", "Role"), ("apps", "Deployment"), ("", "Service"),
                    ("", "ConfigMap"), ("", "ServiceAccount"), ("", "Secret"), ("apps", "DaemonSet"),
                    ("monitoring.coreos.com", "ServiceMonitor"), ("monitoring.coreos.com", "PrometheusRule"),
                    ("argoproj.io", "Application"), ("networking.k8s.io", "NetworkPolicy"), ("", "ResourceQuota"),
                    ("", "LimitRange"), ("policy", "PodDisruptionBudget")]
# Fields Kueue's webhooks fill in with defaults; with server-side apply they rarely show, but an
# older Argo CD diff would report them forever.
KUEUE_DEFAULTED = [
    ("kueue.x-k8s.io", "ClusterQueue", [".spec.flavorFungibility", ".spec.stopPolicy"]),
    ("kueue.x-k8s.io", "LocalQueue", [".spec.stopPolicy"]),
]
PLATFORM_NEEDED = ("jobset", "kueue", "kube-prometheus-stack")
"""Releases whose CRDs and controllers the other folders need (Kueue and JobSet objects; the
monitoring CRDs): the platform Kustomization is healthy when they are."""
READY_AT_ANY_REVISION = ("has(dep.status.observedGeneration)"
                         " && dep.status.observedGeneration == dep.metadata.generation && has(dep.status.conditions)"
                         " && dep.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')")
"""A dependency is ready when Ready at whatever revision it last applied. Flux's own check also wants
it to have applied the new commit first, so a team change waited `--requeue-dependency` (30 s) once
per dependsOn hop (kustomize-controller v1.9.5 internal/controller/kustomization_controller.go:601-630;
the fleet twin measured 61 s for a quota change). Ordering still holds where it matters, at bootstrap:
nothing is applied before what it depends on has been applied once. The cost: in a commit that
upgrades a chart and uses its new fields at once, the objects may be tried first and retried after
`retryInterval`. `readyExpr` needs Flux 2.7 or later."""
FLUX_FOLDERS = [("platform", []), ("kueue", ["platform"]), ("teams", ["kueue"]), ("monitoring", ["platform"]),
                ("health", ["monitoring"])]


def _argocd(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg, gitops = cluster.config, cluster.config.gitops
    ns, name = gitops.controller_namespace, cfg.name
    pinned = [c.mirrored(gitops.chart_mirror) for c in lock().values() if c.chart]
    charts = sorted({c.oci_repository if c.is_oci else c.repo for c in pinned})
    project = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": name, "namespace": ns, "labels": labels(name)},
        "spec": {
            "description": f"fleetgen: everything rendered for cluster {name}",
            "sourceRepos": [gitops.repo_url, *charts],
            "destinations": [{"server": gitops.destination, "namespace": "*"}],
            "clusterResourceWhitelist": [{"group": g, "kind": k} for g, k in CLUSTER_KINDS],
            "namespaceResourceWhitelist": [{"group": g, "kind": k} for g, k in NAMESPACED_KINDS],
        },
    }
    app = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": f"{name}-fleet", "namespace": ns, "labels": labels(name),
                     "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
        "spec": {
            "project": name,
            "source": {"repoURL": gitops.repo_url, "targetRevision": gitops.revision, "path": f"rendered/{name}"},
            "destination": {"server": gitops.destination},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true", "PruneLast=true",
                                           "RespectIgnoreDifferences=true"],
                           "retry": ARGOCD_RETRY},
            "ignoreDifferences": [{"group": g, "kind": k, "jqPathExpressions": paths}
                                  for g, k, paths in KUEUE_DEFAULTED],
        },
    }
    # The platform charts make CRDs, webhooks and cluster roles of their own, which the fleet's
    # kind list must not allow; their project allows any kind, but only from the pinned chart
    # repositories and only into this cluster's destination (not `default`, not in-cluster).
    platform = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": platform_project(name), "namespace": ns, "labels": labels(name)},
        "spec": {
            "description": f"fleetgen: the pinned platform charts of cluster {name}",
            "sourceRepos": charts,
            "destinations": [{"server": gitops.destination, "namespace": "*"}],
            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
        },
    }
    return [Manifest((name,), m, cluster.at("gitops")) for m in (project, platform, app, *_argocd_self(cluster))]


IN_CLUSTER = "https://kubernetes.default.svc"


SELF_KINDS = [("argoproj.io", "Application"), ("argoproj.io", "AppProject")]
"""What a bootstrap folder on the Argo CD control plane holds (the settings folder adds argocd-cm)."""


def _argocd_self(cluster: Loaded[ClusterConfig]) -> list[dict[str, Any]]:
    """An AppProject and Application that keep `rendered/gitops/<cluster>` itself in sync from git, so a
    new permitted kind, chart source or revision reaches a running Argo CD (applied by hand once, the
    folder was never updated). They live on the Argo CD control plane, beside the objects they own, and
    may hold only Applications and AppProjects in its namespace."""
    name = cluster.config.name
    return _synced_from_git(cluster, f"{name}-gitops", f"rendered/{GITOPS}/{name}", SELF_KINDS, labels(name),
                            f"the GitOps bootstrap of cluster {name}")


def _synced_from_git(cluster: Loaded[ClusterConfig], name: str, path: str, kinds: list[tuple[str, str]],
                     meta_labels: dict[str, str], what: str) -> list[dict[str, Any]]:
    """An AppProject and an Application, both `name`, that sync `path` of the cluster's repository into
    Argo CD's own namespace: server-side apply (fields others own stay theirs), self-heal, no prune."""
    gitops = cluster.config.gitops
    ns = gitops.controller_namespace
    project = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": name, "namespace": ns, "labels": meta_labels},
        "spec": {
            "description": f"fleetgen: {what}, synced from git",
            "sourceRepos": [gitops.repo_url],
            "destinations": [{"server": IN_CLUSTER, "namespace": ns}],
            "namespaceResourceWhitelist": [{"group": group, "kind": kind} for group, kind in kinds],
        },
    }
    app = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": ns, "labels": meta_labels},
        "spec": {
            "project": name,
            "source": {"repoURL": gitops.repo_url, "targetRevision": gitops.revision, "path": path},
            "destination": {"server": IN_CLUSTER, "namespace": ns},
            # No prune: removing a cluster from the fleet must not delete its running Applications
            # (whose finalizers would delete everything they synced); the diff shows it, a person acts.
            "syncPolicy": {"automated": {"prune": False, "selfHeal": True},
                           "syncOptions": ["ServerSideApply=true"], "retry": ARGOCD_RETRY},
        },
    }
    return [project, app]


def platform_project(cluster: str) -> str:
    """The AppProject of a cluster's platform chart Applications."""
    return f"{cluster}-platform"


ARGOCD_RETRY = {"limit": 5, "backoff": {"duration": "30s", "factor": 2, "maxDuration": "10m"}}
"""A failed sync (a CRD not yet established, a webhook not yet serving) is retried with backoff
instead of waiting for the next change in git."""


def _flux(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    cfg, gitops = cluster.config, cluster.config.gitops
    ns, name = gitops.controller_namespace, cfg.name
    source_name = f"{name}-fleet"
    source = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
              "metadata": {"name": source_name, "namespace": ns, "labels": labels(name)},
              "spec": {"interval": "1m", "url": gitops.repo_url, "ref": {"branch": gitops.revision},
                       "ignore": f"/*\n!/rendered/{name}/\n!/rendered/gitops/{name}/\n"}}
    # This folder itself, synced from git like the rest (as `flux bootstrap` keeps its own); no
    # prune, so a cluster removed from the fleet keeps running until a person removes it.
    own = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
           "metadata": {"name": f"{source_name}-gitops", "namespace": ns, "labels": labels(name)},
           "spec": {"interval": "10m", "retryInterval": "1m", "path": f"./rendered/gitops/{name}", "prune": False,
                    "sourceRef": {"kind": "GitRepository", "name": source_name}}}
    out = [Manifest((name,), source, cluster.at("gitops")), Manifest((name,), own, cluster.at("gitops"))]
    present = {"platform", "kueue", "teams"}
    if cfg.monitoring.enabled:
        present.add("monitoring")
        if cfg.health.enabled:
            present.add("health")
    folders = [(f, deps) for f, deps in FLUX_FOLDERS if f in present]
    for folder, deps in folders:
        spec: dict[str, Any] = {"interval": "10m", "retryInterval": "1m", "path": f"./rendered/{name}/{folder}",
                                "prune": True, "wait": True, "timeout": "10m",
                                "sourceRef": {"kind": "GitRepository", "name": source_name}}
        if folder == "platform":
            # Ready once the releases the other folders need are: a failing Loki or exporter
            # release must not hold back queues, teams, rules and the reconciler.
            spec["wait"] = False
            spec["healthChecks"] = [{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                                     "name": release, "namespace": ns} for release in PLATFORM_NEEDED
                                    if release != "kube-prometheus-stack" or cfg.monitoring.enabled]
        if deps:
            spec["dependsOn"] = [{"name": f"{source_name}-{dep}", "readyExpr": READY_AT_ANY_REVISION} for dep in deps]
        body = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": f"{source_name}-{folder}", "namespace": ns, "labels": labels(name)},
                "spec": spec}
        out.append(Manifest((name,), body, cluster.at("gitops")))
    return out


APPLICATION_HEALTH = """hs = {}
hs.status = "Progressing"
hs.message = ""
local errors = {DeletionError = true, InvalidSpecError = true, ComparisonError = true, SyncError = true,
                UnknownError = true}
if obj.status ~= nil then
  if obj.status.conditions ~= nil then
    for _, condition in ipairs(obj.status.conditions) do
      if errors[condition.type] then
        hs.status = "Degraded"
        hs.message = condition.type .. ": " .. (condition.message or "")
        return hs
      end
    end
  end
  if obj.status.sync ~= nil and obj.status.sync.status == "Unknown" then
    hs.message = "sync status Unknown: its manifests are not generated yet"
    return hs
  end
  if obj.status.operationState ~= nil and obj.status.operationState.phase == "Running" then
    hs.message = "sync running: " .. (obj.status.operationState.message or "")
    return hs
  end
  if obj.status.health ~= nil then
    hs.status = obj.status.health.status
    if obj.status.health.message ~= nil then
      hs.message = obj.status.health.message
    end
  end
end
return hs
"""
"""Argo CD's health check for an Application, from its operator manual (health.md, "Argocd App":
without one, removed in Argo CD 1.8, a child Application is healthy at once and the platform's sync
waves gate nothing), plus what that check misses: a child whose manifests cannot be generated (a
chart that cannot be fetched) has no resources, so its own health is Healthy. An error condition
makes it Degraded (the types of Argo CD v3.6.1, pkg/apis/application/v1alpha1/types.go:1908-1916,
whose IsError is the "Error" suffix, types.go:3797; listed because Argo CD runs health Lua without
the string library, util/lua/lua.go:141-147), and a sync status of Unknown keeps it Progressing. So does
a sync still running: the fleet twin saw a child Healthy with only its Namespace applied, mid-sync, and
the next wave's ClusterQueues created before Kueue's CRDs were established."""
SETTINGS = "argocd-settings"


SETTINGS_APP = "fleetgen-argocd-settings"
"""The AppProject and Application that keep `rendered/gitops/argocd-settings/<namespace>` in sync."""


def _argocd_settings(fleet: Fleet) -> list[Manifest]:
    """One `argocd-cm` fragment per Argo CD namespace the fleet uses, carrying only the Application
    health check: applied server-side it adds that key and leaves the rest of argocd-cm alone. Beside
    it, an Application (and its AppProject) that keeps the folder in sync from git, so a changed health
    check reaches a running Argo CD; it follows the repository and revision of the first cluster (by
    name) that uses that namespace."""
    out = []
    by_namespace: dict[str, Loaded[ClusterConfig]] = {}
    for name in sorted(fleet.clusters):
        cluster = fleet.clusters[name]
        if cluster.config.gitops.engine == "argocd":
            by_namespace.setdefault(cluster.config.gitops.controller_namespace, cluster)
    for ns, cluster in sorted(by_namespace.items()):
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "argocd-cm", "namespace": ns,
                             # Argo CD reads only ConfigMaps labelled part-of: argocd.
                             "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"}},
                "data": {"resource.customizations.health.argoproj.io_Application": APPLICATION_HEALTH}}
        out.append(Manifest((SETTINGS, ns), body, cluster.at("gitops")))
        synced = _synced_from_git(cluster, SETTINGS_APP, f"rendered/{GITOPS}/{SETTINGS}/{ns}",
                                  [("", "ConfigMap"), *SELF_KINDS], dict(MANAGED_BY),
                                  f"the Argo CD settings fleetgen needs in namespace {ns}")
        out += [Manifest((SETTINGS, ns), m, cluster.at("gitops")) for m in synced]
    return out


def compile_gitops(fleet: Fleet) -> list[Manifest]:
    """Bootstrap objects of every cluster, under rendered/gitops/<cluster>/, and the Argo CD
    settings they need, under rendered/gitops/argocd-settings/<namespace>/."""
    return [m for name in sorted(fleet.clusters) for m in
            (_argocd if fleet.clusters[name].config.gitops.engine == "argocd" else _flux)(fleet.clusters[name])
            ] + _argocd_settings(fleet)
