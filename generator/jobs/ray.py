"""Ray clusters from a notebook, queued by Kueue on a cluster where KubeRay runs (`operators.ray`).

    from generator.jobs import ClusterConfiguration, RayCluster, connect
    cluster = RayCluster(ClusterConfiguration(name="tune", namespace="ml-research", queue="ml-research",
                                              image="rayproject/ray:2.52.0", workers=2, worker_gpus=8),
                         connect(context="prod-east"))
    cluster.up()
    cluster.wait_ready()
    print(cluster.details().dashboard)
    for line in cluster.logs():  # the head's; logs(rank=1) is the first worker's
        print(line)
    cluster.down()

What CodeFlare's SDK offers (`up`, `status`, `details`, `down`), over the objects KubeRay v1.6.2 and
Kueue read: the RayCluster carries the team's queue label, Kueue suspends it until it is admitted,
and the status says what Kueue and the pods say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.connection import ClusterError, Connection, guarded, timeout, word
from generator.errors import UsageError
from generator.jobs import pods, presubmit, workloads
from generator.jobs.job import (
    ConfigurationError,
    MadeFromFleet,
    checked_object,
    poll_phase,
    refuse_bad_names,
    resolve_profile,
)
from generator.jobs.pods import summary as pods_summary
from generator.jobs.presubmit import PRIORITY_LABEL, QUEUE_LABEL
from generator.jobs.shape import refuse_misshapen
from generator.kinds import kind_of
from generator.kinds import raycluster as raycluster_kind
from generator.kinds.podspec import DNS_1035
from generator.quantity import QuantityError, value_of

GROUP, VERSION, PLURAL = raycluster_kind.KIND.group, raycluster_kind.KIND.version, raycluster_kind.KIND.plural
RESOURCE = presubmit.Resource(GROUP, PLURAL, "RayCluster")
GPU = "nvidia.com/gpu"
MAX_NAME = raycluster_kind.RAY_CLUSTER_NAME
"""KubeRay's limit."""
ORIGINATED_FROM = "ray.io/originated-from-crd"
"""The label KubeRay puts on a RayCluster it made for a RayJob or RayService (ray-operator v1.6.2
controllers/ray/utils/constant.go:13-18, rayjob_controller.go:972-973)."""
DASHBOARD_PORT = 8265
"""The head's dashboard port, named `dashboard` on its Service (constant.go:107,114)."""
NODE_TYPE = "ray.io/node-type"
RANKED = ("head", "worker")
"""KubeRay's node-type label and the kinds of its pods `logs` numbers, head first (constant.go:20,
apis/ray/v1/raycluster_types.go:392-393)."""
MILESTONES = {"admitted": {"starting", "ready"}, "ready": {"ready"}}
"""`wait(until)`: the phases in which `until` has been reached."""


@dataclass(frozen=True)
class ClusterConfiguration:
    """A Ray cluster as a notebook user describes it: a head, `workers` identical workers."""

    name: str
    """The RayCluster's name: DNS-1035, at most 53 characters (KubeRay's limit)."""
    namespace: str
    """One of your team's namespaces."""
    queue: str
    """Your team's LocalQueue (`fleetgen explain team <team>` names it; usually the team's name)."""
    image: str
    """The Ray image of head and workers, e.g. `rayproject/ray:2.52.0`."""
    workers: int = 1
    worker_gpus: int = 0
    worker_cpus: str = "4"
    worker_memory: str = "16Gi"
    head_cpus: str = "2"
    head_memory: str = "8Gi"
    priority: str | None = None
    """A WorkloadPriorityClass of the cluster; default: the team's defaultPriority."""
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from generator.config.types import DNS_LABEL

        problems = [text for check, text in (
            (len(self.name) <= MAX_NAME and bool(DNS_1035.match(self.name)),
             f"name={self.name!r} must be a DNS-1035 label of at most {MAX_NAME} characters (lower-case letters, "
             "digits and '-', starting with a letter)"),
            (bool(re.match(DNS_LABEL, self.namespace)), f"namespace={self.namespace!r} is not a namespace name"),
            (bool(re.match(DNS_LABEL, self.queue)), f"queue={self.queue!r} is not a queue name"),
            (bool(self.image.strip()) and not any(c.isspace() for c in self.image), f"image={self.image!r} is empty "
             "or has spaces"),
            (self.workers >= 1, f"workers={self.workers} must be at least 1"),
            (self.worker_gpus >= 0, f"worker_gpus={self.worker_gpus} must not be negative"),
        ) if not check]
        for name in ("worker_cpus", "worker_memory", "head_cpus", "head_memory"):
            text = getattr(self, name)
            try:
                if value_of(text) <= 0:
                    problems.append(f"{name}={text!r} must be more than 0")
            except QuantityError as exc:
                problems.append(f"{name}={text!r} is not a Kubernetes quantity ({exc})")
        if problems:
            raise ConfigurationError("ClusterConfiguration: " + "; ".join(problems))

    def body(self) -> dict[str, Any]:
        """The RayCluster: fixed-size groups (Kueue admits no autoscaling RayCluster), requests equal to
        limits, the queue and priority labels Kueue reads."""
        def group(container: str, cpus: str, memory: str, gpus: int = 0) -> dict[str, Any]:
            resources: dict[str, str] = {"cpu": cpus, "memory": memory, **({GPU: str(gpus)} if gpus else {})}
            return {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": container, "image": self.image,
                 "resources": {"requests": dict(resources), "limits": dict(resources)}}]}}}

        labels = {**self.labels, QUEUE_LABEL: self.queue}
        if self.priority:
            labels[PRIORITY_LABEL] = self.priority
        workers = {"groupName": "workers", "replicas": self.workers, "minReplicas": self.workers,
                   "maxReplicas": self.workers,
                   **group("ray-worker", self.worker_cpus, self.worker_memory, self.worker_gpus)}
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": labels},
                "spec": {"headGroupSpec": group("ray-head", self.head_cpus, self.head_memory),
                         "workerGroupSpecs": [workers]}}


@dataclass(frozen=True)
class RayClusterStatus:
    """Where a Ray cluster stands: queued by Kueue, then its pods, then Ray's own readiness."""

    name: str
    phase: str
    """pending (Kueue has not admitted it) | starting (admitted, pods not all running) | ready | failed."""
    reason: str = ""
    position: str = ""
    pods: dict[str, str] = field(default_factory=dict)
    """Each pod's phase, or why it is not running (the scheduler's message)."""

    def __str__(self) -> str:
        text = f"{self.name}: {self.phase}" + (f" ({self.position})" if self.position else "")
        return text + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class RayClusterDetails:
    """What a notebook needs to use the cluster."""

    name: str
    namespace: str
    status: RayClusterStatus
    head_service: str
    dashboard: str
    """The dashboard inside the cluster (`http://<head service>.<namespace>.svc:8265`)."""
    dashboard_via_api: str
    """The same through the API server's service proxy, reachable wherever your kubeconfig works."""
    workers: int
    worker_gpus: int


def _whole(value: Any) -> int:
    """A count as the API server returned it (an int, a quantity string, or nothing); 0 if unreadable."""
    try:
        return int(value_of(value)) if value is not None else 0
    except (QuantityError, TypeError, ValueError):
        return 0


class RayCluster(MadeFromFleet):
    """A RayCluster to bring up (from a ClusterConfiguration or a team's `kind: raycluster` profile), or one
    already on the cluster."""

    def __init__(self, config: ClusterConfiguration | None, api: Connection | None, *, name: str = "",
                 namespace: str = "", body: dict[str, Any] | None = None) -> None:
        if api is None and body is None:
            raise ClusterError("no cluster connection: pass generator.jobs.connect(...) as `api`")
        self.config, self.api = config, api
        self.body: dict[str, Any] | None = config.body() if config else body
        """The RayCluster `up` creates (None: a handle on one brought up before)."""
        meta = (self.body or {}).get("metadata") or {}
        self.name = str(meta.get("name") or name)
        self.namespace = str(meta.get("namespace") or namespace)
        refuse_bad_names(self.name, self.namespace)

    @classmethod
    def on_cluster(cls, api: Connection, name: str, namespace: str) -> RayCluster:
        """A handle on a Ray cluster brought up before (from another notebook, or kubectl)."""
        return cls(None, api, name=name, namespace=namespace)

    @classmethod
    def from_profile(cls, team: str, profile: str, api: Connection | None = None, *, root: str | Path | None = None,
                     name: str | None = None, nodes: int | None = None, image: str | None = None) -> RayCluster:
        """The Ray cluster of a team's `kind: raycluster` profile (pinned to its pool, with its queue, priority
        and topology), from the fleet repository at `root` or, given only `api`, from the fleet files the
        connected cluster publishes; checked by the rules render applies."""

        fleet, tcfg, found, label = resolve_profile(team, profile, root, api, nodes)
        if kind_of(found.kind).runs_program:
            raise UsageError(f"{team}/{profile} is a job (kind: {found.kind}), not a Ray cluster: "
                             + word(api, "`fleetgen job submit` runs it", f"Job.from_profile({team!r}, {profile!r})"))
        return cls(None, api, body=checked_object(fleet, tcfg, found, label, name=name, image=image)).made_by(
            fleet, found, root)

    @guarded("check Ray cluster {self.name}")
    def check(self, api: Connection | None = None) -> list[presubmit.Outcome]:
        """Pre-submit checks, as for a job: rights on RayClusters, the LocalQueue, the priority, and (made
        from a profile) the team's quota in the fleet files."""
        self.api = api or self.api
        if self.api is None or self.body is None:
            raise ClusterError("no cluster connection, or nothing to bring up: pass generator.jobs.connect(...)")
        return presubmit.run_checks(self.api, self.body, self.fleet, self.root, self.profile, RESOURCE)

    def submit(self, api: Connection | None = None, dry_run: bool = False, check: bool = True) -> RayCluster:
        """`up`, after the pre-submit checks (SubmitRefused names each one failed; nothing is created)."""
        self.api = api or self.api
        if self.body is not None:
            refuse_misshapen(self.body, f"RayCluster {self.name}", UsageError)
        if check:
            presubmit.refuse(self.name, self.check())
        return self.up(dry_run)

    def _objects(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self._connected.client)

    @property
    def _connected(self) -> Connection:
        """The connection every call to the cluster goes over (ClusterError without one)."""
        if self.api is None:
            raise ClusterError("no cluster connection: pass generator.jobs.connect(...) as `api`")
        return self.api

    @guarded("create Ray cluster {self.name}")
    def up(self, dry_run: bool = False) -> RayCluster:
        """Create it; Kueue queues it in `config.queue` and KubeRay makes its pods once it is admitted.
        `dry_run` passes it through the API server, Kueue's webhooks and RBAC without storing it."""
        if self.body is None:
            raise ClusterError(f"RayCluster.on_cluster({self.name!r}) has no configuration to bring up")
        if self.api is None:
            raise ClusterError("no cluster connection: pass generator.jobs.connect(...) as `api`")
        self._objects().create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.body,
                                                        dry_run="All" if dry_run else None,
                                                        _request_timeout=timeout(self.api))
        return self

    @guarded("look for Ray cluster {self.name}")
    def exists(self) -> bool:
        """Whether a RayCluster of this name is in the namespace."""
        from kubernetes.client.exceptions import ApiException

        try:
            self._get()
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _get(self) -> dict[str, Any]:
        found: dict[str, Any] = self._objects().get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name, _request_timeout=timeout(self.api))
        return found

    def _pods(self) -> dict[str, str]:
        return pods.states(self._connected, self.namespace, raycluster_kind.pods({}, self.name))

    @guarded("read Ray cluster {self.name}")
    def status(self) -> RayClusterStatus:
        """Kueue's word while it waits (every reason, the queue position), then its pods', then Ray's."""
        current = self._get()
        state = str((current.get("status") or {}).get("state") or "")
        if state == "failed":
            return RayClusterStatus(self.name, "failed", str((current.get("status") or {}).get("reason") or ""))
        workload = workloads.workload_of(self._connected, self.namespace,
                                         str((current.get("metadata") or {}).get("uid", "")))
        if workload is None:
            return RayClusterStatus(self.name, "pending", f"Kueue has not created a Workload yet: check the "
                                    f"{QUEUE_LABEL} label and that the LocalQueue exists")
        pending = workloads.waiting(self._connected, self.namespace, workload)
        if pending is not None:
            return RayClusterStatus(self.name, "pending", *pending)
        worker = (workload.get("status") or {}).get("clusterName")
        if worker:  # a MultiKueue manager: the state is the worker's copy's, its pods are there
            return RayClusterStatus(self.name, "ready" if state == "ready" else "starting",
                                    f"dispatched by MultiKueue to worker cluster {worker}: its pods run there")
        found = self._pods()
        if state == "ready" and all(phase == "Running" for phase in found.values()):
            return RayClusterStatus(self.name, "ready", pods=found)
        reason = pods_summary(found) if found else "KubeRay has made no pods yet"
        return RayClusterStatus(self.name, "starting", reason, pods=found)

    def wait(self, until: str = "ready", timeout_seconds: float = 600.0, poll: float = 2.0,
             progress: Callable[[RayClusterStatus], None] | None = None) -> RayClusterStatus:
        """Block until it is `admitted` (by Kueue) or `ready` (every pod running, as KubeRay says);
        WaitTimedOut (with the last status) after the timeout, ClusterError if it failed. `progress` gets
        each status that differs from the last one seen."""
        if until not in MILESTONES:
            raise ConfigurationError(f"wait(until={until!r}): until must be one of {', '.join(MILESTONES)}")
        current = poll_phase(self.status, MILESTONES[until] | {"failed"}, f"Ray cluster {self.name} is not {until}",
                             timeout_seconds, poll, progress)
        if current.phase == "failed":
            raise ClusterError(f"Ray cluster {self.name} failed: {current.reason}")
        return current

    def wait_ready(self, timeout_seconds: float = 600.0, poll: float = 2.0) -> RayClusterStatus:
        """`wait("ready")`."""
        return self.wait("ready", timeout_seconds, poll)

    @guarded("read Ray cluster {self.name}")
    def details(self) -> RayClusterDetails:
        """Status, the head Service KubeRay made, and the dashboard's addresses."""
        current = self._get()
        spec = current.get("spec") or {}
        head_service = ((spec.get("headGroupSpec") or {}).get("headService") or {}).get("metadata") or {}
        service = str(head_service.get("name") or ((current.get("status") or {}).get("head") or {}).get("serviceName")
                      or f"{self.name}-head-svc")
        groups = [g for g in spec.get("workerGroupSpecs") or [] if isinstance(g, dict)]
        containers = [c for g in groups for c in ((g.get("template") or {}).get("spec") or {}).get("containers") or []]
        gpus = max((_whole(((c.get("resources") or {}).get("limits") or {}).get(GPU)) for c in containers), default=0)
        host = str(self._connected.client.configuration.host).rstrip("/")
        return RayClusterDetails(
            self.name, self.namespace, self.status(), service,
            f"http://{service}.{self.namespace}.svc:{DASHBOARD_PORT}",
            f"{host}/api/v1/namespaces/{self.namespace}/services/{service}:dashboard/proxy/",
            sum(_whole(g.get("replicas")) for g in groups), gpus)

    @guarded("read the logs of Ray cluster {self.name}")
    def logs(self, rank: int = 0, follow: bool = False) -> Iterator[str]:
        """Log lines of its head (`rank` 0: Ray's own, and what drivers started there print) or of a worker
        (`rank` 1, 2, ... in the order of their names), from the pod's first container, the one KubeRay
        runs Ray in (ray-operator v1.6.2 controllers/ray/utils/constant.go:50-51)."""
        from kubernetes import client

        self._get()  # a 404 names the missing cluster, not missing pods
        found = client.CoreV1Api(self._connected.client).list_namespaced_pod(
            self.namespace, label_selector=raycluster_kind.pods({}, self.name),
            _request_timeout=timeout(self.api)).items
        ordered = sorted((RANKED.index(str(kind)), str(p.metadata.name), str(p.spec.containers[0].name))
                         for p in found if p.metadata is not None and p.spec is not None and p.spec.containers
                         and (kind := (p.metadata.labels or {}).get(NODE_TYPE)) in RANKED)
        if rank < 0 or rank >= len(ordered):
            where = f"it has {len(ordered)} pods now (0 is the head)" if ordered else \
                "it has no pods yet (is it admitted? see " + word(self.api, "`fleetgen job status`", "status()") + ")"
            raise UsageError(f"no rank {rank} in Ray cluster {self.name}: {where}")
        _, pod, container = ordered[rank]
        yield from pods.log_lines(self._connected, self.namespace, pod, container, follow)

    @guarded("delete Ray cluster {self.name}")
    def down(self) -> None:
        """Delete it and its pods (Kueue releases the quota)."""
        self._objects().delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name,
                                                        propagation_policy="Foreground",
                                                        _request_timeout=timeout(self.api))


class RayClusters:
    """The queued Ray clusters of some namespaces (`fleetgen job list` shows them beside the JobSets)."""

    def __init__(self, api: Connection) -> None:
        self.api = api

    @guarded("list Ray clusters")
    def in_namespaces(self, namespaces: list[str]) -> list[RayCluster]:
        """Those carrying a queue label (Kueue's to admit), by namespace and name, but not a RayJob's
        own (KubeRay labels it `ray.io/originated-from-crd`; `job list` shows the RayJob); none where
        the cluster serves no RayClusters (KubeRay is off) or you may not list them."""
        from kubernetes.client.exceptions import ApiException

        out = []
        for ns in namespaces:
            try:
                found: Any = self._objects().list_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURAL, label_selector=f"{QUEUE_LABEL},!{ORIGINATED_FROM}",
                    _request_timeout=timeout(self.api))
            except ApiException as exc:
                if exc.status == 404:
                    return []  # the kind is not served here
                if exc.status == 403:
                    continue
                raise
            out += [RayCluster.on_cluster(self.api, str(i["metadata"]["name"]), ns) for i in found.get("items") or []
                    if isinstance(i, dict) and isinstance(i.get("metadata"), dict)]
        return sorted(out, key=lambda r: (r.namespace, r.name))

    def _objects(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api.client)
