"""`kind: leaderworkerset`: a server too big for one node, a LeaderWorkerSet of `replicas` groups of `nodes`
pods each, a leader and its workers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds.base import Body, Kind, Operator, Refused, never_ends, status
from generator.kinds.batch import unqueued_labels
from generator.kinds.deployment import SERVER_UNUSED, SERVING_PORT, server_pod, serving_ports
from generator.kinds.jobset import dns_label_problems
from generator.kinds.podspec import job_labels, resized
from generator.kinds.rollout import Rollout, conditions, count

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME = 52
"""The longest StatefulSet name whose pods' `controller-revision-hash` label (`<name>-<hash>`, the hash up to
10 characters) still fits 63; LeaderWorkerSet names group g's StatefulSet `<name>-<g>`."""
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Labels LeaderWorkerSet puts on every pod of a set (lws v0.9.0 api/leaderworkerset/v1/
leaderworkerset_types.go:37,45): worker index 0 is each group's leader."""
LWS_LEADERS = "-leaders"
"""Suffix of the Service fleetgen makes for a LeaderWorkerSet's leaders. LeaderWorkerSet names its own Services
after the set: the headless one that gives every pod its DNS name (and so LWS_LEADER_ADDRESS) is `<name>`
(sigs.k8s.io/lws v0.9.0 pkg/controllers/leaderworkerset_controller.go:214-215, created only if no Service of
that name exists: pkg/utils/controller/controller_utils.go:33-63), and with subdomainPolicy UniquePerReplica
one per group, named after its leader pod `<name>-<group>` (pkg/controllers/pod_controller.go:116-117); its
other objects are StatefulSets `<name>` and `<name>-<group>` and ControllerRevisions, no Services. A name
ending in a word is none of these."""


def leaders_service(name: str) -> str:
    """The Service of LeaderWorkerSet `name`'s leaders (LWS_LEADERS)."""
    return f"{name}{LWS_LEADERS}"


LWS_RESERVED_ENV = frozenset({"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"})
"""What LeaderWorkerSet's pod webhook sets in every container (leaderworkerset_types.go:67-75)."""


LWS = Operator(key="lws", title="LeaderWorkerSet's controller", api_groups=("leaderworkerset.x-k8s.io",),
               member_resources=("leaderworkersets",), instead="deployment", release="lws",
               multikueue_refusal="a LeaderWorkerSet v0.9.0 has no spec.managedBy, so its controller would also run "
                                  "the manager's copy of every LeaderWorkerSet that MultiKueue dispatches")
"""The LeaderWorkerSet chart aggregates no role to `edit`."""


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """Group g's StatefulSet <name>-<g> labels its pods <sts>-<10-char hash>."""
    problems = dns_label_problems(name)
    budget = LWS_NAME - len(f"-{(profile.replicas or 1) - 1}")
    if len(name) > budget:
        problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: the last group's "
                        f"StatefulSet '{name}-{(profile.replicas or 1) - 1}' would be over {LWS_NAME}, too long "
                        f"for its pods' controller-revision-hash label; shorten it by {len(name) - budget}")
    return problems


def leaderworkerset(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
                    nodes: int | None = None, image: str | None = None,
                    command: list[str] | None = None) -> dict[str, Any]:
    """The LeaderWorkerSet of a `kind: leaderworkerset` profile: `replicas` groups of `nodes` pods (the
    leader is each group's first), all running the server as written, each pod pinned to the pool with
    its GPUs and share. A group is recreated whole when one of its pods restarts (a multi-node server
    cannot lose a member), and a rollout replaces one group at a time within the same GPUs. Kueue admits
    each group as one Workload (kueue v0.19.2 pkg/controller/jobs/leaderworkerset/
    leaderworkerset_reconciler.go:283)."""
    profile = resized(profile, nodes, image, command)
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                         "labels": job_labels(team, cluster, profile)},
            "spec": {"replicas": profile.replicas or 1, "startupPolicy": "LeaderCreated",
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "maxUnavailable": 1, "maxSurge": 0}},
                     # A StatefulSet's pods always restart (its default); LeaderWorkerSet labels them by name.
                     "leaderWorkerTemplate": {"size": profile.nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": server_pod(team, cluster, profile, None)}}}


def leaders_service_of(job: Body) -> Body | None:
    """A LeaderWorkerSet's Service on its leaders' port (None without a port)."""
    meta = job.get("metadata") or {}
    ports = serving_ports(job["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"])
    if not ports:
        return None
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": leaders_service(meta["name"]), "namespace": meta["namespace"],
                         "labels": unqueued_labels(job)},
            "spec": {"selector": {LWS_NAME_LABEL: meta["name"], LWS_WORKER_INDEX_LABEL: "0"},
                     "ports": [{"name": SERVING_PORT, "port": ports[0]["containerPort"], "targetPort": SERVING_PORT}]}}


def _pod_groups(body: Body) -> list[tuple[int, Body]]:
    """`replicas` groups of `size` pods (the leader like its workers)."""
    spec = body.get("spec") or {}
    lws = spec.get("leaderWorkerTemplate") or {}
    replicas, size = spec.get("replicas"), lws.get("size")
    return [((replicas if isinstance(replicas, int) else 1) * (size if isinstance(size, int) else 1),
             lws.get("workerTemplate") or {})]


def _services(body: Body) -> list[tuple[str, str]]:
    """LeaderWorkerSet names its headless Service after the set (lws v0.9.0 pkg/controllers/
    leaderworkerset_controller.go:213-217), or with subdomainPolicy UniquePerReplica one per group after its
    leader pod `<name>-<group>` (pkg/controllers/pod_controller.go:116-117)."""
    spec, name = body.get("spec") or {}, str((body.get("metadata") or {}).get("name") or "")
    if (spec.get("networkConfig") or {}).get("subdomainPolicy") == "UniquePerReplica":
        return [(f"{name}-{group}", f"the headless Service LeaderWorkerSet makes for group {group}")
                for group in range(int(spec.get("replicas") or 1))]
    return [(name, "the headless Service LeaderWorkerSet makes for its pods' DNS names (LWS_LEADER_ADDRESS)")]


def pods(body: Body, name: str) -> str:
    """A LeaderWorkerSet's pods: the set's name, which LeaderWorkerSet labels each with."""
    return f"{LWS_NAME_LABEL}={name}"



def leaderworkerset_rollout(obj: dict[str, Any]) -> Rollout | None:
    """The LeaderWorkerSet's rollout (groups of the old template remain), or None."""
    update = conditions(obj).get("UpdateInProgress") or {}
    if update.get("status") != "True":
        return None
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    wanted = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    return Rollout(count(status, "updatedReplicas"), wanted)


# A multi-node server's LeaderWorkerSet: LeaderWorkerSet labels every pod with its name, and counts the groups
# whose pods are all ready; ranks are its pods in name order, as a Deployment's.
KIND = Kind(
    name="leaderworkerset", what="a LeaderWorkerSet", kind="LeaderWorkerSet", group="leaderworkerset.x-k8s.io",
    version="v1", plural="leaderworkersets", operator=LWS, frameworks=("leaderworkerset.x-k8s.io/leaderworkerset",),
    build=leaderworkerset, companion=leaders_service_of, name_problems=name_problems,
    refused=Refused(fields=SERVER_UNUSED, why="its groups serve until deleted, a group recreated whole when one of "
                    "its pods restarts, the leader being each group's first pod"),
    reserved_env=LWS_RESERVED_ENV, reserved_by="by LeaderWorkerSet on every pod", serving=True, grouped=True,
    cpu_only=True, pods=pods, ended=never_ends, active=lambda o: int(status(o).get("readyReplicas") or 0),
    rank=lambda body, name, rank: pods(body, name), log_container="server",
    shape=("spec.replicas?:int", "spec.leaderWorkerTemplate.size?:int",
           "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].ports?[].name?:str",
           "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].resources?.requests?{}:quantity",
           "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].resources?.limits?{}:quantity"),
    pod_groups=_pod_groups, operator_services=_services, companion_purpose="serving address",
    rollout=leaderworkerset_rollout,
    doc="`leaderworkerset`: a server too big for one node (the cluster file needs `operators.lws`): a\n"
        "LeaderWorkerSet of `replicas` groups of `nodes` pods each, a leader and its workers, all running\n"
        "`command` and `args` as written with LeaderWorkerSet's `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE` and\n"
        "`LWS_WORKER_INDEX` set; a group is recreated whole when one of its pods restarts, Kueue admits each\n"
        "group as one Workload against the team's quota, and `port` is served by the leaders. No `launcher`,\n"
        "`failFastExitCodes`, `masterPort`, `maxRestarts`, `leader` or `maxExecutionTime`.")
