"""A team's GPU jobs onto the queue that holds its GPUs, where its own queue cannot.

For a team whose GPUs of some resource are only in a pool shared by usage (`config/routes.py`), a
MutatingAdmissionPolicy relabels a job created in the team's first namespace that asks for that
resource and names no queue, `default` or the team's own queue: `kueue.x-k8s.io/queue-name` becomes
the team's LocalQueue on the shared pool, so Kueue queues it there with the team's other jobs on the
pool, one tenant, instead of leaving it pending for ever on a queue without the resource. Mutating
policies run before webhooks (kubernetes v1.36.3 pkg/kubeapiserver/options/plugins.go:114-115), so
Kueue's defaulting webhook sees the label and does not give the job `default`
(kueue v0.19.2 pkg/controller/jobframework/defaults.go:79-97). CPU-only jobs are left alone: they
stay on the team's queue and the CPU pool.
"""

from __future__ import annotations

from generator.compile.admission import (
    INTEGRATION_KINDS,
    in_namespaces,
    integration_kinds,
    labelling_policy,
    policy_binding,
)
from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.routes import SharedRoute, shared_routes
from generator.config.team import TeamConfig

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_CORE_GROUPS = ("", "apps", "batch")


def _asks_for(resource: str) -> str:
    """CEL over container `c`: its requests or limits name `resource` (Kueue counts a limit as the
    request when none is set, kueue v0.19.2 pkg/util/resource/resource.go)."""
    return (f"has(c.resources) && ((has(c.resources.requests) && '{resource}' in c.resources.requests) || "
            f"(has(c.resources.limits) && '{resource}' in c.resources.limits))")


def _pod_asks(expr: str, resource: str) -> str:
    """CEL: the pod spec `expr` has a container or init container asking for `resource`."""
    return " || ".join(f"(has({expr}.{field}) && {expr}.{field}.exists(c, {_asks_for(resource)}))"
                       for field in ("containers", "initContainers"))


def templates_ask(expr: str, steps: tuple[str, ...], resource: str, depth: int = 0) -> str:
    """CEL: a pod spec at `steps` under `expr` ("[]": each item of a list, "{}": each value of a map)
    asks for `resource`."""
    if not steps:
        return f"({_pod_asks(expr, resource)})"
    step, rest = steps[0], steps[1:]
    if step == "[]":
        var = f"i{depth}"
        return f"{expr}.exists({var}, {templates_ask(var, rest, resource, depth + 1)})"
    if step == "{}":
        var = f"k{depth}"
        return f"{expr}.exists({var}, {templates_ask(f'{expr}[{var}]', rest, resource, depth + 1)})"
    return f"has({expr}.{step}) && {templates_ask(f'{expr}.{step}', rest, resource, depth)}"


def _kind_asks(group: str, resource_name: str, paths: tuple[tuple[str, ...], ...], gpu: str) -> str:
    """CEL: the request is for this kind and one of its pod templates asks for `gpu`."""
    asks = " || ".join(f"({templates_ask('object', p, gpu)})" for p in paths)
    return f"(request.resource.group == '{group}' && request.resource.resource == '{resource_name}' && ({asks}))"


def _not_a_child(groups: list[str]) -> str:
    """CEL: the object is not made by another Kueue workload (a JobSet's Jobs, a RayJob's RayCluster, a
    TrainJob's JobSet, a LeaderWorkerSet's StatefulSets): Kueue queues the parent, not the child. A pod
    anything owns is left alone (its owner is the workload, or it is not Kueue's)."""
    owners = " || ".join(f"o.apiVersion.startsWith('{g}/')" for g in groups)
    return ("!(request.resource.group == '' && request.resource.resource == 'pods' && "
            "has(object.metadata.ownerReferences)) && !(has(object.metadata.ownerReferences) && "
            f"object.metadata.ownerReferences.exists(o, {owners}))")


def _queue_expression(routes: list[SharedRoute], kinds: list[tuple[str, str, tuple[tuple[str, ...], ...]]]) -> str:
    """The label's value: the queue of the first routed resource the object's templates ask for."""
    value = f"'{routes[-1].local_queue}'"
    for route in reversed(routes[:-1]):
        asks = " || ".join(_kind_asks(g, r, p, route.resource) for g, r, p in kinds)
        value = f"(({asks}) ? '{route.local_queue}' : {value})"
    return value


def routing_policy(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """The team's relabelling policy and its binding to its first namespace (where its queues on the
    shared pools are); nothing where the team's queue holds all its GPUs or the API server serves no
    MutatingAdmissionPolicy (before Kubernetes 1.36: `checks/advice.py` warns)."""
    cfg, tcfg = cluster.config, team.config
    routes = shared_routes(cfg, tcfg)
    kinds = [INTEGRATION_KINDS[f] for f in integration_kinds(cfg)]
    kinds = [k for k in kinds if k[2]]  # a TrainJob's templates are in its runtime: it is always labelled
    if not routes or not cfg.mutating_policies or not kinds:
        return []
    name = f"fleetgen-shared-queue-{tcfg.name}"
    parents = sorted({g for g, _, _ in kinds if g not in _CORE_GROUPS} | {"trainer.kubeflow.org"})
    asks = " || ".join(_kind_asks(g, r, p, route.resource) for route in routes for g, r, p in kinds)
    own = ", ".join(f"'{q}'" for q in ("default", tcfg.name))
    policy = labelling_policy(name, labels(cfg.name, tcfg.name), [(group, resource) for group, resource, _ in kinds], [
        {"name": "on-the-teams-own-queue", "expression": (
            f"!(has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels) || "
            f"object.metadata.labels['{QUEUE_LABEL}'] in [{own}]")},
        {"name": "not-a-child-workload", "expression": _not_a_child(parents)},
        {"name": "asks-for-a-shared-pool-gpu", "expression": asks},
    ], QUEUE_LABEL, _queue_expression(routes, kinds))
    binding = policy_binding(name, labels(cfg.name, tcfg.name), in_namespaces([routes[0].namespace]), mutating=True)
    where = team.at("quotas", cfg.name)
    # Beside the team's other admission policies: cluster-scoped, and the platform team's to own.
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]


def compile_queue_routing(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every team's relabelling policy in the cluster."""
    return [m for team in teams for m in routing_policy(cluster, team)]

