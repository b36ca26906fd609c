"""MultiKueue: a manager cluster dispatching the teams' jobs to worker clusters.

On the manager: a MultiKueueCluster per worker (its kubeconfig in a Secret created out of band:
no credentials in git), and per team a MultiKueueConfig naming the workers where the team has
quota, with the AdmissionCheck its ClusterQueue carries. On each worker: what the manager's
ServiceAccount may do there, and nothing more: read the queue objects and the kinds it mirrors
cluster-wide (its client watches them), write them only in the namespaces of teams the manager
dispatches.
"""

from __future__ import annotations

from typing import Any

from generator.compile.kueue import SHARED, _obj, team_folder
from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig, MultiKueue
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import dispatched_frameworks

RBAC = "rbac.authorization.k8s.io"
CONTROLLER = "kueue.x-k8s.io/multikueue"
KUEUE_NAMESPACE = "kueue-system"
MIRRORED = {"batch/job": ("batch", "jobs"), "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
            "ray.io/rayjob": ("ray.io", "rayjobs"), "ray.io/raycluster": ("ray.io", "rayclusters"),
            "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs")}
"""Per Kueue integration a manager dispatches, the (group, resource) it creates on a worker for a
dispatched job, beside the Workload (Kueue's MultiKueue adapters copy the job object alone)."""


def _resources(dispatched: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """API groups and resources of the Workload and of the kinds a manager dispatches."""
    pairs = [("kueue.x-k8s.io", "workloads")] + [MIRRORED[f] for f in dispatched if f in MIRRORED]
    return list(dict.fromkeys(g for g, _ in pairs)), [r for _, r in pairs]


def read_rules(dispatched: tuple[str, ...]) -> list[dict[str, list[str]]]:
    """Cluster-wide: the manager's client watches these kinds and the queues on each worker."""
    groups, resources = _resources(dispatched)
    return [
        {"apiGroups": groups, "resources": resources, "verbs": ["get", "list", "watch"]},
        {"apiGroups": groups, "resources": [f"{r}/status" for r in resources], "verbs": ["get"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"],
         "verbs": ["get", "list", "watch"]},
    ]


def write_rules(dispatched: tuple[str, ...]) -> list[dict[str, list[str]]]:
    """In the namespaces of the teams it dispatches: create and delete the copies, update Workloads."""
    groups, resources = _resources(dispatched)
    return [
        {"apiGroups": groups, "resources": resources, "verbs": ["create", "delete", "patch", "update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
    ]

def service_account(manager: str) -> str:
    """The ServiceAccount on a worker that a manager acts as."""
    return f"multikueue-{manager}"


def manager_grant(manager: str) -> tuple[dict[str, str], str]:
    """(subject, ClusterRole) of the one binding a worker adds in a dispatched team's namespaces."""
    return ({"kind": "ServiceAccount", "name": service_account(manager), "namespace": KUEUE_NAMESPACE},
            f"fleetgen-{service_account(manager)}-write")


def manager_objects(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """On the manager: MultiKueueClusters, and per team its MultiKueueConfig and AdmissionCheck."""
    cfg, mk = cluster.config, cluster.config.multikueue
    if mk is None:
        return []
    out = []
    for i, worker in enumerate(mk.workers):
        body = _obj(cfg, "MultiKueueCluster", worker)
        body["spec"] = {"clusterSource": {"kubeConfig": {"location": MultiKueue.secret(worker),
                                                         "locationType": "Secret"}}}
        out.append(Manifest(SHARED, body, cluster.at("multikueue", "workers", i)))
    for team in teams:
        name = MultiKueue.check_name(team.config.name)
        config = _obj(cfg, "MultiKueueConfig", name, team=team.config.name)
        config["spec"] = {"clusters": mk.workers_for(team.config.quotas)}
        check = _obj(cfg, "AdmissionCheck", name, team=team.config.name)
        check["spec"] = {"controllerName": CONTROLLER,
                         "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}}
        out += [Manifest(SHARED, body, team.at("quotas", cfg.name)) for body in (config, check)]
    return out


def worker_objects(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """On a worker, per manager dispatching to it: its ServiceAccount with a token Secret (filled by
    the cluster's token controller, read out of band into the manager's kubeconfig Secret), read
    rights cluster-wide and write rights in the namespaces of the teams it dispatches."""
    cfg = cluster.config
    out: list[Manifest] = []
    for manager in cfg.managers:
        sa = service_account(manager)
        meta = {"namespace": KUEUE_NAMESPACE, "labels": labels(cfg.name)}
        out.append(Manifest(SHARED, {"apiVersion": "v1", "kind": "ServiceAccount",
                                     "metadata": {"name": sa, **meta}}, cluster.at("name")))
        token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                 "metadata": {"name": f"{sa}-token", **meta, "annotations": {"kubernetes.io/service-account.name": sa}}}
        out.append(Manifest(SHARED, token, cluster.at("name")))
        grantee, write_role = manager_grant(manager)
        subject = [grantee]
        dispatched = tuple(dispatched_frameworks(*cfg.dispatched_by(manager)))
        for suffix, rules in (("read", read_rules(dispatched)), ("write", write_rules(dispatched))):
            out.append(Manifest(SHARED, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                                         "metadata": {"name": f"fleetgen-{sa}-{suffix}", "labels": labels(cfg.name)},
                                         "rules": rules}, cluster.at("name")))
        out.append(Manifest(SHARED, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                                     "metadata": {"name": f"fleetgen-{sa}-read", "labels": labels(cfg.name)},
                                     "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                                 "name": f"fleetgen-{sa}-read"},
                                     "subjects": subject}, cluster.at("name")))
        for team in teams:
            if manager not in team.config.quotas:
                continue  # the manager dispatches none of its jobs
            for ns in team.config.namespace_names:
                body: dict[str, Any] = {
                    "apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                    "metadata": {"name": f"fleetgen-{sa}", "namespace": ns,
                                 "labels": labels(cfg.name, team.config.name)},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": write_role},
                    "subjects": subject}
                # In the team's folder, with everything else in its namespaces (the tenancy check
                # allows exactly this binding besides the members': `manager_grant`).
                out.append(Manifest(team_folder(team.config.name) + (ns,), body, team.at("quotas", manager)))
    return out


def compile_multikueue(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every MultiKueue object of one cluster (none unless it is a manager or a worker)."""
    return manager_objects(cluster, teams) + worker_objects(cluster, teams)
