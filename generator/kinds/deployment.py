"""`kind: deployment`: a server (inference, an evaluation service), an apps/v1 Deployment of `nodes` replicas
that runs the profile's command as written, with a ClusterIP Service on its port."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds.base import POD_LIMITS, POD_PORTS, POD_REQUESTS, Body, Kind, Refused, never_ends, status
from generator.kinds.batch import unqueued_labels
from generator.kinds.jobset import name_problems as jobset_name_problems
from generator.kinds.podspec import job_labels, pod_template, resized
from generator.kinds.rollout import STUCK_REASONS, Rollout, conditions, count, pods_refused

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

SERVING_CONTAINER = "server"
SERVING_PORT = "serving"
SERVING_INSTANCE = "app.kubernetes.io/instance"
"""A serving Deployment's container, its port's name (the Service's too), and the label that selects its pods."""
ONE_AT_A_TIME = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
"""A rollout replaces one replica at a time, within the GPUs the Deployment holds: a surge pod would need
quota the team may not have, and wait for it."""


def deployment(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
               nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The apps/v1 Deployment of a `kind: deployment` profile: `nodes` replicas of the server, each pinned to
    the pool with its GPUs and share, restarted when it exits. Kueue's deployment integration puts the
    queue and priority on its pods, which the pod integration then admits one by one (kueue v0.19.2
    pkg/controller/jobs/deployment/deployment_webhook.go:91-105)."""
    profile = resized(profile, nodes, image, command)
    name = name or profile.name
    template = server_pod(team, cluster, profile, "Always")  # the only policy a Deployment takes
    selected = {SERVING_INSTANCE: name}
    template["metadata"] = {**template.get("metadata", {}), "labels": dict(selected)}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": team.namespace_names[0],
                         "labels": job_labels(team, cluster, profile)},
            "spec": {"replicas": profile.nodes, "selector": {"matchLabels": selected}, "strategy": ONE_AT_A_TIME,
                     "template": {"metadata": template["metadata"], "spec": template["spec"]}}}


def server_pod(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile,
                restart_policy: str | None) -> dict[str, Any]:
    """A server's pod template: the command as written in container `server`, on its port when it has one."""
    env = [{"name": e.name, "value": e.value} for e in profile.env]
    program = [*profile.command, *profile.args]
    ports = [{"name": SERVING_PORT, "containerPort": profile.port}] if profile.port is not None else []
    return pod_template(team, cluster, profile, env, program[:1], program[1:], grouped=False,
                         container_name=SERVING_CONTAINER, ports=ports, restart_policy=restart_policy)


def serving_ports(pod: Body) -> list[Body]:
    """The ports named SERVING_PORT of a server's pod spec."""
    return [p for c in pod["containers"] for p in c.get("ports") or [] if p.get("name") == SERVING_PORT]


def serving_service(job: Body) -> Body | None:
    """A serving Deployment's ClusterIP Service on its port (None without a port)."""
    meta = job.get("metadata") or {}
    ports = serving_ports(job["spec"]["template"]["spec"])
    if not ports:
        return None
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": unqueued_labels(job)},
            "spec": {"selector": dict(job["spec"]["selector"]["matchLabels"]),
                     "ports": [{"name": SERVING_PORT, "port": ports[0]["containerPort"], "targetPort": SERVING_PORT}]}}


def _replicas(body: Body) -> int:
    replicas = (body.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) else 1


def pods(body: Body, name: str) -> str:
    """A serving Deployment's pods: the instance label its template gives them."""
    return f"app.kubernetes.io/instance={name}"


SERVER_UNUSED = (("launcher", "launcher"), ("fail_fast_exit_codes", "failFastExitCodes"), ("master_port", "masterPort"),
                 ("max_restarts", "maxRestarts"), ("topology", "topology"), ("max_execution_time", "maxExecutionTime"),
                 ("leader", "leader"))
"""A server runs its command as written, on its own (no rendezvous, no topology across replicas: Kueue admits
each pod alone), and Kueue's serving integrations carry no execution limit to the pods (kueue v0.19.2
pkg/controller/jobs/deployment/deployment_webhook.go:91-105 copies the queue and priority only)."""


def deployment_rollout(obj: dict[str, Any]) -> Rollout | None:
    """The Deployment's rollout while pods of an older template remain (`status.replicas` counts every pod of
    every ReplicaSet, `updatedReplicas` those of the newest), or None (its controller has not looked at the
    latest change yet, or nothing is left to replace)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    wanted = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    updated, total = count(status, "updatedReplicas"), count(status, "replicas")
    seen = count(status, "observedGeneration") >= int((obj.get("metadata") or {}).get("generation") or 0)
    progressing = conditions(obj).get("Progressing") or {}
    stuck = STUCK_REASONS.get(str(progressing.get("reason"))) if progressing.get("status") == "False" else None
    if not seen or total <= updated:  # no pod of an older template left (a first start is no rollout)
        return None
    problem = pods_refused(obj) or (f"the Deployment controller says it {stuck}: {progressing.get('message')}"
                               if stuck else "")
    return Rollout(updated, wanted, problem)


# A serving profile's Deployment: its pods carry the instance label fleetgen selects them by, and run
# container `server`; restarts are the kubelet's, in each pod's status.
KIND = Kind(
    name="deployment", what="a Deployment", kind="Deployment", group="apps", version="v1", plural="deployments",
    frameworks=("deployment", "pod"), build=deployment, companion=serving_service,
    name_problems=jobset_name_problems,
    refused=Refused(fields=SERVER_UNUSED, why="its replicas serve on their own and are restarted when they exit"),
    serving=True, cpu_only=True,
    pods=pods, ended=never_ends, active=lambda o: int(status(o).get("readyReplicas") or 0),
    rank=lambda body, name, rank: pods(body, name), not_child="fleetgen.io/profile", log_container="server",
    shape=("spec.replicas?:int", "spec.selector.matchLabels", "spec." + POD_PORTS, "spec." + POD_REQUESTS,
           "spec." + POD_LIMITS),
    pod_groups=lambda body: [(_replicas(body), (body.get("spec") or {}).get("template") or {})],
    companion_purpose="serving address", rollout=deployment_rollout, pods_refused=pods_refused,
    doc="`deployment`: a server (inference, an evaluation service): an apps/v1 Deployment of `nodes` replicas\n"
        "that runs `command` and `args` as written and is restarted when it exits, with a ClusterIP Service\n"
        "named after it on `port` when set; Kueue admits each replica's pod on its own against the team's\n"
        "quota, and a rollout replaces one replica at a time within the same GPUs. No `launcher`,\n"
        "`failFastExitCodes`, `masterPort`, `maxRestarts`, `leader`, `topology` or `maxExecutionTime`.")
