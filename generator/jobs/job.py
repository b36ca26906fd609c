"""Jobs for ML engineers: instantiate a team's profile, submit it, watch it, read logs, cancel.

A job is an object of one of the kinds in generator.kinds (a profile's `kind`, each reached as its record
says); `KINDS` holds those the SDK's `Job` handles.

    from generator.jobs import Job, connect
    job = Job.from_profile("ml-research", "pretrain-4node", nodes=8)
    job.submit(connect(context="prod-west"))
    print(job.status())
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from generator.config.yamlsource import MAX_FILE_BYTES, parse_source
from generator.connection import ClusterError, Connection, guarded, timeout, word
from generator.errors import InputError, UsageError
from generator.jobs import pods, presubmit, workloads
from generator.jobs.shape import refuse_misshapen
from generator.kinds import KINDS as REGISTRY
from generator.kinds import companion_service, job_object, kind_of, unknown_kind
from generator.kinds.base import Kind
from generator.repofiles import read_named

if TYPE_CHECKING:
    from generator.config.fleet import Fleet

MILESTONES = {"admitted": {"admitted", "running", "succeeded", "failed"}, "running": {"running", "succeeded", "failed"},
              "finished": {"succeeded", "failed"}}
"""`job wait --for X`: the phases in which X has been reached (a job that finished was admitted)."""


KINDS: dict[str, Kind] = {k.kind: k for k in REGISTRY if k.sdk_job}
"""Every kind of job the SDK's `Job` handles, by its object's Kubernetes kind (generator.kinds; a `kind:
raycluster` profile makes a RayCluster, which generator.jobs.ray handles)."""
KIND_OPTIONS = {k.name: k.kind for k in KINDS.values()}
"""Each `--kind` and the Kubernetes kind it names."""


class ConfigurationError(ValueError):
    """A job or Ray cluster defined in Python that Kueue, an operator or the API server would refuse, or
    fleetgen's rules forbid; each bad argument is named, and nothing was created."""


def _argument(loc: Any) -> str:
    """A model field path as the Python argument it came from: gpusPerNode -> gpus_per_node."""
    import re

    parts = [re.sub(r"(?<!^)(?=[A-Z])", "_", str(p)).lower() for p in loc]
    return "".join(f"[{p}]" if p.isdigit() else (f".{p}" if i else p) for i, p in enumerate(parts))


def _fleet(root: str | Path | None, api: Connection | None) -> Fleet:
    """The fleet of a checkout at `root`; else the connected cluster's published files; else the checkout here."""
    if root is None and api is not None:
        from generator.jobs.published import published_fleet

        return published_fleet(api)
    from generator.checks import load_fleet

    return load_fleet(Path(root if root is not None else "."))


def _team(fleet: Fleet, team: str) -> Any:
    if team not in fleet.teams:
        where = " with a quota on this cluster" if str(fleet.root).startswith("cluster:") else ""
        raise UsageError(f"unknown team {team!r}{where}; known: {', '.join(sorted(fleet.teams)) or '(none)'}")
    return fleet.teams[team].config


def resolve_profile(team: str, profile: str, root: str | Path | None, api: Connection | None,
                    nodes: int | None) -> tuple[Fleet, Any, Any, str]:
    """(fleet, team, profile, how to name it) of TEAM's PROFILE, resized to `nodes`: from the checkout at
    `root`, or, given only `api`, from the files the connected cluster publishes."""
    fleet = _fleet(root, api)
    tcfg = _team(fleet, team)
    found = next((p for p in tcfg.job_profiles if p.name == profile), None)
    if found is None:
        known = ", ".join(p.name for p in tcfg.job_profiles) or "(none)"
        raise UsageError(f"team {team!r} has no job profile {profile!r}; known: {known}")
    if nodes is not None:
        if nodes < 1:
            raise UsageError(f"nodes must be at least 1, not {nodes}")
        found = found.model_copy(update={"nodes": nodes})
    return fleet, tcfg, found, f"{team}/{profile}" + (f" with {nodes} nodes" if nodes is not None else "")


def checked_object(fleet: Fleet, tcfg: Any, profile: Any, label: str, *, name: str | None = None,
                   image: str | None = None, command: list[str] | None = None,
                   refuse: type[Exception] = UsageError) -> dict[str, Any]:
    """The object of `profile` once the render-time rules hold for it (`refuse` names each one broken)."""
    from generator.checks.fleet import profile_problems
    if unknown_kind(profile.kind):
        raise refuse(f"{label}: kind: {unknown_kind(profile.kind)}")
    problems = kind_of(profile.kind).name_problems(name or profile.name, profile)
    if command is not None and not kind_of(profile.kind).runs_program:
        problems.append(f"a {profile.kind} profile runs no program, so none can replace it")
    if problems:
        raise refuse("; ".join(problems))
    python = refuse is ConfigurationError
    refused = [f"{_argument(field.split('.')) if python else field}: {problem}; {fix}"
               for field, problem, fix in profile_problems(fleet, tcfg, profile) if field != "name"]
    if refused:
        raise refuse(f"{label}: " + "; ".join(refused))
    return job_object(tcfg, fleet.clusters[profile.cluster].config, profile, name=name, image=image, command=command)


def read_job_file(path: str | Path) -> dict[str, Any]:
    """The object in a YAML job file ({} if it holds no mapping); UsageError if it cannot be read.

    Read as fleetgen reads a rendered file (config.yamlsource, not strict): a FIFO or device in its
    place is refused rather than waited on, and the size, depth and alias limits hold, so a file
    nested deeper than Python recurses, or an alias bomb, is an error instead of a traceback."""
    try:
        raw = read_named(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    try:
        body = parse_source(raw, str(path), strict=False).data
    except InputError as exc:
        raise UsageError(f"cannot read job file {exc}") from None
    if not isinstance(body, dict):
        return {}
    refuse_misshapen(body, f"job file {path}", UsageError)
    return body


class WaitTimedOut(ClusterError):
    """`wait` gave up before the job got where it was asked to."""


class Phased(Protocol):
    @property
    def phase(self) -> str: ...


S = TypeVar("S", bound=Phased)


def poll_phase(look: Callable[[], S], reached: set[str], not_yet: str, timeout_seconds: float, poll: float,
               progress: Callable[[S], None] | None = None) -> S:
    """`look()` every `poll` seconds until its phase is in `reached`; WaitTimedOut ("<not_yet> after N s;
    it is <last status>") after the timeout. `progress` gets each status that differs from the last."""
    deadline, last = time.monotonic() + timeout_seconds, ""
    while True:
        current = look()
        if progress is not None and str(current) != last:
            progress(current)
        last = str(current)
        if current.phase in reached:
            return current
        if time.monotonic() + poll > deadline:
            raise WaitTimedOut(f"{not_yet} after {timeout_seconds:g} s; it is {current}")
        time.sleep(poll)


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands, as Kueue and JobSet see it."""

    name: str
    phase: str
    """pending | admitted | running | succeeded | failed."""
    reason: str = ""
    flavors: dict[str, str] = field(default_factory=dict)
    restarts: int = 0
    position: str = ""
    """Where a pending job stands in its queue (Kueue's visibility API), or why that is unknown."""

    def __str__(self) -> str:
        text = f"{self.name}: {self.phase}"
        if self.position:
            text += f" ({self.position})"
        if self.flavors:
            text += " on " + ", ".join(f"{pod_set} -> {flavor}" for pod_set, flavor in sorted(self.flavors.items()))
        if self.restarts:
            text += f" (restarted {self.restarts}x)"
        return text + (f": {self.reason}" if self.reason else "")


class MadeFromFleet:
    """What a job or Ray cluster made from the fleet files remembers of them: the quota check reads them."""

    root: Path | None = None
    """The fleet repository it came from: its files are the quota the pre-submit check uses."""
    fleet: Fleet | None = None
    """That fleet, when already loaded (from_profile): the check does not read it again."""
    profile: Any = None
    """The JobProfile it was made from (from_profile, define): the quota check reads its pool."""

    def made_by(self, fleet: Fleet, profile: Any, root: str | Path | None) -> Self:
        """Remember the fleet and profile it was made from."""
        self.root, self.fleet, self.profile = (Path(root) if root is not None else None), fleet, profile
        return self


def refuse_bad_names(name: str, namespace: str) -> None:
    """UsageError unless `name` and `namespace` can name an object: they become segments of the request
    URL, and `.` or `..` there is resolved by the HTTP client (`jobsets/.` is sent as the collection,
    so a cancel would be a deletecollection)."""
    from generator.config.names import name_problem

    for label, kind, value in (("name", "job", name), ("namespace", "namespace", namespace)):
        if (problem := name_problem(kind, value)) is not None:
            raise UsageError(f"{label} {problem}")


class Job(MadeFromFleet):
    """A job of one of KINDS to submit (from a profile or a file), or one already on the cluster."""

    def __init__(self, body: dict[str, Any], api: Connection | None = None) -> None:
        if body.get("kind") not in KINDS or not (body.get("metadata") or {}).get("name"):
            raise UsageError(f"not a job: a job file needs kind: {', '.join(KINDS)}, and metadata.name")
        self.body = body
        refuse_bad_names(self.name, self.namespace)
        self.of = KINDS[body["kind"]]
        """What kind of job it is."""
        self.api = api

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"].get("namespace") or "default")

    @classmethod
    def from_profile(cls, team: str, profile: str, *, root: str | Path | None = None, api: Connection | None = None,
                     name: str | None = None, nodes: int | None = None, image: str | None = None,
                     command: list[str] | None = None) -> Job:
        """A concrete job (its object as the profile's `kind` builds it) from a team's profile: in the
        fleet repository at `root`, or, given only `api`, in the fleet files the connected cluster
        publishes (no checkout needed). A `kind: raycluster` profile is a Ray cluster: RayCluster.from_profile."""
        fleet, tcfg, found, label = resolve_profile(team, profile, root, api, nodes)
        if not kind_of(found.kind).runs_program:
            raise UsageError(f"{team}/{profile} is a Ray cluster (kind: raycluster), not a job: " + word(
                api, "`fleetgen job submit` brings it up", f"RayCluster.from_profile({team!r}, {profile!r}, api)"))
        return cls(checked_object(fleet, tcfg, found, label, name=name, image=image, command=command), api).made_by(
            fleet, found, root)

    @classmethod
    def define(cls, team: str, name: str, image: str, command: list[str], *, nodes: int = 1,
               pool: str | None = None, cluster: str | None = None, gpus_per_node: int | None = None,
               args: list[str] | None = None, env: dict[str, str] | None = None, launcher: str | None = None,
               priority: str | None = None, max_restarts: int | None = None, shared_memory: str = "64Gi",
               max_execution_time: str | None = None, termination_grace_period_seconds: int | None = None,
               kind: str = "jobset", api: Connection | None = None, root: str | Path | None = None) -> Job:
        """A job written in Python instead of a team file's profile, checked by the same rules.

        `pool` and `cluster` default to the only ones the team has a quota in; `gpus_per_node` to the
        pool's GPUs per node; `kind` is a profile's `kind`, any that runs a program (KIND_OPTIONS; the
        team-file reference says what each makes); `launcher` defaults to torchrun, except for a RayJob,
        which has none; `max_restarts` (3) and
        `termination_grace_period_seconds` (30) default as in a team file, and a TrainJob takes neither. The team's
        facts come from `root` (a checkout) or, given only `api`, from the cluster. ConfigurationError
        names each wrong argument and what to use instead.
        """
        from pydantic import ValidationError

        from generator.config.jobs import JobProfile

        fleet = _fleet(root, api)
        tcfg = _team(fleet, team)
        clusters = sorted(c for c in tcfg.quotas if c in fleet.clusters)
        cluster = cluster or (clusters[0] if len(clusters) == 1 else None)
        if cluster is None:
            raise ConfigurationError(f"cluster= is needed: team {team!r} has quotas in {', '.join(clusters)}")
        pools = sorted(tcfg.quotas.get(cluster, {}))
        pool = pool or (pools[0] if len(pools) == 1 else None)
        if pool is None:
            raise ConfigurationError(f"pool= is needed: team {team!r} has quotas in pools {', '.join(pools)} "
                                     f"of {cluster}" if pools else f"team {team!r} has no quota in cluster {cluster!r}")
        given: dict[str, Any] = {
            "name": name, "cluster": cluster, "pool": pool, "nodes": nodes, "gpus_per_node": gpus_per_node,
            "image": image, "command": command, "args": args or [], "launcher": launcher, "priority": priority,
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()], "max_restarts": max_restarts,
            "shared_memory": shared_memory, "max_execution_time": max_execution_time,
            "termination_grace_period_seconds": termination_grace_period_seconds, "kind": kind}
        try:
            profile = JobProfile.model_validate({k: v for k, v in given.items() if v is not None},
                                                by_alias=False, by_name=True)
        except ValidationError as exc:
            raise ConfigurationError("Job.define: " + "; ".join(
                f"{_argument(e['loc'])}: {e['msg']}" for e in exc.errors())) from None
        if unknown_kind(profile.kind):
            raise ConfigurationError(f"Job.define: kind: {unknown_kind(profile.kind)}")
        if not kind_of(profile.kind).runs_program:
            raise ConfigurationError(f"Job.define: kind={profile.kind!r} is a Ray cluster, not a job: "
                                     "RayCluster(ClusterConfiguration(...), api)")
        return cls(checked_object(fleet, tcfg, profile, f"Job.define({team!r}, {name!r})", refuse=ConfigurationError),
                   api).made_by(fleet, profile, root)

    @classmethod
    def from_file(cls, path: str | Path) -> Job:
        """A job of one of KINDS from a YAML file (as written by `fleetgen job new`)."""
        return cls(read_job_file(path))

    @classmethod
    def on_cluster(cls, api: Connection, name: str, namespace: str, kind: str = "JobSet") -> Job:
        """A handle on a job that was submitted before (`kind`: one of KINDS)."""
        if kind not in KINDS:
            raise UsageError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        return cls({"kind": kind, "metadata": {"name": name, "namespace": namespace}}, api)

    def _objects(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self._connected.client)

    def _require_api(self, api: Connection | None) -> Connection:
        self.api = api or self.api
        if self.api is None:
            raise UsageError("no cluster connection: pass a Connection (see generator.jobs.connect)")
        return self.api

    @property
    def _connected(self) -> Connection:
        """The connection every call to the cluster goes over (UsageError without one)."""
        return self._require_api(None)

    @guarded("check job {self.name}")
    def check(self, api: Connection | None = None) -> list[presubmit.Outcome]:
        """Pre-submit checks: rights, LocalQueue, priority, and the team's quota in the fleet files."""
        self._require_api(api)
        return presubmit.run_checks(self._connected, self.body, self.fleet, self.root, self.profile, self.of)

    @guarded("submit job {self.name}")
    def submit(self, api: Connection | None = None, dry_run: bool = False, check: bool = True) -> Job:
        """Create the job (Kueue queues it in the team's LocalQueue) after the pre-submit checks; a batch
        Job of several nodes gets its rendezvous Service, and a serving Deployment or LeaderWorkerSet with a
        port its Service, owned by it (deleted with it).

        `dry_run` sends it through the API server, its admission webhooks (JobSet's or Kueue's) and
        RBAC without storing it. A failed check raises SubmitRefused and creates nothing.
        """
        self._require_api(api)
        refuse_misshapen(self.body, f"{self.of.kind} {self.name}", UsageError)
        # The Service names are checked even without the other checks: a job whose Service name is taken
        # would be created and then either fail on its Service (409) or run with another's.
        presubmit.refuse(self.name, self.check() if check else [presubmit.services_free(self._connected, self.body)])
        mode = "All" if dry_run else None
        created = self._objects().create_namespaced_custom_object(
            self.of.group, self.of.version, self.namespace, self.of.plural, self.body, dry_run=mode,
            _request_timeout=timeout(self.api))
        service = companion_service(self.body)
        if service is not None:
            from kubernetes import client

            uid = (created.get("metadata") or {}).get("uid")
            if uid:  # the garbage collector deletes the Service with its Job
                service["metadata"]["ownerReferences"] = [{"apiVersion": self.of.api_version, "kind": self.of.kind,
                                                           "name": self.name, "uid": uid}]
            body: Any = service
            client.CoreV1Api(self._connected.client).create_namespaced_service(
                self.namespace, body, dry_run=mode, _request_timeout=timeout(self.api))
        if not dry_run:
            self.body = created
        return self

    def _read(self) -> dict[str, Any]:
        """The job's object; UsageError where another job runs it (a TrainJob's JobSet, a JobSet's Job), whose
        operator would recreate what was cancelled and whose status is the one to follow."""
        found: dict[str, Any] = self._objects().get_namespaced_custom_object(
            self.of.group, self.of.version, self.namespace, self.of.plural, self.name,
            _request_timeout=timeout(self.api))
        owners = (found.get("metadata") or {}).get("ownerReferences") or []
        owner = next((o for o in owners if isinstance(o, dict) and o.get("controller") and o.get("kind") in KINDS),
                     None)
        if owner is not None:
            of, name = KINDS[str(owner["kind"])], str(owner.get("name") or "")
            raise UsageError(f"{self.namespace}/{self.name} is the {self.of.kind} of {of.kind} {name}, which makes it: "
                             "follow or cancel that one (" + word(self.api, f"--kind {of.name}",
                             f"Job.on_cluster(api, {name!r}, {self.namespace!r}, kind={of.kind!r})") + ")")
        return found

    @guarded("read job {self.name}")
    def status(self, api: Connection | None = None) -> JobStatus:
        """Kueue admission and the job's progress: pending (with every reason and the queue position),
        admitted, running, succeeded, failed."""
        self._require_api(api)
        current = self._read()
        if self.of.serving:
            return self._serving_status(current)
        restarts = self.of.restarts(current)
        ended = self.of.ended(current)
        if ended is not None:
            return JobStatus(self.name, ended[0], ended[1], restarts=restarts)
        workload = workloads.workload_of(self._connected, self.namespace, current["metadata"].get("uid", ""))
        if workload is None:
            queue = (current["metadata"].get("labels") or {}).get(presubmit.QUEUE_LABEL)
            return JobStatus(self.name, "pending", "Kueue has not created a Workload yet (check the "
                             f"{presubmit.QUEUE_LABEL} label{f' ({queue})' if queue else ''} and that the LocalQueue "
                             "exists: " + word(self.api, "`fleetgen job submit --dry-run`", "check()")
                             + " checks both)", restarts=restarts)
        pending = workloads.waiting(self._connected, self.namespace, workload)
        if pending is not None:
            return JobStatus(self.name, "pending", pending[0], restarts=restarts, position=pending[1])
        flavors = {}
        for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            names = sorted(set((assignment.get("flavors") or {}).values()))
            flavors[assignment.get("name", "")] = ",".join(names)
        suspended = (current.get("spec") or {}).get("suspend")
        phase = "running" if self.of.active(current) and not suspended else "admitted"
        worker = (workload.get("status") or {}).get("clusterName")
        if worker:  # a MultiKueue manager's flavors are its own bookkeeping; the worker runs the job (and its pods)
            return JobStatus(self.name, phase, f"dispatched by MultiKueue to worker cluster {worker}", {}, restarts)
        if suspended:
            return JobStatus(self.name, phase, "", flavors, restarts)
        # Admitted: running only once a pod is (a Job counts pods active while they wait to be
        # scheduled or pulled); otherwise why not, in the scheduler's or the kubelet's words.
        found = pods.states(self._connected, self.namespace, self.of.pods(current, self.name))
        started = any(state in pods.RUNNING for state in found.values())
        waiting = any(state not in pods.RUNNING for state in found.values())
        reason = pods.summary(found) if waiting else ""
        if phase == "running" and not started:
            return JobStatus(self.name, "admitted", reason or "no pod yet", flavors, restarts)
        return JobStatus(self.name, phase, reason, flavors, restarts)

    def _serving_status(self, current: dict[str, Any]) -> JobStatus:
        """A server's: pending while Kueue holds any of its pods (the first one's reasons and queue
        position), admitted until every replica is ready, then running; said first, a rollout to a new
        template under way and whether its controller says it is stuck."""
        found = self._serving_state(current)
        moving = self.of.rollout(current)
        if moving is None:
            return found
        return replace(found, reason=f"{moving}; {found.reason}" if found.reason else str(moving))

    def _serving_state(self, current: dict[str, Any]) -> JobStatus:
        """A server's phase from its pods' Workloads and readiness."""
        from kubernetes import client

        spec = current.get("spec") or {}
        wanted = int(spec["replicas"]) if isinstance(spec.get("replicas"), int) else 1
        ready = self.of.active(current)
        found = sorted((str(p.metadata.name), str(p.metadata.uid or ""), pods.state(p)) for p in client.CoreV1Api(
            self._connected.client).list_namespaced_pod(self.namespace, label_selector=self.of.pods(current, self.name),
                                          _request_timeout=timeout(self.api)).items if p.metadata is not None)
        held, unit = [], "groups" if self.of.grouped else "pods"
        if self.of.grouped:  # one Workload per group, each labelled with the object's uid
            groups = workloads.workloads_of(self._connected, self.namespace, str(current["metadata"].get("uid", "")))
            if not groups:
                return JobStatus(self.name, "pending" if wanted else "admitted", "Kueue has not created a Workload "
                                 "yet" if wanted else "scaled to 0 replicas")
            for group in groups:
                pending = workloads.waiting(self._connected, self.namespace, group)
                if pending is not None:
                    held.append((str(group["metadata"].get("name")), *pending))
            units = len(groups)
        elif not found:
            why = self.of.pods_refused(current)
            return JobStatus(self.name, "pending" if wanted else "admitted",
                             ("no pod yet" + (f": {why}" if why else "")) if wanted else "scaled to 0 replicas")
        else:
            for pod_name, uid, _ in found:
                workload = workloads.workload_of(self._connected, self.namespace, uid)
                pending = ("Kueue has not created a Workload yet", "") if workload is None else \
                    workloads.waiting(self._connected, self.namespace, workload)
                if pending is not None:
                    held.append((pod_name, *pending))
            units = len(found)
        if held:
            held_name, reason, position = held[0]
            return JobStatus(self.name, "pending", f"{len(held)} of {units} {unit} held by Kueue; {held_name}: "
                             f"{reason}", position=position)
        if ready >= wanted:
            return JobStatus(self.name, "running", f"{ready}/{wanted} replicas ready")
        states = {pod_name: state for pod_name, _, state in found}  # from the one listing above
        return JobStatus(self.name, "admitted", f"{ready}/{wanted} replicas ready; {pods.summary(states)}")

    def wait(self, api: Connection | None = None, until: str = "finished", timeout_seconds: float = 3600.0,
             poll: float = 5.0, progress: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Block until the job is admitted, running or finished (`until`); WaitTimedOut after the timeout.

        `progress` is called with each status that differs from the last one seen.
        """
        if until not in MILESTONES:
            raise UsageError(f"wait until one of {', '.join(MILESTONES)}, not {until!r}")
        if until == "finished" and self.of.serving:
            raise UsageError(f"a {self.of.kind} serves until it is cancelled and never finishes: wait for admitted "
                             "or running (every replica ready)")
        return poll_phase(lambda: self.status(api), MILESTONES[until], f"job {self.name} is not {until}",
                          timeout_seconds, poll, progress)

    def _rank_selector(self, rank: int) -> str:
        """The labels of node `rank`'s pods (how, is the kind's)."""
        return self.of.rank(self.body, self.name, rank)

    def _pod_for_rank(self, rank: int) -> str:
        from kubernetes import client

        selector = self._rank_selector(rank)
        pods_found = client.CoreV1Api(self._connected.client).list_namespaced_pod(
            self.namespace, label_selector=selector, _request_timeout=timeout(self.api)).items
        if not pods_found:
            raise UsageError(f"no pod yet for rank {rank} of job {self.name} (is it admitted? see "
                             + word(self.api, "`fleetgen job status`", "status()") + ")")
        if self.of.serving:  # replicas have no ranks: rank N is the Nth pod in name order
            replicas = sorted(str(p.metadata.name) for p in pods_found if p.metadata is not None)
            if rank >= len(replicas):
                raise UsageError(f"no replica {rank} of {self.name}: it has {len(replicas)} pods now (0 is the first "
                                 "in name order)")
            return replicas[rank]
        names = sorted((str(p.metadata.creation_timestamp or ""), str(p.metadata.name))
                       for p in pods_found if p.metadata is not None)
        return names[-1][1]

    @guarded("read the logs of job {self.name}")
    def logs(self, api: Connection | None = None, rank: int = 0, follow: bool = False) -> Iterator[str]:
        """Log lines of the training container of node `rank` (0 is the rendezvous master)."""
        self._require_api(api)
        if "spec" not in self.body:
            self.body = self._read()
        yield from pods.log_lines(self._connected, self.namespace, self._pod_for_rank(rank), self.of.log_container,
                                  follow)

    @guarded("cancel job {self.name}")
    def cancel(self, api: Connection | None = None) -> None:
        """Delete the job and its pods (Kueue releases the quota; a Job's rendezvous Service goes with it)."""
        self._require_api(api)
        self._read()  # not another job's part, which its operator would make again
        self._objects().delete_namespaced_custom_object(self.of.group, self.of.version, self.namespace,
                                                        self.of.plural, self.name,
                                                        propagation_policy="Foreground",
                                                        _request_timeout=timeout(self.api))


@dataclass
class JobList:
    """`fleetgen job list`: jobs of a team, or every fleetgen job the user can see."""

    api: Connection

    @guarded("check which namespaces you may list jobs in")
    def readable(self, namespaces: list[str]) -> list[str]:
        """The namespaces among `namespaces` where the user may list JobSets (SelfSubjectAccessReview)."""
        jobsets = KINDS["JobSet"]
        return [ns for ns in namespaces if presubmit.allowed(self.api, "list", jobsets.group, jobsets.plural, ns)[0]]

    @guarded("list jobs")
    def jobs(self, namespaces: list[str] | None = None, team: str | None = None) -> list[Job]:
        """Jobs of every kind in `namespaces` (each read separately: a member has no cluster-wide
        rights), or in every namespace when None."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        objects = client.CustomObjectsApi(self.api.client)
        selector = f"fleetgen.io/team={team}" if team else "app.kubernetes.io/managed-by=fleetgen"
        items: list[dict[str, Any]] = []
        for of in KINDS.values():
            chosen = ",".join(filter(None, (selector, of.not_child)))
            for ns in namespaces if namespaces is not None else [None]:
                try:
                    listed: Any = (objects.list_namespaced_custom_object(
                        of.group, of.version, ns, of.plural, label_selector=chosen, _request_timeout=timeout(self.api))
                        if ns is not None else objects.list_cluster_custom_object(
                        of.group, of.version, of.plural, label_selector=chosen, _request_timeout=timeout(self.api)))
                except ApiException as exc:
                    # You may list JobSets there, but not this kind, or the cluster does not serve it (no KubeRay).
                    if exc.status in (403, 404) and of.kind != "JobSet":
                        continue
                    raise
                # A list's items need not name their kind (the API server leaves it out for built-in kinds).
                items.extend({**item, "kind": of.kind} for item in listed["items"])
        return [Job(item, self.api) for item in sorted(items, key=lambda i: (i["metadata"].get("namespace", ""),
                                                                          i["metadata"]["name"], i["kind"]))]
