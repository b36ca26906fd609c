"""Issue 30, user story 2 (first part): a team member's job runs on nodes shaped like the cluster file.

The dev cluster as rendered, on the real API server with Kueue, JobSet and the Job controller;
its Nodes made from clusters/dev.yaml; kube-scheduler binds pods and kwok runs them (no kubelet).
A member submits the speech team's profile: Kueue admits it to the profile's pool, kube-scheduler
binds every pod to a node of that pool, kwok runs them to completion and the JobSet completes.
Then a node is cordoned and tainted as the health reconciler does: new pods avoid it. And every job
profile of the fleet, on its cluster's twin: bound to its pool, host for host where Kueue's
topology-aware scheduling placed it (in one block, or each slice in one domain), run to completion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet
from generator.config.jobs import JobProfile
from generator.reconciler.model import TAINT_KEY
from generator.reconciler.nodes import taint_value
from tests.conftest import REPO, SHARED, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import (
    JOB_KINDS,
    condition,
    create_nodes,
    deploy,
    fake_nodes,
    job_object,
    kustomize_build,
    rendered_kueue_config,
    topology_domains,
    workload_of,
)
from tests.upstream.processes import Process, wait_for
from tests.upstream.twin import CRI_LOG, MANAGED, Twin, bound_pods, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE = "dev", "speech", "asr-2node"
UNHEALTHY = {"key": TAINT_KEY, "value": taint_value("xid-79"), "effect": "NoSchedule"}
"""The taint the health reconciler puts on a node with a faulty GPU (reconciler/nodes.py)."""


TWIN_CONTROLLERS = ("job-controller", "deployment-controller", "replicaset-controller", "statefulset-controller",
                    "endpointslice-controller")
"""What of kube-controller-manager the twins run beyond the stack's own: Jobs' pods (JobSet's, batch
Jobs), a serving Deployment's ReplicaSet and pods, a LeaderWorkerSet's StatefulSets' pods, and the
EndpointSlices of Services (the records cluster DNS serves, pod hostnames of headless Services included)."""


@contextmanager
def running_twin(name: str, etcd: Any, workdir: Path, crds: tuple[dict[str, Any], ...] = (),
                 logs: Path | None = None, root: Path = REPO) -> Iterator[tuple[Stack, Fleet, Twin]]:
    """Cluster `name` of the fleet at `root` as rendered, its Nodes from its cluster file, kube-scheduler
    and kwok; `crds` are served before Kueue starts (an operator's kinds); `logs`, every container's log
    (Twin.start)."""
    objects = kustomize_build(root / "rendered" / name) + kustomize_build(root / "rendered" / "gitops" / name)
    stack = Stack.start(workdir, etcd, kueue_config=rendered_kueue_config(objects),
                        extra_controllers=TWIN_CONTROLLERS, crds=crds)
    try:
        fleet = load_fleet(root)
        cluster = fleet.clusters[name].config
        create_nodes(stack, fake_nodes(cluster))
        refused, _ = deploy(stack, cluster, objects, SHARED / "schemas")
        assert not refused, refused
        running = Twin.start(stack, logs)
        try:
            yield stack, fleet, running
        finally:
            running.stop()
    finally:
        stack.stop()


@contextmanager
def operator_twin(name: str, etcd: Any, workdir: Path, crds: tuple[dict[str, Any], ...],
                  start: Callable[[Stack, Path], Process], root: Path = REPO) -> Iterator[tuple[Stack, Fleet, Twin]]:
    """`running_twin` with an operator's CRDs and its process `start`ed on it (stopped after), every
    container's log being CRI_LOG (kwok serves it as each kubelet would)."""
    logs = workdir / "container.log"
    logs.write_text(CRI_LOG)
    with running_twin(name, etcd, workdir, crds=crds, logs=logs, root=root) as running:
        operator = start(running[0], workdir)
        try:
            yield running
        finally:
            operator.stop()


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"twin-{CLUSTER}")) as running:
        yield running


def submit(stack: Stack, fleet: Fleet, name: str, tmp_path: Path, team_name: str = TEAM,
            profile: str = PROFILE, runs_for: str = "") -> tuple[str, dict[str, Any]]:
    """`fleetgen job new` and `job submit` as a member; with `runs_for`, kwok keeps its pods running
    that long instead of a few seconds. Both of the pod-complete stage's annotations are needed: kwok
    takes the jitter bound (default 5 s) as the delay when it is not above the delay
    (pkg/utils/lifecycle/lifecycle.go:449-450 at v0.8.0), so `delay` alone still ends pods in 5 s."""
    team = fleet.teams[team_name].config
    who = stack.identity(f"twin-member@{team_name}.test", (team.members.groups[0],))
    path = tmp_path / f"{name}.yaml"
    made = run(REPO, "job", "new", team_name, profile, "--name", name, "-o", str(path))
    assert made.code == 0, made.err
    if runs_for:
        body = yaml.safe_load(path.read_text())
        jobs = [r["template"] for r in body["spec"]["replicatedJobs"]] if body["kind"] == "JobSet" else [body]
        for job in jobs:
            meta = job["spec"]["template"].setdefault("metadata", {})
            meta.setdefault("annotations", {}).update({"pod-complete.stage.kwok.x-k8s.io/delay": runs_for,
                                                       "pod-complete.stage.kwok.x-k8s.io/jitter-delay": runs_for})
        path.write_text(yaml.safe_dump(body))
    submitted = run(REPO, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert submitted.code == 0, submitted.err
    body = yaml.safe_load(path.read_text())
    return body["metadata"]["namespace"], body


DONE = {"JobSet": "Completed", "Job": "Complete"}
"""The condition each kind of job ends well with."""


def completed(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> bool:
    return condition(job_object(stack, namespace, name, kind), DONE[kind]).get("status") == "True"


def test_a_members_job_is_admitted_bound_to_its_pool_and_runs_to_completion(
        twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    stack, fleet, running = twin
    profile = next(p for p in fleet.teams[TEAM].config.job_profiles if p.name == PROFILE)
    ns, body = submit(stack, fleet, "twin-asr", tmp_path)
    assert wait_for(lambda: condition(workload_of(stack, ns, "twin-asr"), "Admitted").get("status") == "True", 60), \
        condition(workload_of(stack, ns, "twin-asr"), "QuotaReserved")
    selector = "jobset.sigs.k8s.io/jobset-name=twin-asr"
    bound = bound_pods(stack, ns, "twin-asr", profile.nodes)
    assert bound, f"pods not bound: {[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n" \
                  f"{running.logs()}"
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
        fleet.clusters[CLUSTER].config)}
    assert {pool_of[p.spec.node_name] for p in bound} == {profile.pool}
    gpus = [int(c.resources.limits.get("nvidia.com/gpu", 0)) for p in bound for c in p.spec.containers]
    assert sum(gpus) == profile.nodes * profile.gpus_per_node
    assert wait_for(lambda: completed(stack, ns, "twin-asr"), 90), \
        f"{[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n{running.logs()}"
    assert wait_for(lambda: condition(workload_of(stack, ns, "twin-asr"), "Finished").get("status") == "True", 60)


def test_a_cordoned_and_tainted_node_gets_no_new_pods(twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    from kubernetes import client

    stack, fleet, running = twin
    core = client.CoreV1Api(stack.client())
    profile = next(p for p in fleet.teams[TEAM].config.job_profiles if p.name == PROFILE)
    nodes = [n["metadata"]["name"] for n in fake_nodes(fleet.clusters[CLUSTER].config)
             if n["metadata"]["labels"][MANAGED] == profile.pool]
    faulty = nodes[0]
    taints = core.read_node(faulty).spec.taints or []
    core.patch_node(faulty, {"spec": {"unschedulable": True, "taints": [
        *[{"key": t.key, "value": t.value, "effect": t.effect} for t in taints], UNHEALTHY]}})
    try:
        ns, _ = submit(stack, fleet, "twin-avoid", tmp_path)
        selector = "jobset.sigs.k8s.io/jobset-name=twin-avoid"
        placed = {p.spec.node_name for p in bound_pods(stack, ns, "twin-avoid", profile.nodes)}
        assert placed, f"{[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n{running.logs()}"
        assert faulty not in placed and placed <= set(nodes[1:]), placed
        assert wait_for(lambda: completed(stack, ns, "twin-avoid"), 90)
    finally:
        core.patch_node(faulty, {"spec": {"unschedulable": False, "taints": [
            {"key": t.key, "value": t.value, "effect": t.effect} for t in taints] or None}})


PROFILES = sorted((team, profile.name) for team, loaded in load_fleet(REPO).teams.items()
                  for profile in loaded.config.job_profiles if profile.kind in ("jobset", "job"))
"""The profiles this twin runs to completion: the operators' kinds run on twins with their operators
(tests/test_ray.py, tests/test_trainer.py), and a server never completes (tests/test_serving.py)."""
"""Every job profile of the example fleet (team, profile), each submitted on its cluster's twin; a
RayJob's on the twin that runs KubeRay (tests/test_ray.py), a TrainJob's on the one that runs Kubeflow
Trainer (tests/test_trainer.py)."""


@pytest.fixture(scope="module")
def twins(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One running twin per cluster, started when a profile first needs it."""
    from contextlib import ExitStack

    with ExitStack() as stack_of_twins:
        started: dict[str, Any] = {}

        def get(name: str) -> tuple[Stack, Fleet, Twin]:
            if name not in started:
                started[name] = stack_of_twins.enter_context(
                    running_twin(name, upstream_etcd, tmp_path_factory.mktemp(f"twin-{name}")))
            return started[name]  # type: ignore[no-any-return]

        yield {"get": get}


@pytest.mark.parametrize(("team_name", "profile_name"), PROFILES)
def test_every_profile_runs_on_its_pool_where_kueue_placed_it(twins: dict[str, Any], team_name: str,
                                                             profile_name: str, tmp_path: Path) -> None:
    """User story 2 for each profile: a member submits it; Kueue admits it to the profile's pool;
    kube-scheduler binds every pod to a node of that pool (with topology: to exactly the hosts Kueue's
    topology-aware scheduling chose, in one block, or each slice in one domain of its level); kwok runs
    them to completion."""
    team = load_fleet(REPO).teams[team_name].config
    profile = next(p for p in team.job_profiles if p.name == profile_name)
    stack, fleet, running = twins["get"](profile.cluster)
    name = f"twin-{profile_name}"
    ns, body = submit(stack, fleet, name, tmp_path, team_name, profile_name)
    kind = body["kind"]
    assert wait_for(lambda: condition(workload_of(stack, ns, name, kind), "Admitted").get("status") == "True", 90), \
        condition(workload_of(stack, ns, name, kind), "QuotaReserved")
    bound = placed_where_kueue_chose(stack, fleet.clusters[profile.cluster].config, ns, name, profile, running.logs,
                                     kind)
    if kind == "Job" and profile.nodes > 1:
        rendezvous_resolves(stack, ns, name, bound)
    assert wait_for(lambda: completed(stack, ns, name, kind), 150), running.logs()


def rendezvous_resolves(stack: Stack, namespace: str, name: str, bound: list[Any]) -> None:
    """A batch Job's rank 0 is where every pod's MASTER_ADDR points: the Job controller named pod 0's
    host `<job>-0` in the subdomain the template gives, which is the Service `job submit` created, and
    that Service selects the job's pods (the DNS records a cluster's DNS serves for it)."""
    from kubernetes import client

    first = next(p for p in bound if p.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "0")
    master = {e.name: e.value for e in first.spec.containers[0].env}["MASTER_ADDR"]
    assert f"{first.spec.hostname}.{first.spec.subdomain}" == master, (first.spec.hostname, first.spec.subdomain)
    service = client.CoreV1Api(stack.client()).read_namespaced_service(first.spec.subdomain, namespace)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    assert all(p.metadata.labels.items() >= service.spec.selector.items() for p in bound), service.spec.selector
    owner = service.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("Job", name)  # the garbage collector deletes it with the Job


def placed_where_kueue_chose(stack: Stack, cluster: ClusterConfig, namespace: str, name: str, profile: JobProfile,
                             logs: Callable[[], str] = str, kind: str = "JobSet") -> list[Any]:
    """The admitted job's pods, once one is bound per node, after checking where: every pod on a node
    of the profile's pool; with topology, on exactly the hosts Kueue's topology-aware scheduling chose,
    all in one domain of its level, or whole slices in each domain of the slice level."""
    label = JOB_KINDS[kind][3]
    selector = f"{label}={name}"
    bound = bound_pods(stack, namespace, name, profile.nodes, 120, label)  # one pod per node
    assert bound, f"{[(p.metadata.name, p.status.phase) for p in pods(stack, namespace, selector)]}\n{logs()}"
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in fake_nodes(cluster)}
    assert {nodes[p.spec.node_name][MANAGED] for p in bound} == {profile.pool}
    if profile.topology is not None:
        assigned = sorted(h for hosts in topology_domains(workload_of(stack, namespace, name, kind),
                                                          "kubernetes.io/hostname").values() for h in hosts)
        hosts = sorted(p.spec.node_name for p in bound)
        assert hosts == assigned, (hosts, assigned)  # one pod per host Kueue chose, and only there
        if profile.topology.slice is None:
            assert len({nodes[h].get(profile.topology.level) for h in hosts}) == 1, hosts
        else:
            per_domain = Counter(nodes[h].get(profile.topology.slice.level) for h in hosts)
            assert all(n % profile.topology.slice.size == 0 for n in per_domain.values()), per_domain
    return bound


def hosts_of(workload: dict[str, Any] | None) -> set[str]:
    return {h for hosts in topology_domains(workload, "kubernetes.io/hostname").values() for h in hosts}


def brief_workload(workload: dict[str, Any] | None) -> str:
    status = (workload or {}).get("status") or {}
    return yaml.safe_dump({"conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                                          for c in status.get("conditions") or []],
                           "unhealthyNodes": status.get("unhealthyNodes"),
                           "hosts": sorted(hosts_of(workload))})
