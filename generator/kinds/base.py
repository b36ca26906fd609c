"""What a job kind is, and what an operator that runs kinds is: two frozen records of facts and named
functions, one of each per module under generator/kinds/, read through the registry (generator.kinds)
by the checks, the compilers, the validators, member RBAC, the SDK and the command line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from generator.kinds.rollout import Rollout, no_rollout, nothing_refused

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile

Body = dict[str, Any]
"""A Kubernetes object as data."""
MEMBER_VERBS = ("create", "delete", "get", "list", "patch", "watch")
"""What a team member may do with a job of a kind in the team's namespaces (no update: a job is replaced,
not edited in place)."""


@dataclass(frozen=True, kw_only=True)
class Reach:
    """A connection an operator opens itself to pods of the kinds it runs, rather than through the API
    server: the deny-by-default ingress of fleetgen's isolation policy would cut it, so a NetworkPolicy
    lets exactly this in (compile/isolation.py)."""

    name: str
    """What it is for, in that NetworkPolicy's name: "dashboard"."""
    pods: tuple[tuple[str, str], ...]
    """(label, value) of each label of the team pods it connects to."""
    port: int
    """The TCP port it connects to on those pods (a NetworkPolicy matches the pod's own port, after a
    Service's translation)."""


@dataclass(frozen=True, kw_only=True)
class Operator:
    """A job operator the platform installs beside Kueue and JobSet (KubeRay, Kubeflow Trainer,
    LeaderWorkerSet's controller): the kinds it runs name it, and where a cluster does not turn it on,
    those kinds are refused."""

    key: str
    """Its switch in cluster files: `operators.<key>` (generator/config/platform.py: Operators)."""
    title: str
    """What it is called in messages: "KubeRay"."""
    api_groups: tuple[str, ...]
    """API groups of the CRDs its chart brings (not the schema catalog's: validate says its templates are
    unchecked where no schema of theirs is at hand, instead of refusing them)."""
    member_resources: tuple[str, ...]
    """Resources of `api_groups[0]` team members may create, follow and delete in their own namespaces where
    it runs (its chart aggregates none of its roles to `edit`)."""
    instead: str
    """The kind to use where a cluster does not run it."""
    release: str
    """The component that installs it, in `generator/versions.yaml` and `generator/releases.yaml`: its chart,
    and the key of a cluster file's `versions` that pins it."""
    member_reads: tuple[str, ...] = ()
    """Resources of `api_groups[0]` members may only read, in their own namespaces, where it runs."""
    member_cluster_reads: tuple[str, ...] = ()
    """Cluster-scoped resources of `api_groups[0]` members may read where it runs (the platform's objects
    their jobs refer to by name)."""
    reads_why: str = ""
    """Why members read `member_reads` and `member_cluster_reads` (docs/reference/member-rights.md)."""
    multikueue_refusal: str = ""
    """Why a MultiKueue manager may not turn it on ("" where it may, and then dispatches its kinds: every
    worker must run it too)."""
    namespace: str = ""
    """Where it has `reaches`: the namespace the platform installs it in (compile/platform.py)."""
    pods: tuple[tuple[str, str], ...] = ()
    """Where it has `reaches`: (label, value) of each label its chart puts on its own pods under fleetgen's
    release, which the NetworkPolicy letting them in names."""
    reaches: tuple[Reach, ...] = ()
    """Connections it opens to pods in team namespaces, each let in from its pods alone where it runs."""

    def runs_in(self, cluster: ClusterConfig) -> bool:
        """Whether the cluster file turns it on."""
        return bool(getattr(cluster.operators, self.key))


@dataclass(frozen=True, kw_only=True)
class Refused:
    """Profile fields a kind has no use for, refused where they are set, and why."""

    fields: tuple[tuple[str, str], ...]
    """(model field, key in team files) of each."""
    why: str
    """Why the kind has no use for them: ends the message "<what> has no <key>: <why>"."""
    fix: str = ""
    """More to the fix than removing the field (", or use kind: jobset to choose it")."""


NameRule = Callable[[str, "JobProfile"], list[str]]
"""Why a name cannot name a job of a profile of this kind (its object's and its pods' name limits)."""
Companion = Callable[[Body], Body | None]
"""The Service a job needs beside it, created with it (None where it needs none)."""
Selector = Callable[[Body, str], str]
"""The label selector of a job's pods, from its object and its name."""
RankSelector = Callable[[Body, str, int], str]
"""The label selector of node `rank`'s pods (the job's object, its name, the rank); UsageError past the last."""


PodGroups = Callable[[Body], list[tuple[int, Body]]]
"""(pods, pod template) of each group of identical pods of a job when all its pods run."""
POD_PORTS = "template.spec.containers[].ports?[].name?:str"
POD_REQUESTS = "template.spec.containers[].resources?.requests?{}:quantity"
POD_LIMITS = "template.spec.containers[].resources?.limits?{}:quantity"
"""Paths (generator.jobs.shape's notation) the SDK reads in a pod template: its ports' names and resources."""


def no_services(body: Body) -> list[tuple[str, str]]:
    """A kind whose operator makes no Service of its own."""
    return []


def no_companion(body: Body) -> Body | None:
    """A kind whose operator makes every Service it needs (or that needs none)."""
    return None


def condition(obj: Body | None, kind: str) -> Body | None:
    """The condition `kind` of an object's status, if it has one."""
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def status(obj: Body) -> Body:
    """An object's status ({} before its controller wrote one)."""
    return obj.get("status") or {}


def ended_by_condition(succeeded: str) -> Callable[[Body], tuple[str, str] | None]:
    """How a JobSet, a Job or a TrainJob says it ended: condition `succeeded`, or Failed, set True."""
    def ended(obj: Body) -> tuple[str, str] | None:
        for kind, phase in ((succeeded, "succeeded"), ("Failed", "failed")):
            cond = condition(obj, kind)
            if cond and cond.get("status") == "True":
                return phase, str(cond.get("message") or cond.get("reason") or "")
        return None
    return ended


def never_ends(obj: Body) -> tuple[str, str] | None:
    """A server, or a Ray cluster: it runs until deleted."""
    return None


def no_restarts(obj: Body) -> int:
    """Restarts its status does not count (a server's are the kubelet's, in each pod's status)."""
    return 0


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One kind of job a profile renders (`kind:` in team files), all of what fleetgen knows of it: its API,
    its operator and Kueue integration, the fields it refuses and why, its name limits, the builder of its
    object and of the Service beside it, and how the SDK reads its status, pods, ranks and logs."""

    name: str
    """The profile's `kind` (and `--kind` on the command line): "jobset"."""
    what: str
    """What its object is called in messages: "a JobSet"."""
    doc: str
    """What a profile of this kind renders and runs, for the team-file reference (a paragraph)."""
    kind: str
    """Its object's Kubernetes kind: "JobSet"."""
    group: str
    """Its object's API group ("" for the core group)."""
    version: str
    """Its object's API version within the group."""
    plural: str
    """Its object's resource name."""
    operator: Operator | None = None
    """The operator that runs it, where the platform installs one for it (JobSet and the built-in kinds:
    None)."""
    frameworks: tuple[str, ...]
    """The Kueue integrations that must be on for Kueue to queue it (else it runs outside the team's quota)."""
    build: Callable[..., Body]
    """`build(team, cluster, profile, name=, nodes=, image=, command=)`: its object for `profile`."""
    companion: Companion = no_companion
    """The Service a job of this kind needs beside it, created with it."""
    name_problems: NameRule
    """Why a name cannot name a job of this kind (its limits), if it cannot."""
    refused: Refused | None = None
    """Profile fields it has no use for."""
    leader_refused: tuple[str, str] | None = None
    """(why, fix) where it refuses `leader`; `{what}` in why is replaced by `what`."""
    reserved_env: frozenset[str] = frozenset()
    """Environment variables others set in its pods, refused in the profile's `env`."""
    reserved_by: str = ""
    """Who sets `reserved_env`: ends "<NAME> is set <reserved_by>"."""
    runs_program: bool = True
    """Whether its pods run the profile's program (`command` required); a RayCluster runs Ray only."""
    serving: bool = False
    """A server: it never finishes and serves on `port`; Kueue admits each of its pods (or groups) on its
    own, so the SDK reads its status from their Workloads."""
    grouped: bool = False
    """Runs `replicas` groups of `nodes` pods (a LeaderWorkerSet), each admitted as one Workload labelled
    with the object's uid; `replicas` is refused elsewhere."""
    cpu_only: bool = False
    """May run on the cluster's CPU pool (a server that runs its command as written)."""
    skypilot: bool = False
    """Also rendered as a SkyPilot task (a batch program SkyPilot's nodes can run)."""
    own_grace: bool = True
    """Its pods' grace period is the profile's (a TrainJob's runtime decides its own)."""
    manager_problem: Callable[[JobProfile], tuple[str, str] | None] = lambda profile: None
    """(problem, fix) where a MultiKueue manager cannot dispatch this profile's job."""
    sdk_job: bool = True
    """The SDK's `Job` handles it (a RayCluster is reached through generator.jobs.ray.RayCluster)."""
    pods: Selector
    """The label selector of all the pods of a job of this kind."""
    ended: Callable[[Body], tuple[str, str] | None]
    """(phase, why) once it has ended: succeeded or failed."""
    active: Callable[[Body], int]
    """Pods active (created, not finished) in its status; for a RayJob, 1 while Ray runs it."""
    restarts: Callable[[Body], int] = no_restarts
    """Restarts so far, as its status counts them."""
    rank: RankSelector
    """The label selector of node `rank`'s pods."""
    not_child: str = ""
    """A selector term that keeps jobs only: it leaves out the objects of this kind another job made (a
    JobSet's Jobs), or that are no profile's (the platform's own Deployments)."""
    log_container: str = "trainer"
    """The container whose log `logs` reads."""
    shape: tuple[str, ...]
    """The paths of its object the SDK reads (generator.jobs.shape's notation), refused by name when missing or
    of the wrong type before anything indexes them."""
    pod_groups: PodGroups
    """(pods, pod template) of each group of identical pods when all its pods run: what its quota check counts."""
    companion_purpose: str = ""
    """What the Service `companion` makes is for ("rendezvous hostnames"), in messages."""
    operator_services: Callable[[Body], list[tuple[str, str]]] = no_services
    """(name, what it is) of each Service its operator makes in the namespace for it."""
    owners: tuple[str, ...] = ()
    """Kinds whose objects of the job's name may own its Services (what its operator makes of it); () is its own."""
    rollout: Callable[[Body], Rollout | None] = no_rollout
    """A server's rollout to a new template under way, in its controller's words."""
    pods_refused: Callable[[Body], str] = nothing_refused
    """Why its controller cannot create its pods, as its status says ("" when nothing is refused)."""

    @property
    def api_version(self) -> str:
        """Its object's apiVersion."""
        return f"{self.group}/{self.version}" if self.group else self.version
