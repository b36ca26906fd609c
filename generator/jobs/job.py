"""Jobs for ML engineers: instantiate a team's profile, submit it, watch it, read logs, cancel.

    from generator.jobs import Job, connect
    job = Job.from_profile("ml-research", "pretrain-4node", nodes=8)
    job.submit(connect(context="prod-west"))
    print(job.status())
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.jobs.connection import guarded, timeout

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
KUEUE, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands, as Kueue and JobSet see it."""

    name: str
    phase: str
    """pending | admitted | running | succeeded | failed."""
    reason: str = ""
    flavors: dict[str, str] = field(default_factory=dict)
    restarts: int = 0

    def __str__(self) -> str:
        text = f"{self.name}: {self.phase}"
        if self.flavors:
            text += " on " + ", ".join(f"{pod_set} -> {flavor}" for pod_set, flavor in sorted(self.flavors.items()))
        if self.restarts:
            text += f" (restarted {self.restarts}x)"
        return text + (f": {self.reason}" if self.reason else "")


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


class Job:
    """A JobSet to submit (from a profile or a file), or one already on the cluster."""

    def __init__(self, body: dict[str, Any], api: Any = None) -> None:
        if body.get("kind") != "JobSet" or not (body.get("metadata") or {}).get("name"):
            raise UsageError("not a JobSet: a job file needs kind: JobSet and metadata.name")
        self.body = body
        self.api = api

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"].get("namespace") or "default")

    @classmethod
    def from_profile(cls, team: str, profile: str, *, root: str | Path = ".", name: str | None = None,
                     nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> Job:
        """A concrete JobSet from a team's profile in the fleet repository at `root`."""
        from generator.compile.jobs import jobset, name_problems
        from generator.config.fleet import load_fleet

        fleet = load_fleet(Path(root))
        if team not in fleet.teams:
            raise UsageError(f"unknown team {team!r}; known: {', '.join(sorted(fleet.teams))}")
        tcfg = fleet.teams[team].config
        found = next((p for p in tcfg.job_profiles if p.name == profile), None)
        if found is None:
            known = ", ".join(p.name for p in tcfg.job_profiles) or "(none)"
            raise UsageError(f"team {team!r} has no job profile {profile!r}; known: {known}")
        if nodes is not None:
            if nodes < 1:
                raise UsageError("--nodes must be at least 1")
            found = found.model_copy(update={"nodes": nodes})
        problems = name_problems(name or found.name, found)
        if problems:
            raise UsageError("; ".join(problems))
        cluster = fleet.clusters[found.cluster].config
        return cls(jobset(tcfg, cluster, found, name=name, image=image, command=command))

    @classmethod
    def from_file(cls, path: str | Path) -> Job:
        """A JobSet from a YAML file (as written by `fleetgen job new`)."""
        import yaml

        try:
            body = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"cannot read job file {path}: {exc}") from None
        return cls(body if isinstance(body, dict) else {})

    @classmethod
    def on_cluster(cls, api: Any, name: str, namespace: str) -> Job:
        """A handle on a job that was submitted before."""
        return cls({"kind": "JobSet", "metadata": {"name": name, "namespace": namespace}}, api)

    def _objects(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    def _require_api(self, api: Any) -> None:
        self.api = api or self.api
        if self.api is None:
            raise UsageError("no cluster connection: pass an ApiClient (see generator.jobs.connect)")

    @guarded("submit job {self.name}")
    def submit(self, api: Any = None) -> Job:
        """Create the JobSet; Kueue queues it in the team's LocalQueue."""
        self._require_api(api)
        self.body = self._objects().create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.body, _request_timeout=timeout(self.api))
        return self

    @guarded("read job {self.name}")
    def status(self, api: Any = None) -> JobStatus:
        """Kueue admission and JobSet progress: pending (with the reason), admitted, running, finished."""
        self._require_api(api)
        objects = self._objects()
        current = objects.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name,
                                                       _request_timeout=timeout(self.api))
        restarts = int((current.get("status") or {}).get("restarts") or 0)
        for kind, phase in (("Completed", "succeeded"), ("Failed", "failed")):
            cond = _condition(current, kind)
            if cond and cond.get("status") == "True":
                return JobStatus(self.name, phase, cond.get("message") or cond.get("reason") or "", restarts=restarts)
        uid = current["metadata"].get("uid", "")
        workloads = objects.list_namespaced_custom_object(
            KUEUE, KUEUE_VERSION, self.namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uid}",
            _request_timeout=timeout(self.api))["items"]
        if not workloads:
            return JobStatus(self.name, "pending", "Kueue has not created a Workload yet (check the "
                             "kueue.x-k8s.io/queue-name label and that the LocalQueue exists)", restarts=restarts)
        workload = workloads[0]
        admitted = _condition(workload, "Admitted")
        if not admitted or admitted.get("status") != "True":
            reserved = _condition(workload, "QuotaReserved")
            reason = (reserved or admitted or {}).get("message") or "waiting in the queue"
            return JobStatus(self.name, "pending", reason, restarts=restarts)
        flavors = {}
        for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            names = sorted(set((assignment.get("flavors") or {}).values()))
            flavors[assignment.get("name", "")] = ",".join(names)
        suspended = (current.get("spec") or {}).get("suspend")
        active = sum(int(j.get("active") or 0) for j in (current.get("status") or {}).get("replicatedJobsStatus") or [])
        phase = "running" if active and not suspended else "admitted"
        return JobStatus(self.name, phase, "", flavors, restarts)

    def _pod_for_rank(self, rank: int) -> tuple[str, str]:
        from kubernetes import client

        jobs = [(rj["name"], int(rj["template"]["spec"].get("completions") or 1))
                for rj in (self.body.get("spec") or {}).get("replicatedJobs") or []]
        if not jobs:  # a handle without the spec: assume one workers job
            jobs = [("workers", rank + 1)]
        offset = 0
        for rjob, pods in jobs:  # noqa: B007 - rjob and index are used after the loop
            if rank < offset + pods:
                index = rank - offset
                break
            offset += pods
        else:
            raise UsageError(f"rank {rank} is out of range: the job has {offset} nodes")
        selector = (f"jobset.sigs.k8s.io/jobset-name={self.name},jobset.sigs.k8s.io/replicatedjob-name={rjob},"
                    f"batch.kubernetes.io/job-completion-index={index}")
        pods_found = client.CoreV1Api(self.api).list_namespaced_pod(self.namespace, label_selector=selector,
                                                                     _request_timeout=timeout(self.api)).items
        if not pods_found:
            raise UsageError(f"no pod yet for rank {rank} of job {self.name} (is it admitted? see `job status`)")
        names = sorted((str(p.metadata.creation_timestamp or ""), str(p.metadata.name))
                       for p in pods_found if p.metadata is not None)
        return names[-1][1], rjob

    @guarded("read the logs of job {self.name}")
    def logs(self, api: Any = None, rank: int = 0, follow: bool = False) -> Iterator[str]:
        """Log lines of the training container of node `rank` (0 is the rendezvous master)."""
        from kubernetes import client

        self._require_api(api)
        if "spec" not in self.body:
            self.body = self._objects().get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL,
                                                                     self.name, _request_timeout=timeout(self.api))
        pod, _ = self._pod_for_rank(rank)
        response: Any = client.CoreV1Api(self.api).read_namespaced_pod_log(
            pod, self.namespace, container="trainer", follow=follow, _preload_content=False,
            _request_timeout=timeout(self.api))
        pending = b""
        for chunk in response.stream(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")

    @guarded("cancel job {self.name}")
    def cancel(self, api: Any = None) -> None:
        """Delete the JobSet and its pods (Kueue releases the quota)."""
        self._require_api(api)
        self._objects().delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name,
                                                        propagation_policy="Foreground",
                                                        _request_timeout=timeout(self.api))


@dataclass
class JobList:
    """`fleetgen job list`: jobs of a team, or every fleetgen job the user can see."""

    api: Any

    @guarded("list jobs")
    def jobs(self, namespaces: list[str] | None = None, team: str | None = None) -> list[Job]:
        from kubernetes import client

        objects = client.CustomObjectsApi(self.api)
        selector = f"fleetgen.io/team={team}" if team else "app.kubernetes.io/managed-by=fleetgen"
        items: list[dict[str, Any]] = []
        if namespaces:
            for ns in namespaces:
                found: Any = objects.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, label_selector=selector,
                                                                   _request_timeout=timeout(self.api))
                items.extend(found["items"])
        else:
            everywhere: Any = objects.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector=selector,
                                                                 _request_timeout=timeout(self.api))
            items = list(everywhere["items"])
        return [Job(item, self.api) for item in sorted(items, key=lambda i: (i["metadata"].get("namespace", ""),
                                                                          i["metadata"]["name"]))]
