"""The example fleet on the real stack: each rendered cluster applied to a real kube-apiserver with
the Kueue and JobSet managers, then used the way a team member uses it.

No kubelet and no scheduler run: what is observed is admission (API server, webhooks, RBAC) and
what the controllers make of it (Kueue's Workloads and admission, JobSet's Jobs). Nodes exist as
objects matching each pool, so topology-aware scheduling has domains to place pods in.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from generator.config.fleet import Fleet
from generator.config.jobs import JobProfile
from generator.config.team import TeamConfig
from generator.kinds import frameworks_of
from generator.kinds.jobset import jobset
from tests.conftest import REPO, SHARED, edit, run
from tests.upstream.cluster import Identity, Stack, provisioning_request_crd
from tests.upstream.fleet import (
    JOBSET,
    KUEUE,
    ApplyError,
    apply,
    apply_all,
    condition,
    create_nodes,
    custom,
    deploy,
    fake_nodes,
    flavors,
    gpu_jobset,
    group_of,
    job_object,
    kustomization_folders,
    kustomize_build,
    platform_crds,
    rendered_kueue_config,
    topology_domains,
    workload_of,
)
from tests.upstream.processes import wait_for

RENDERED = REPO / "rendered"
MANAGERS = ("hub",)
"""MultiKueue managers: their queues need their workers, so tests/test_multikueue.py deploys them."""
CLUSTERS = sorted(p.name for p in RENDERED.iterdir() if p.is_dir() and p.name not in ("gitops", *MANAGERS))


@dataclass
class Deployed:
    """A rendered cluster applied to its own Stack."""

    name: str
    stack: Stack
    fleet: Fleet
    objects: list[dict[str, Any]]
    refused: list[str] = field(default_factory=list)
    not_served: list[str] = field(default_factory=list)

    @property
    def teams(self) -> list[TeamConfig]:
        return [t.config for t in self.fleet.teams_in(self.name)]


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    return load_fleet(REPO)


@pytest.fixture(scope="session", params=CLUSTERS)
def deployed(request: pytest.FixtureRequest, upstream_etcd: Any, fleet: Fleet,
             tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cluster's kustomize output (its tree and its GitOps wiring) server-side applied. The
    cluster autoscaler's ProvisioningRequest API is served, as where the autoscaler supports it."""
    name = str(request.param)
    objects = kustomize_build(RENDERED / name) + kustomize_build(RENDERED / "gitops" / name)
    stack = Stack.start(tmp_path_factory.mktemp(f"cluster-{name}"), upstream_etcd,
                        kueue_config=rendered_kueue_config(objects), crds=(provisioning_request_crd(),))
    try:
        cluster = fleet.clusters[name].config
        create_nodes(stack, fake_nodes(cluster))
        refused, lacking = deploy(stack, cluster, objects, SHARED / "schemas")
        yield Deployed(name, stack, fleet, objects, refused, lacking)
    finally:
        stack.stop()


def member(stack: Stack, team: TeamConfig) -> Identity:
    """A member of `team` as its file names them: a user in its first group, or its first user."""
    if team.members.groups:
        return stack.identity(f"e2e-member@{team.name}.test", (team.members.groups[0],))
    return stack.identity(team.members.users[0])


def templates(cluster: str) -> list[Path]:
    """Every Kubernetes object among the cluster's job templates (not the SkyPilot files, and not the
    RayJobs, RayClusters, TrainJobs or LeaderWorkerSets: this stack serves no KubeRay, Trainer or
    LeaderWorkerSet CRDs, so tests/test_ray.py, tests/test_trainer.py and tests/test_lws.py submit them on
    twins that do)."""
    return sorted(p for p in (RENDERED / cluster / "templates").glob("*/*.yaml")
                  if not p.name.endswith((".sky.yaml", ".rayjob.yaml", ".raycluster.yaml", ".trainjob.yaml",
                                          ".leaderworkerset.yaml"))
                  and p.name != "skypilot-config.yaml")


def admitted(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> bool:
    return condition(workload_of(stack, namespace, name, kind), "Admitted").get("status") == "True"


def gone(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        job_object(stack, namespace, name, kind)
    except ApiException as exc:
        return exc.status == 404
    return False


# ---------------------------------------------------------------------------------- the tree


@pytest.mark.parametrize("tree", [*CLUSTERS, *MANAGERS, "gitops"])
def test_kustomize_builds_every_folder(upstream_tools: None, tree: str) -> None:
    """Argo CD and Flux both run kustomize on these folders: every one must build."""
    failures = []
    for folder in kustomization_folders(RENDERED / tree):
        try:
            kustomize_build(folder)
        except ApplyError as exc:
            failures.append(str(exc))
    assert failures == []


def test_every_rendered_object_is_accepted(deployed: Deployed) -> None:
    """Server-side apply (strict fields) through the real API server and the Kueue/JobSet webhooks."""
    assert deployed.refused == [], "\n".join(deployed.refused)
    kinds = {(group_of(o), o["kind"]) for o in deployed.objects}
    assert (KUEUE, "ClusterQueue") in kinds and ("", "Namespace") in kinds
    if deployed.not_served:
        pytest.skip(f"applied everything except kinds ../shared/schemas has no schema for: {deployed.not_served}")


def test_templates_pass_the_jobset_and_kueue_webhooks(deployed: Deployed) -> None:
    """Every template, server-side dry-run: JobSet's validating webhook is what refused them before."""
    refused = []
    for path in templates(deployed.name):
        try:
            apply(deployed.stack, yaml.safe_load(path.read_text()), dry_run=True)
        except ApplyError as exc:
            refused.append(f"{path.relative_to(REPO)}: {exc}")
    assert refused == [], "\n".join(refused)


def test_cluster_queues_are_active_and_local_queues_resolve(deployed: Deployed) -> None:
    objects = custom(deployed.stack)

    def inactive() -> list[str]:
        queues = objects.list_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues")["items"]
        return [f"{q['metadata']['name']}: {condition(q, 'Active').get('message', 'no status yet')}"
                for q in queues if condition(q, "Active").get("status") != "True"]

    assert wait_for(lambda: not inactive(), 30), inactive()
    queues = {q["metadata"]["name"] for q in objects.list_cluster_custom_object(KUEUE, "v1beta2",
                                                                               "clusterqueues")["items"]}
    expected = {t.name for t in deployed.teams}
    assert expected <= queues
    locals_ = objects.list_cluster_custom_object(KUEUE, "v1beta2", "localqueues")["items"]
    assert locals_, "no LocalQueues"
    dangling = [f"{q['metadata']['namespace']}/{q['metadata']['name']} -> {q['spec']['clusterQueue']}"
                for q in locals_ if q["spec"]["clusterQueue"] not in queues]
    assert dangling == []
    assert wait_for(lambda: all(condition(q, "Active").get("status") == "True"
                                for q in objects.list_cluster_custom_object(KUEUE, "v1beta2", "localqueues")["items"]),
                    30)


# ----------------------------------------------------------------------------- team members


def test_members_submit_each_template_and_kueue_admits_it(deployed: Deployed) -> None:
    """`fleetgen job submit` as a team member (real RBAC), admitted by Kueue, Jobs created by JobSet. Not the
    servers: Kueue admits a Deployment pod by pod, as tests/test_serving.py follows on a twin."""
    paths = [p for p in templates(deployed.name) if not p.name.endswith((".service.yaml", ".deployment.yaml"))]
    if not paths:
        pytest.skip(f"no job profile targets {deployed.name}")
    for path in paths:
        submit_follow_and_cancel(deployed, path)


def submit_follow_and_cancel(deployed: Deployed, path: Path) -> None:
    """One rendered template through its whole life as a member of its team."""
    from kubernetes import client

    stack = deployed.stack
    body = yaml.safe_load(path.read_text())
    team = next(t for t in deployed.teams if t.name == body["metadata"]["labels"]["fleetgen.io/team"])
    who = member(stack, team)
    ns, name, kind = body["metadata"]["namespace"], body["metadata"]["name"], body["kind"]
    submitted = run(REPO, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert submitted.code == 0, f"{path.relative_to(REPO)} as {who.user}: {submitted.err}"
    assert wait_for(lambda: workload_of(stack, ns, name, kind), 30), f"Kueue made no Workload for {ns}/{name}"
    assert wait_for(lambda: admitted(stack, ns, name, kind), 60), \
        f"{ns}/{name} not admitted: {condition(workload_of(stack, ns, name, kind), 'QuotaReserved')}"
    profile = next(p for p in team.job_profiles if p.name == body["metadata"]["labels"]["fleetgen.io/profile"])
    assert flavors(workload_of(stack, ns, name, kind)) == {profile.pool}, "admitted outside the profile's pool"
    if kind == "Job":
        batch_job_follow_and_cancel(stack, who, body, path)
        return
    if profile.topology is not None and profile.leader is not None:
        # kueue.x-k8s.io/podset-group-name: rank 0 is placed in the block its workers are in.
        # Kueue records hosts (the lowest level); the nodes' labels say which block each is in.
        hosts = topology_domains(workload_of(stack, ns, name), "kubernetes.io/hostname")
        block_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(profile.topology.level)
                    for n in fake_nodes(deployed.fleet.clusters[deployed.name].config)}
        placed = {ps: {block_of[h] for h in names} for ps, names in hosts.items()}
        assert set(placed) == {"leader", "workers"} and placed["leader"] == placed["workers"], placed
        assert len(placed["leader"]) == 1 and None not in placed["leader"], placed
    if profile.topology is not None and profile.topology.slice is not None:
        # Kueue read the slice annotations (kueue v0.19.2 apis/kueue/v1beta2/workload_types.go:227-234),
        # and each slice's nodes (one pod per node) share a domain of the slice's level.
        slc, workload = profile.topology.slice, workload_of(stack, ns, name) or {}
        requests = [ps.get("topologyRequest") or {} for ps in workload["spec"]["podSets"]]
        assert [(r.get("podSetSliceRequiredTopology"), r.get("podSetSliceSize")) for r in requests] == \
            [(slc.level, slc.size)], requests
        domain_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(slc.level)
                     for n in fake_nodes(deployed.fleet.clusters[deployed.name].config)}
        hosts = [h for names in topology_domains(workload, "kubernetes.io/hostname").values() for h in names]
        per_domain = Counter(domain_of[h] for h in hosts)
        assert len(hosts) == profile.nodes and all(n % slc.size == 0 for n in per_domain.values()), per_domain

    # JobSet makes one Job per replicated job; rank 0's pod is reachable where MASTER_ADDR says.
    batch = client.BatchV1Api(stack.client())
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    expected = sum(int(r.get("replicas", 1)) for r in body["spec"]["replicatedJobs"])
    assert wait_for(lambda: len(batch.list_namespaced_job(ns, label_selector=selector).items) == expected, 30)
    jobs = {j.metadata.name: j for j in batch.list_namespaced_job(ns, label_selector=selector).items}
    first = body["spec"]["replicatedJobs"][0]
    rank0_job = jobs[f"{name}-{first['name']}-0"]
    subdomain = body["spec"]["network"]["subdomain"]
    assert rank0_job.spec.template.spec.subdomain == subdomain
    assert rank0_job.spec.completion_mode == "Indexed"
    env = {e["name"]: e.get("value") for e in first["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    # An Indexed Job's pod i is named host <job>-<i> (batch/v1 Job controller), in the JobSet's subdomain.
    assert env["MASTER_ADDR"] == f"{rank0_job.metadata.name}-0.{subdomain}"

    status = run(REPO, "job", "status", name, "-n", ns, "--kubeconfig", str(who.kubeconfig))
    assert status.code == 0 and f"{name}: " in status.out and ("admitted" in status.out or "running" in status.out)
    cancelled = run(REPO, "job", "cancel", name, "-n", ns, "--kubeconfig", str(who.kubeconfig))
    assert cancelled.code == 0, cancelled.err
    assert wait_for(lambda: gone(stack, ns, name), 60), f"{ns}/{name} still there after cancel"


def batch_job_follow_and_cancel(stack: Stack, who: Identity, body: dict[str, Any], path: Path) -> None:
    """A `kind: job` template once admitted: Kueue unsuspended it; `job submit` created the rendezvous
    Service the rendered file beside it describes, owned by the Job; `job status`, `job list` and
    `job cancel --kind job` work for a member, `job status` without --kind says to add it, and the
    garbage collector deletes the Service with the Job."""
    from kubernetes import client

    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    assert wait_for(lambda: job_object(stack, ns, name, "Job")["spec"].get("suspend") is False, 30)
    service = client.CoreV1Api(stack.client()).read_namespaced_service(name, ns)
    rendered = yaml.safe_load(path.with_name(path.name.replace(".job.yaml", ".service.yaml")).read_text())
    assert service.spec.selector == rendered["spec"]["selector"] and service.spec.cluster_ip == "None"
    uid = job_object(stack, ns, name, "Job")["metadata"]["uid"]
    assert [(o.kind, o.name, o.uid) for o in service.metadata.owner_references] == [("Job", name, uid)]
    pod = body["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == f"{name}-0.{pod['subdomain']}" and pod["subdomain"] == service.metadata.name
    kubeconfig = ("--kubeconfig", str(who.kubeconfig))
    status = run(REPO, "job", "status", name, "-n", ns, "--kind", "job", *kubeconfig)
    assert status.code == 0 and f"{name}: " in status.out and ("admitted" in status.out or "running" in status.out), \
        status.out + status.err
    hinted = run(REPO, "job", "status", name, "-n", ns, *kubeconfig)
    assert hinted.code == 2 and f"is a batch Job, not a JobSet: fleetgen job status {name} --namespace {ns} " \
        "--kind job" in hinted.err, hinted.err
    listed = run(REPO, "job", "list", "-n", ns, *kubeconfig)
    assert listed.code == 0 and f"{ns}/{name}: " in listed.out and "(Job)" in listed.out, listed.out + listed.err
    cancelled = run(REPO, "job", "cancel", name, "-n", ns, "--kind", "job", *kubeconfig)
    assert cancelled.code == 0, cancelled.err
    assert wait_for(lambda: gone(stack, ns, name, "Job"), 60), f"{ns}/{name} still there after cancel"
    core = client.CoreV1Api(stack.client())
    assert wait_for(lambda: name not in {s.metadata.name for s in core.list_namespaced_service(ns).items}, 60), \
        "the garbage collector left the Job's Service"


@dataclass(frozen=True)
class Borrowing:
    team: TeamConfig
    pool: str
    per_node: int
    guaranteed: int
    borrowable: int

    @property
    def first_nodes(self) -> int:
        """One node more than the guarantee covers: admitted only by borrowing."""
        return self.guaranteed // self.per_node + 1

    @property
    def second_nodes(self) -> int:
        """Just enough that both together exceed guaranteed + borrowable."""
        return (self.guaranteed + self.borrowable - self.first_nodes * self.per_node) // self.per_node + 1


def borrowing_case(deployed: Deployed) -> Borrowing | None:
    cluster = deployed.fleet.clusters[deployed.name].config
    for team in deployed.teams:
        for pool_name, quota in sorted(team.quotas[deployed.name].items()):
            pool = cluster.pool(pool_name)
            assert pool is not None
            case = Borrowing(team, pool_name, pool.gpu.per_node, quota.gpus, quota.borrowing_limit or 0)
            if case.borrowable and case.first_nodes * case.per_node - case.guaranteed <= case.borrowable \
                    and case.second_nodes * case.per_node <= case.guaranteed + case.borrowable:
                return case
    return None


def sized_job(deployed: Deployed, case: Borrowing, nodes: int, name: str) -> dict[str, Any]:
    cluster = deployed.fleet.clusters[deployed.name].config
    profile = JobProfile.model_validate({"name": name, "cluster": deployed.name, "pool": case.pool, "nodes": nodes,
                                         "image": "registry.example/e2e:1", "command": ["python", "-c", "pass"]})
    return jobset(case.team, cluster, profile)


def test_borrowing_admits_while_the_lender_is_idle_and_the_limit_holds(deployed: Deployed) -> None:
    """A job that fits only by borrowing is admitted; a second one past guaranteed + borrowable waits,
    with Kueue's own reason, and `fleetgen job status` shows that reason."""
    from generator.jobs import Job

    case = borrowing_case(deployed)
    if case is None:
        pytest.skip(f"no team in {deployed.name} has a borrowing limit a whole node can use")
    stack, team = deployed.stack, case.team
    who = member(stack, team)
    api = stack.connection(who.user, tuple(team.members.groups[:1]))
    tag = uuid.uuid4().hex[:5]
    first = Job(sized_job(deployed, case, case.first_nodes, f"borrow-{tag}"))
    second = Job(sized_job(deployed, case, case.second_nodes, f"over-{tag}"))
    ns = first.namespace
    first.submit(api)
    assert wait_for(lambda: admitted(stack, ns, first.name), 60), \
        f"borrowing job not admitted: {condition(workload_of(stack, ns, first.name), 'QuotaReserved')}"
    assert flavors(workload_of(stack, ns, first.name)) == {case.pool}, "admitted outside the job's own pool"

    def borrowed() -> list[dict[str, Any]]:
        queue = custom(stack).get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", team.name)
        return [r for f in (queue.get("status") or {}).get("flavorsReservation") or [] for r in f["resources"]
                if f["name"] == case.pool and r["name"].endswith("gpu") and r.get("borrowed") not in (None, "0")]

    assert wait_for(borrowed, 30), f"ClusterQueue {team.name} reports no borrowed GPUs"

    second.submit(api)
    assert wait_for(lambda: condition(workload_of(stack, ns, second.name), "QuotaReserved").get("message"), 30)
    reason = condition(workload_of(stack, ns, second.name), "QuotaReserved")
    assert reason["status"] == "False" and "insufficient" in reason["message"], reason
    assert not admitted(stack, ns, second.name)
    status = run(REPO, "job", "status", second.name, "-n", ns, "--kubeconfig", str(who.kubeconfig))
    assert "pending" in status.out and "insufficient" in status.out, status.out
    for job in (first, second):
        job.cancel(api)
    assert wait_for(lambda: gone(stack, ns, first.name) and gone(stack, ns, second.name), 60)


def unallocated_case(deployed: Deployed) -> tuple[Borrowing, int] | None:
    """A team and pool where a job fits only by borrowing GPUs no team holds (the root cohort's
    quota): more than guaranteed + everything the other teams lend, within the team's limit."""
    from generator.capacity import pool_capacities

    cluster = deployed.fleet.clusters[deployed.name].config
    for pool in (p for p in pool_capacities(deployed.fleet) if p.cluster == deployed.name):
        per_node = cluster.pool(pool.pool).gpu.per_node  # type: ignore[union-attr]
        free = pool.gpus - pool.allocated
        lent = {t.team: t.lendable for t in pool.teams}
        for share in pool.teams:
            others = sum(v for k, v in lent.items() if k != share.team)
            nodes = (share.guaranteed + others) // per_node + 1
            limit = share.borrowing_limit if share.borrowing_limit is not None else others + free
            if free > 0 and nodes * per_node <= share.guaranteed + min(limit, others + free):
                team = next(t for t in deployed.teams if t.name == share.team)
                return Borrowing(team, pool.pool, per_node, share.guaranteed, share.borrowable), nodes
    return None


def test_gpus_no_team_holds_are_borrowed_from_the_root_cohort(deployed: Deployed) -> None:
    """Issue 16: capacity outside every team quota was covered by no quota, so never used. The root
    Cohort's quota now holds it and Kueue lends it: a job larger than the team's guarantee plus all
    the other teams lend is admitted."""
    from generator.jobs import Job

    found = unallocated_case(deployed)
    if found is None:
        pytest.skip(f"{deployed.name} has no pool with GPUs outside the team quotas")
    case, nodes = found
    stack, team = deployed.stack, case.team
    who = member(stack, team)
    api = stack.connection(who.user, tuple(team.members.groups[:1]))
    job = Job(sized_job(deployed, case, nodes, f"unalloc-{uuid.uuid4().hex[:5]}"))
    job.submit(api)
    ns = job.namespace
    assert wait_for(lambda: admitted(stack, ns, job.name), 60), \
        f"{nodes} nodes of {case.pool} not admitted: {condition(workload_of(stack, ns, job.name), 'QuotaReserved')}"
    assert flavors(workload_of(stack, ns, job.name)) == {case.pool}
    root = custom(stack).get_cluster_custom_object(KUEUE, "v1beta2", "cohorts", deployed.name)
    assert root["spec"].get("resourceGroups"), "the root Cohort carries no quota"
    job.cancel(api)
    assert wait_for(lambda: gone(stack, ns, job.name), 60)


def test_requests_for_resources_no_queue_covers_do_not_block_admission(deployed: Deployed) -> None:
    """Issue 16: a job asking for local scratch (ephemeral-storage) or an RDMA NIC waited for ever,
    as no ClusterQueue covers those resources; `kueue.excludeResourcePrefixes` leaves them out of
    Kueue's accounting, and the real Kueue admits the job."""
    from generator.jobs import Job

    cluster = deployed.fleet.clusters[deployed.name].config
    case = next((Borrowing(t, pool, cluster.pool(pool).gpu.per_node, q.gpus, 0)  # type: ignore[union-attr]
                 for t in deployed.teams for pool, q in sorted(t.quotas[deployed.name].items())
                 # Topology-aware flavors check each node's allocatable for every requested resource,
                 # excluded or not, and the test's nodes report no ephemeral-storage: a plain flavor.
                 if q.gpus >= cluster.pool(pool).gpu.per_node  # type: ignore[union-attr]
                 and cluster.pool(pool).topology_levels is None), None)  # type: ignore[union-attr]
    if case is None:
        pytest.skip(f"no team in {deployed.name} holds a whole node of a pool without topology")
    body = sized_job(deployed, case, 1, f"scratch-{uuid.uuid4().hex[:5]}")
    for job in body["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            for part in ("requests", "limits"):
                container["resources"].setdefault(part, {}).update(
                    {"ephemeral-storage": "100Gi", "rdma/hca_shared_devices_a": "1"})
    who = member(deployed.stack, case.team)
    api = deployed.stack.connection(who.user, tuple(case.team.members.groups[:1]))
    job = Job(body)
    job.submit(api)
    ns, stack = job.namespace, deployed.stack
    assert wait_for(lambda: admitted(stack, ns, job.name), 60), \
        f"not admitted: {condition(workload_of(stack, ns, job.name), 'QuotaReserved')}"
    job.cancel(api)
    assert wait_for(lambda: gone(stack, ns, job.name), 60)


def test_members_cannot_reach_other_teams_or_the_cluster(deployed: Deployed) -> None:
    """Refused by the real RBAC authoriser: other teams' namespaces, queue wiring, anything cluster-wide."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    stack, teams = deployed.stack, deployed.teams
    if len(teams) < 2:
        pytest.skip("one team only")
    team, other = teams[0], teams[1]
    who = member(stack, team)
    api = stack.client(who.user, tuple(team.members.groups[:1]))
    own, theirs = team.namespace_names[0], other.namespace_names[0]
    probe = {"apiVersion": f"{JOBSET}/v1alpha2", "kind": "JobSet", "metadata": {"name": "intruder"},
             "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {
                 "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}]}}
    attempts = {
        f"JobSet in {theirs}": lambda: custom(stack, api).create_namespaced_custom_object(
            JOBSET, "v1alpha2", theirs, "jobsets", probe, dry_run="All"),
        f"Secrets of {theirs}": lambda: client.CoreV1Api(api).list_namespaced_secret(theirs),
        f"LocalQueue in {own}": lambda: custom(stack, api).create_namespaced_custom_object(
            KUEUE, "v1beta2", own, "localqueues", {"apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue",
                                                   "metadata": {"name": "sneaky"},
                                                   "spec": {"clusterQueue": other.name}}, dry_run="All"),
        "a ClusterQueue": lambda: custom(stack, api).create_cluster_custom_object(
            KUEUE, "v1beta2", "clusterqueues", {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue",
                                                "metadata": {"name": "sneaky"}, "spec": {"namespaceSelector": {}}},
            dry_run="All"),
        "a Namespace": lambda: client.CoreV1Api(api).create_namespace(
            {"metadata": {"name": "sneaky"}}, dry_run="All"),
        f"RoleBindings in {own}": lambda: client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
            own, {"metadata": {"name": "sneaky"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                             "kind": "ClusterRole", "name": "admin"},
                  "subjects": [{"kind": "Group", "name": "system:authenticated",
                                "apiGroup": "rbac.authorization.k8s.io"}]}, dry_run="All"),
    }
    allowed = []
    for what, attempt in attempts.items():
        try:
            attempt()
            allowed.append(what)
        except ApiException as exc:
            assert exc.status == 403, f"{what}: {exc.status} {exc.reason}"
    assert allowed == [], f"{who.user} of {team.name} could create or read: {allowed}"
    # ... while in its own namespace the same member may submit.
    custom(stack, api).create_namespaced_custom_object(JOBSET, "v1alpha2", own, "jobsets",
                                                       {**probe, "metadata": {"name": "allowed"}}, dry_run="All")


def pod_class(stack: Stack, name: str, value: int) -> None:
    """A Kubernetes PriorityClass `name` of `value`, unless the stack already has it (the deployed
    stack is shared by this module's tests)."""
    from kubernetes.dynamic.exceptions import ConflictError

    with contextlib.suppress(ConflictError):
        stack.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                      "value": value})


def test_a_team_cannot_run_above_its_allowed_priorities(deployed: Deployed) -> None:
    """Issue 16, `allowedPriorities`: a member's job labelled with a class the team may not use is
    refused when submitted; one that asks for a higher priority through its pod template's
    `priorityClassName` instead (Kueue's fallback when the label is absent) is submitted, but the
    real Kueue's Workload for it is refused by the API server, so it can never be admitted; the
    team's own class goes through."""
    from kubernetes.client.exceptions import ApiException

    stack = deployed.stack
    cluster = deployed.fleet.clusters[deployed.name].config
    team = next((t for t in deployed.teams if t.allowed_priorities), None)
    if team is None:
        pytest.skip(f"no team in {deployed.name} limits its priorities")
    values = {p.name: p.value for p in cluster.priorities}
    ceiling = max(values[p] for p in team.allowed_priorities or [])
    pool, quota = sorted(team.quotas[deployed.name].items())[0]
    per_node = cluster.pool(pool).gpu.per_node  # type: ignore[union-attr]
    case = Borrowing(team, pool, per_node, quota.gpus, quota.borrowing_limit or 0)
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    objects = custom(stack, api)

    def body(name: str) -> dict[str, Any]:
        return sized_job(deployed, case, 1, name)

    refused_class = next(p for p in sorted(values, key=values.__getitem__, reverse=True)
                         if p not in (team.allowed_priorities or []))
    # Issue 53: a pod template may name only a class of the cluster's ladder, so the way around the label
    # is a Kubernetes PriorityClass of a rung's name and value, above the team's classes.
    high = refused_class
    pod_class(stack, high, values[high])
    labelled = body(f"prio-label-{uuid.uuid4().hex[:5]}")
    labelled["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = refused_class
    with pytest.raises(ApiException) as refused:
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", labelled["metadata"]["namespace"], "jobsets",
                                                labelled)
    assert f"may use priority classes {', '.join(sorted(set(team.allowed_priorities or [])))}, " \
           f"not {refused_class}" in str(refused.value.body), refused.value.body

    sneaky = body(f"prio-pod-{uuid.uuid4().hex[:5]}")
    del sneaky["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    for job in sneaky["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["priorityClassName"] = high
    own = body(f"prio-own-{uuid.uuid4().hex[:5]}")
    ns = own["metadata"]["namespace"]
    for job in (sneaky, own):
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", job)

    def workload_refused() -> list[str]:
        return [str(e.get("responseStatus", {}).get("message")) for e in stack.audit()
                if e.get("verb") == "create" and e.get("objectRef", {}).get("resource") == "workloads"
                and e.get("objectRef", {}).get("namespace") == ns
                and e.get("responseStatus", {}).get("code", 0) >= 400
                and f"not {values[high]}" in str(e.get("responseStatus", {}).get("message"))]

    assert wait_for(workload_refused, 30), "Kueue's Workload for the pod-priority job was not refused"
    assert f"may run workloads up to priority {ceiling}" in workload_refused()[0]
    assert workload_of(stack, ns, sneaky["metadata"]["name"]) is None
    assert wait_for(lambda: workload_of(stack, ns, own["metadata"]["name"]), 30), "no Workload for the team's own"
    assert (workload_of(stack, ns, own["metadata"]["name"]) or {})["spec"].get("priority") == \
        values[own["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]]
    for job in (sneaky, own):
        objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", job["metadata"]["name"])
    assert wait_for(lambda: gone(stack, ns, sneaky["metadata"]["name"]) and gone(stack, ns, own["metadata"]["name"]),
                    60)


def test_a_drained_team_queue_evicts_admits_nothing_and_resumes(deployed: Deployed) -> None:
    """Issue 16, `stopPolicy`: the team's ClusterQueue as fleetgen renders it with HoldAndDrain, applied
    to the real Kueue, evicts the admitted job (reason ClusterQueueStopped, kueue v0.19.2
    apis/kueue/v1beta2/workload_types.go:1100) and leaves a new one pending on an inactive queue;
    lifting the stop (the field dropped) admits the evicted job again."""
    from generator.jobs import Job
    from generator.jobs.presubmit import SubmitRefused

    cluster = deployed.fleet.clusters[deployed.name]
    case = next((Borrowing(t, pool, cluster.config.pool(pool).gpu.per_node, q.gpus, 0)  # type: ignore[union-attr]
                 for t in deployed.teams for pool, q in sorted(t.quotas[deployed.name].items())
                 if q.gpus >= 2 * cluster.config.pool(pool).gpu.per_node  # type: ignore[union-attr]
                 and cluster.config.pool(pool).topology_levels is None), None)  # type: ignore[union-attr]
    if case is None:
        pytest.skip(f"no team in {deployed.name} holds two whole nodes of a pool without topology")
    stack, team = deployed.stack, deployed.fleet.teams[case.team.name]

    def queue(stop: str) -> dict[str, Any]:
        return queue_with(deployed, team.config.name, stop_policy={deployed.name: stop})

    assert queue("HoldAndDrain")["spec"]["stopPolicy"] == "HoldAndDrain" and "stopPolicy" not in queue("None")["spec"]
    api = stack.connection(member(stack, case.team).user, tuple(case.team.members.groups[:1]))
    first = Job(sized_job(deployed, case, 1, f"drain-a-{uuid.uuid4().hex[:5]}"))
    second = Job(sized_job(deployed, case, 1, f"drain-b-{uuid.uuid4().hex[:5]}"))
    first.submit(api)
    ns = first.namespace
    assert wait_for(lambda: admitted(stack, ns, first.name), 60)
    try:
        apply(stack, queue("HoldAndDrain"))
        assert wait_for(lambda: condition(workload_of(stack, ns, first.name), "Evicted").get("reason")
                        == "ClusterQueueStopped", 30), condition(workload_of(stack, ns, first.name), "Evicted")
        assert wait_for(lambda: not admitted(stack, ns, first.name), 30)
        local_queue = second.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]

        def queue_inactive() -> bool:  # Kueue marks the LocalQueue after the ClusterQueue, a moment later
            lq = custom(stack).get_namespaced_custom_object(KUEUE, "v1beta2", ns, "localqueues", local_queue)
            return condition(lq, "Active").get("status") == "False"
        assert wait_for(queue_inactive, 30)
        # `fleetgen job submit` reads the LocalQueue's status and says why it will not queue...
        with pytest.raises(SubmitRefused, match="LocalQueue '[a-z0-9-]+' is inactive"):
            second.submit(api)
        # ... while a job created without it waits on the stopped queue.
        custom(stack, api.client).create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", second.body)
        assert wait_for(lambda: f"ClusterQueue {case.team.name} is inactive" in str(
            condition(workload_of(stack, ns, second.name), "QuotaReserved").get("message")), 30), \
            condition(workload_of(stack, ns, second.name), "QuotaReserved")
        apply(stack, queue("None"))
        assert wait_for(lambda: admitted(stack, ns, first.name) and admitted(stack, ns, second.name), 60), \
            condition(workload_of(stack, ns, first.name), "QuotaReserved")
        for job in (first, second):
            job.cancel(api)
    finally:  # whatever failed, the queue runs again and its GPUs are free for the next test
        apply(stack, queue("None"))
        for job in (first, second):
            with contextlib.suppress(Exception):
                custom(stack).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", job.name,
                                                              propagation_policy="Foreground")
    assert wait_for(lambda: gone(stack, ns, first.name) and gone(stack, ns, second.name), 60)


def queue_with(deployed: Deployed, team: str, **changes: Any) -> dict[str, Any]:
    """The team's ClusterQueue as fleetgen compiles it with `changes` made to the team's file."""
    from generator.compile.kueue import cluster_queue
    from generator.config.fleet import Loaded

    loaded = deployed.fleet.teams[team]
    changed = loaded.config.model_copy(update=changes)
    return cluster_queue(deployed.fleet.clusters[deployed.name], Loaded(changed, loaded.source)).body


def test_flavor_order_and_fungibility_choose_the_pool_on_the_real_kueue(deployed: Deployed) -> None:
    """Issue 16: the pool order was the cluster's for every team, and a job borrowed in the first pool
    while the team's own quota in the next was idle. On the real Kueue, inference (A100 8, L40S 32
    in prod-west, made a borrower): a 4-GPU job lands on A100 in the cluster's order and on L40S with
    `flavorOrder: [l40s, a100]`; a 16-GPU job borrows A100 by default (Kueue's MayStopSearch) and
    takes its own L40S with `whenCanBorrow: TryNextFlavor`."""
    from generator.config.cluster import FlavorFungibility

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's inference team (two pools, quota in both)")
    stack, team = deployed.stack, deployed.fleet.teams["inference"].config
    objects, ns = custom(stack), team.namespace_names[0]
    original = queue_with(deployed, team.name)

    # inference is never preempted, and so never borrows, in the example (issue 53): here a borrower
    borrows = {cluster: {pool: quota.model_copy(update={"borrowing_limit": None}) for pool, quota in pools.items()}
               for cluster, pools in team.quotas.items()}

    def placed(pods: int, **changes: Any) -> set[str]:
        apply(stack, queue_with(deployed, team.name, policy=None, quotas=borrows, **changes))
        name = f"pool-{uuid.uuid4().hex[:6]}"
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, name, pods, 4))
        try:
            assert wait_for(lambda: admitted(stack, ns, name), 60), \
                condition(workload_of(stack, ns, name), "QuotaReserved")
            return flavors(workload_of(stack, ns, name))
        finally:
            objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                    propagation_policy="Foreground")
            assert wait_for(lambda: gone(stack, ns, name), 60)

    try:
        assert placed(1) == {"a100"}
        assert placed(1, flavor_order={"prod-west": ["l40s", "a100"]}) == {"l40s"}
        assert placed(4) == {"a100"}  # 16 GPUs: 8 own A100 + 8 borrowed
        assert placed(4, flavor_fungibility=FlavorFungibility(when_can_borrow="TryNextFlavor")) == {"l40s"}
    finally:
        apply(stack, original)


def test_a_cohorts_reserve_and_borrowing_limit_on_the_real_kueue(deployed: Deployed) -> None:
    """Issue 16, `cohorts[].quotas`: prod-west's research cohort given 8 A100 of its own and
    borrowingLimit 0. ml-research (16 A100) is admitted for 24 GPUs, the cohort's reserve lent to it;
    8 more wait ("insufficient") although recsys and the root cohort have idle A100, because the
    cohort may borrow nothing from outside; once the limit is gone the same job is admitted."""
    from generator.compile.kueue import cohorts
    from generator.config.cluster import Cohort, CohortQuota
    from generator.config.fleet import Loaded

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's ml-research team (A100 only, in cohort research)")
    stack, loaded = deployed.stack, deployed.fleet.clusters[deployed.name]
    team = deployed.fleet.teams["ml-research"].config
    teams = deployed.fleet.teams_in(deployed.name)
    reserve = [Cohort(name="research", quotas={"a100": CohortQuota(gpus=8, borrowing_limit=0)}),
               Cohort(name="platform"), Cohort(name="research-vision")]
    changed = Loaded(loaded.config.model_copy(update={"cohorts": reserve}), loaded.source)
    limited = [m.body for m in cohorts(changed, teams)]
    research = next(c for c in limited if c["metadata"]["name"] == "research")
    assert research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][-1] == {
        "name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "0"}
    objects, ns = custom(stack), team.namespace_names[0]
    names = [f"reserve-{i}-{uuid.uuid4().hex[:5]}" for i in range(2)]
    try:
        for body in limited:
            apply(stack, body)
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, names[0], 3, 8))
        assert wait_for(lambda: admitted(stack, ns, names[0]), 60), \
            condition(workload_of(stack, ns, names[0]), "QuotaReserved")
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, names[1], 1, 8))
        assert wait_for(lambda: "insufficient" in str(
            condition(workload_of(stack, ns, names[1]), "QuotaReserved").get("message")), 30), \
            condition(workload_of(stack, ns, names[1]), "QuotaReserved")
    finally:
        for manifest in cohorts(loaded, teams):
            apply(stack, manifest.body)
    try:
        assert wait_for(lambda: admitted(stack, ns, names[1]), 60), \
            condition(workload_of(stack, ns, names[1]), "QuotaReserved")
    finally:
        for name in names:
            objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                    propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, name) for name in names), 60)


def provisioning_requests(stack: Stack, namespace: str, workload: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The ProvisioningRequests Kueue created for a Workload (it owns them)."""
    uid = ((workload or {}).get("metadata") or {}).get("uid")
    found = custom(stack).list_namespaced_custom_object("autoscaling.x-k8s.io", "v1", namespace,
                                                        "provisioningrequests")["items"]
    return [r for r in found if any(o.get("uid") == uid for o in r["metadata"].get("ownerReferences") or [])]


def answer(stack: Stack, namespace: str, request: dict[str, Any], **conditions: str) -> None:
    """Set a ProvisioningRequest's conditions as the cluster autoscaler does (its status subresource)."""
    now = "2026-01-01T00:00:00Z"
    status = {"conditions": [{"type": kind, "status": value, "reason": kind, "message": f"e2e: {kind} {value}",
                              "lastTransitionTime": now} for kind, value in conditions.items()]}
    custom(stack).patch_namespaced_custom_object_status("autoscaling.x-k8s.io", "v1", namespace,
                                                        "provisioningrequests", request["metadata"]["name"],
                                                        {"status": status})


def check_state(workload: dict[str, Any] | None, name: str) -> str:
    states = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return next((s.get("state", "") for s in states if s.get("name") == name), "")


def test_an_admission_check_asks_the_autoscaler_before_kueue_admits(deployed: Deployed) -> None:
    """Issue 16, `admissionChecks` with a ProvisioningRequest, on the real Kueue (the cluster
    autoscaler's ProvisioningRequest API served, the test answering as the autoscaler would: its
    module is not served by the Go module proxy, so it cannot run here). prod-west gets a
    check-capacity check on its A100 pool with retries off. For an inference job on A100, Kueue
    reserves quota but does not admit; it creates a ProvisioningRequest of the rendered class with
    its parameters and the job's pods; once Provisioned, the job is admitted and its pods carry the
    request (kueue v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go:706-716). A job
    on L40S (no check there) is admitted at once. A second A100 job whose request Failed is
    deactivated, as `retry.limit: 0` says."""
    from generator.compile.kueue import admission_checks, cluster_queue
    from generator.config.cluster import AdmissionCheck, ProvisioningRequest, ProvisioningRetry
    from generator.config.fleet import Loaded
    from generator.jobs.workloads import why_pending

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's inference team (A100 and L40S quota)")
    stack, loaded = deployed.stack, deployed.fleet.clusters[deployed.name]
    team_loaded = deployed.fleet.teams["inference"]
    team = team_loaded.config
    check = AdmissionCheck(name="a100-capacity", pools=["a100"], provisioning_request=ProvisioningRequest(
        class_name="check-capacity.autoscaling.x-k8s.io", parameters={"ValidUntilSeconds": "600"},
        retry=ProvisioningRetry(limit=0)))
    changed = Loaded(loaded.config.model_copy(update={"admission_checks": [check]}), loaded.source)
    rendered = [m.body for m in admission_checks(changed)] + [cluster_queue(changed, team_loaded).body]
    assert rendered[-1]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "a100-capacity", "onFlavors": ["a100"]}]}
    objects, ns = custom(stack), team.namespace_names[0]
    names = {key: f"{key}-{uuid.uuid4().hex[:5]}" for key in ("provisioned", "l40s", "failed")}
    l40s_job = gpu_jobset(team, names["l40s"], 1, 4)
    pod_spec = l40s_job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    try:
        for body in rendered:
            apply(stack, body)
        assert wait_for(lambda: condition(objects.get_cluster_custom_object(
            KUEUE, "v1beta2", "admissionchecks", "a100-capacity"), "Active").get("status") == "True", 60)
        for key in ("provisioned", "failed"):
            objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets",
                                                    gpu_jobset(team, names[key], 1, 4))
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", l40s_job)
        assert wait_for(lambda: admitted(stack, ns, names["l40s"]), 60), \
            condition(workload_of(stack, ns, names["l40s"]), "QuotaReserved")
        assert flavors(workload_of(stack, ns, names["l40s"])) == {"l40s"}
        assert provisioning_requests(stack, ns, workload_of(stack, ns, names["l40s"])) == []

        requests: dict[str, dict[str, Any]] = {}
        for key in ("provisioned", "failed"):
            assert wait_for(lambda key=key: bool(provisioning_requests(stack, ns, workload_of(stack, ns, names[key]))),
                            60), workload_of(stack, ns, names[key])
            workload = workload_of(stack, ns, names[key])
            assert condition(workload, "QuotaReserved").get("status") == "True"
            assert condition(workload, "Admitted").get("status") != "True"
            assert check_state(workload, "a100-capacity") == "Pending"
            assert "waiting for admission checks: a100-capacity=Pending" in why_pending(workload or {})
            [requests[key]] = provisioning_requests(stack, ns, workload)
        request = requests["provisioned"]
        assert request["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"
        assert request["spec"]["parameters"] == {"ValidUntilSeconds": "600"}
        [pod_set] = request["spec"]["podSets"]
        assert pod_set["count"] == 1

        answer(stack, ns, request, Accepted="True", Provisioned="True")
        assert wait_for(lambda: admitted(stack, ns, names["provisioned"]), 60), \
            workload_of(stack, ns, names["provisioned"])

        def annotations() -> dict[str, str]:
            js = objects.get_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", names["provisioned"])
            template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
            return dict((template.get("metadata") or {}).get("annotations") or {})

        assert wait_for(lambda: annotations().get("autoscaling.x-k8s.io/consume-provisioning-request")
                        == request["metadata"]["name"], 30), annotations()
        assert annotations().get("autoscaling.x-k8s.io/provisioning-class-name") == \
            "check-capacity.autoscaling.x-k8s.io"

        answer(stack, ns, requests["failed"], Accepted="True", Failed="True")
        assert wait_for(lambda: (workload_of(stack, ns, names["failed"]) or {}).get("spec", {}).get("active")
                        is False, 60), workload_of(stack, ns, names["failed"])
        assert not admitted(stack, ns, names["failed"])
    finally:
        apply(stack, cluster_queue(loaded, team_loaded).body)
        for name in names.values():
            objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                    propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, name) for name in names.values()), 60)


def _unlabelled_job(stack: Stack, batch: Any, ns: str, name: str, requests: dict[str, str],
                    limits: dict[str, str]) -> Callable[[], dict[str, Any] | None]:
    """A member's plain Job without a queue label: Kueue's webhook gives it LocalQueue `default`; waits
    until Kueue admits it and returns a reader of its Workload."""
    resources = {"requests": requests, **({"limits": limits} if limits else {})}
    job = batch.create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.example/work:1", "resources": resources}]}}}})
    assert job.metadata.labels.get("kueue.x-k8s.io/queue-name") == "default"

    def workload() -> dict[str, Any] | None:
        found = custom(stack).list_namespaced_custom_object(
            KUEUE, "v1beta2", ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job.metadata.uid}")
        return found["items"][0] if found["items"] else None

    try:
        assert wait_for(lambda: condition(workload(), "Admitted").get("status") == "True", 60), \
            (condition(workload(), "QuotaReserved").get("message"), workload())
    except BaseException:
        batch.delete_namespaced_job(name, ns, propagation_policy="Foreground")
        raise
    return workload


def test_a_cpu_only_job_without_a_queue_runs_on_the_cpu_pool(deployed: Deployed) -> None:
    """Issue 16: Kueue gives a Job without a queue label in a team namespace the `default` LocalQueue
    (kueue v0.19.2 pkg/controller/jobframework/defaults.go:79-97), which sent CPU-only jobs to a GPU
    flavor, onto GPU nodes. With the cluster's cpuPool the real Kueue admits a member's plain CPU
    Job to the CPU flavor, the first of the team's queue (issue 31), and puts the CPU pool's node
    labels in its pods."""
    from kubernetes import client

    cluster = deployed.fleet.clusters[deployed.name].config
    if cluster.cpu_pool is None:
        pytest.skip(f"{deployed.name} declares no cpuPool")
    stack, team = deployed.stack, deployed.teams[0]
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    batch, ns, name = client.BatchV1Api(api), team.namespace_names[0], f"cpu-{uuid.uuid4().hex[:6]}"
    workload = _unlabelled_job(stack, batch, ns, name, {"cpu": "2", "memory": "4Gi"}, {})
    try:
        assert flavors(workload()) == {cluster.cpu_pool.name}
        assert (workload() or {})["status"]["admission"]["clusterQueue"] == team.name
        assert wait_for(lambda: (batch.read_namespaced_job(name, ns).spec.template.spec.node_selector or {})
                        == cluster.cpu_pool.node_labels, 30)
    finally:
        batch.delete_namespaced_job(name, ns, propagation_policy="Foreground")


def test_a_gpu_job_without_a_queue_is_charged_to_the_team(deployed: Deployed) -> None:
    """Issue 31: a GPU Job without the queue label got the `default` LocalQueue, which pointed at the
    team's CPU-only queue: "resource nvidia.com/gpu unavailable in ClusterQueue", pending forever, on
    every cluster with a cpuPool. Now `default` is on the team's own queue: the real Kueue admits a
    member's plain GPU Job to a GPU pool of the team's (never the CPU flavor), charged to its queue."""
    from kubernetes import client

    cluster = deployed.fleet.clusters[deployed.name].config
    if cluster.multikueue is not None:
        pytest.skip(f"{deployed.name} dispatches to its workers (tests/test_multikueue.py)")
    stack, team = deployed.stack, deployed.teams[0]
    pool = next(p for p in cluster.node_pools if p.name in team.quotas[cluster.name])
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    batch, ns, name = client.BatchV1Api(api), team.namespace_names[0], f"gpu-{uuid.uuid4().hex[:6]}"
    workload = _unlabelled_job(stack, batch, ns, name, {"cpu": "1", "memory": "1Gi", pool.gpu.resource: "1"},
                               {pool.gpu.resource: "1"})
    try:
        assert (workload() or {})["status"]["admission"]["clusterQueue"] == team.name
        gpu_pools = {p for p in team.quotas[cluster.name] if cluster.pool(p) is not None}
        assert flavors(workload()) <= gpu_pools and flavors(workload()), flavors(workload())
    finally:
        batch.delete_namespaced_job(name, ns, propagation_policy="Foreground")


def test_a_teams_cpu_limit_holds_on_the_real_kueue(deployed: Deployed) -> None:
    """Issue 16: the CPU pool was one pool for all teams. With `cpuPool.teamLimit` (prod-west: 124
    CPUs, two nodes' worth) the real Kueue admits a member's 100-CPU job to the CPU flavor of the
    team's queue; a 30-CPU one does not get the CPU pool while 248 CPUs of it are idle. Kueue then
    tries the team's next flavor (issue 31: one queue per team): it is admitted there, in the CPU
    share of the team's own GPU quota, or waits when that share is smaller. Once the first job is
    gone, a third one gets the CPU pool again."""
    from kubernetes import client

    from generator import quantity

    cluster = deployed.fleet.clusters[deployed.name].config
    team = deployed.teams[0]
    limit = cluster.cpu_pool.limit_for(team.name) if cluster.cpu_pool else None
    if limit is None:
        pytest.skip(f"{deployed.name} sets no CPU limit per team")
    stack = deployed.stack
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    batch, ns = client.BatchV1Api(api), team.namespace_names[0]
    cap = int(quantity.value_of(limit.cpu))
    sizes = {"big": cap - cap // 5, "small": cap // 5 + 6, "later": cap // 5 + 6}
    names = {key: f"cpu-{key}-{uuid.uuid4().hex[:5]}" for key in sizes}
    uids: dict[str, str] = {}

    def submit(key: str, cpus: int) -> None:
        job = batch.create_namespaced_job(ns, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": names[key]},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "registry.example/etl:1",
                 "resources": {"requests": {"cpu": str(cpus), "memory": "1Gi"}}}]}}}})
        uids[key] = job.metadata.uid

    def workload(key: str) -> dict[str, Any] | None:
        found = custom(stack).list_namespaced_custom_object(
            KUEUE, "v1beta2", ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uids[key]}")
        return found["items"][0] if found["items"] else None

    pool = cluster.cpu_pool.name if cluster.cpu_pool else ""
    gpu_pools = {p for p in team.quotas[cluster.name] if cluster.pool(p) is not None}

    def settled(key: str) -> bool:
        reserved = condition(workload(key), "QuotaReserved")
        return reserved.get("status") == "True" or "insufficient" in str(reserved.get("message"))

    try:
        submit("big", sizes["big"])
        assert wait_for(lambda: condition(workload("big"), "Admitted").get("status") == "True", 60), \
            condition(workload("big"), "QuotaReserved")
        assert flavors(workload("big")) == {pool}
        submit("small", sizes["small"])
        assert wait_for(lambda: settled("small"), 60), condition(workload("small"), "QuotaReserved")
        # Admitted on one of the team's GPU pools (its CPU share there), or waiting: never the CPU pool.
        assert flavors(workload("small")) <= gpu_pools, flavors(workload("small"))
        admission = (workload("small") or {})["status"].get("admission") or {}
        assert admission.get("clusterQueue", team.name) == team.name
        batch.delete_namespaced_job(names["big"], ns, propagation_policy="Foreground")
        # "Once the first job is gone": its Workload, which holds the quota, goes with it. Submitting
        # before that raced Kueue (the later job found the CPU pool's limit still taken: a100).
        assert wait_for(lambda: workload("big") is None, 60), workload("big")
        submit("later", sizes["later"])
        assert wait_for(lambda: condition(workload("later"), "Admitted").get("status") == "True", 60), \
            condition(workload("later"), "QuotaReserved")
        assert flavors(workload("later")) == {pool}
        assert (workload("later") or {})["status"]["admission"]["clusterQueue"] == team.name
    finally:
        for key in uids:
            with contextlib.suppress(client.exceptions.ApiException):
                batch.delete_namespaced_job(names[key], ns, propagation_policy="Foreground")


def test_plain_pods_without_a_queue_are_queued_too(deployed: Deployed) -> None:
    """Issue 16 asked whether Pods and Deployments bypass the quotas while `manageJobsWithoutQueueName`
    is off: not in team namespaces. Kueue's pod webhook gives a Pod without a queue the namespace's
    `default` LocalQueue (kueue v0.19.2 pkg/controller/jobs/pod/pod_webhook.go:152-162) and gates it
    until admitted; on the real Kueue a member's bare Pod is held, then admitted by the team's queue."""
    from kubernetes import client

    if deployed.name != "prod-west":
        pytest.skip("one cluster shows it (the pod integration is the same everywhere)")
    stack, team = deployed.stack, deployed.teams[0]
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    core, ns, name = client.CoreV1Api(api), team.namespace_names[0], f"bare-{uuid.uuid4().hex[:6]}"
    pod = core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/debug:1",
                                                  "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    try:
        assert pod.metadata.labels.get("kueue.x-k8s.io/queue-name") == "default"
        assert "kueue.x-k8s.io/admission" in [g.name for g in pod.spec.scheduling_gates or []]

        def workload() -> dict[str, Any] | None:
            found = custom(stack).list_namespaced_custom_object(
                KUEUE, "v1beta2", ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={pod.metadata.uid}")
            return found["items"][0] if found["items"] else None

        assert wait_for(lambda: condition(workload(), "Admitted").get("status") == "True", 60), \
            condition(workload(), "QuotaReserved")
        assert (workload() or {})["status"]["admission"]["clusterQueue"] == team.name
        assert wait_for(lambda: not core.read_namespaced_pod(name, ns).spec.scheduling_gates, 30)
    finally:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_workloads_naming_no_class_get_the_teams_default_priority(deployed: Deployed) -> None:
    """Issue 31: `defaultPriority` reached only fleetgen's templates; every other workload (kubectl,
    Ray, a Deployment, a notebook's pod) ran at priority 0, below `preemptible`. Now the team's
    MutatingAdmissionPolicy labels what a member creates without a class: on the real API server and
    Kueue, a plain Job, a JobSet and a bare Pod get the team's class and Kueue's Workload its value; a
    Deployment's label reaches its pod template through Kueue's webhook. A job that names a class keeps
    it, by label or by its pods' priorityClassName, and nothing outside the team's namespaces changes."""
    from kubernetes import client

    cluster = deployed.fleet.clusters[deployed.name].config
    if deployed.name == "prod-east":
        pytest.skip("prod-west shows it with Kueue v0.19.2's kinds, dev with v0.15's (no Deployment integration)")
    team = next((t for t in deployed.teams if t.default_priority), None)
    if team is None:
        pytest.skip(f"no team in {deployed.name} sets defaultPriority")
    stack, default = deployed.stack, team.default_priority
    values = {p.name: p.value for p in cluster.priorities}
    other = next(p for p in (team.allowed_priorities or sorted(values)) if p != default)
    label = "kueue.x-k8s.io/priority-class"
    # Issue 53: a pod template may name only a class of the cluster's ladder, at its value.
    low = other
    pod_class(stack, low, values[low])
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    batch, core, apps = client.BatchV1Api(api), client.CoreV1Api(api), client.AppsV1Api(api)
    ns, tag = team.namespace_names[-1], uuid.uuid4().hex[:5]
    pod_spec = {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "registry.example/work:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}

    def job(name: str, labels: dict[str, str] | None = None, **spec: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels or {}},
                "spec": {"template": {"spec": {**pod_spec, **spec}}}}

    def workload(uid: str) -> dict[str, Any] | None:
        found = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads",
                                                            label_selector=f"kueue.x-k8s.io/job-uid={uid}")
        return found["items"][0] if found["items"] else None

    def priority(uid: str) -> tuple[str | None, int | None]:
        assert wait_for(lambda: workload(uid), 30), f"no Workload for {uid}"
        spec = (workload(uid) or {})["spec"]
        return (spec.get("priorityClassRef") or {}).get("name"), spec.get("priority")

    names = {k: f"prio-{k}-{tag}" for k in ("plain", "labelled", "pod-class", "pod", "deploy", "jobset", "admin")}
    try:
        plain = batch.create_namespaced_job(ns, job(names["plain"]))
        assert plain.metadata.labels[label] == default
        assert priority(plain.metadata.uid) == (default, values[default])
        labelled = batch.create_namespaced_job(ns, job(names["labelled"], {label: other}))
        assert labelled.metadata.labels[label] == other
        assert priority(labelled.metadata.uid) == (other, values[other])
        classed = batch.create_namespaced_job(ns, job(names["pod-class"], priorityClassName=low))
        assert label not in (classed.metadata.labels or {})
        assert priority(classed.metadata.uid) == (low, values[low])
        pod = core.create_namespaced_pod(ns, {"apiVersion": "v1", "kind": "Pod",
                                              "metadata": {"name": names["pod"]}, "spec": pod_spec})
        assert pod.metadata.labels[label] == default
        assert priority(pod.metadata.uid) == (default, values[default])
        deploy = apps.create_namespaced_deployment(ns, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": names["deploy"]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": names["deploy"]}}, "template": {
                "metadata": {"labels": {"app": names["deploy"]}},
                "spec": {**pod_spec, "restartPolicy": "Always"}}}})
        if "deployment" in frameworks_of(cluster):
            assert deploy.metadata.labels[label] == default
            assert deploy.spec.template.metadata.labels[label] == default  # copied by Kueue's webhook
        else:  # not Kueue's to queue here (dev's Kueue release has no Deployment integration): left alone
            assert label not in (deploy.metadata.labels or {})
        pool, quota = sorted(team.quotas[deployed.name].items())[0]
        per_node = cluster.pool(pool).gpu.per_node  # type: ignore[union-attr]
        js = sized_job(deployed, Borrowing(team, pool, per_node, quota.gpus, 0), 1, names["jobset"])
        js["metadata"]["namespace"] = ns
        del js["metadata"]["labels"][label]
        created = custom(stack, api).create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", js)
        assert created["metadata"]["labels"][label] == default
        outside = client.BatchV1Api(stack.client()).create_namespaced_job("default", job(names["admin"]))
        assert label not in (outside.metadata.labels or {})
    finally:
        for delete in (lambda: batch.delete_namespaced_job(names["plain"], ns, propagation_policy="Foreground"),
                       lambda: batch.delete_namespaced_job(names["labelled"], ns, propagation_policy="Foreground"),
                       lambda: batch.delete_namespaced_job(names["pod-class"], ns, propagation_policy="Foreground"),
                       lambda: core.delete_namespaced_pod(names["pod"], ns, grace_period_seconds=0),
                       lambda: apps.delete_namespaced_deployment(names["deploy"], ns),
                       lambda: custom(stack, api).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets",
                                                                                 names["jobset"]),
                       lambda: client.BatchV1Api(stack.client()).delete_namespaced_job(names["admin"], "default")):
            with contextlib.suppress(client.exceptions.ApiException):
                delete()


def test_a_guarantee_lent_to_an_equal_priority_borrower_comes_back_only_under_any(deployed: Deployed,
                                                                                   fleet_root: Path) -> None:
    """Issue 31: prod-west's `reclaimWithinCohort: LowerPriority` makes a guarantee hold only against
    lower priorities, and nothing said so. Now a warning and `explain team vision` do. On the real
    Kueue (with fair sharing on, as in prod-west): inference borrows L40S at `standard` up to its
    limit, platform-ci uses its own, and vision's `standard` job within its 8 guaranteed GPUs waits,
    nobody preempted. With the lender's queue at `reclaimWithinCohort: Any` the same job preempts the
    borrower and is admitted, as `explain` says for that policy."""
    from generator.checks import load_fleet
    from generator.compile.kueue import cluster_queue
    from generator.config.cluster import Preemption
    from generator.config.fleet import Loaded

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's L40S pool (vision lends, inference borrows)")
    # The example's inference is never preempted (issue 53), so it borrows nothing: here it borrows.
    edit(fleet_root, "teams/inference.yaml", "policy: {neverPreempted: true}\n", "")
    edit(fleet_root, "teams/inference.yaml", "l40s: {gpus: 32, lendingLimit: 0}",
         "l40s: {gpus: 32, borrowingLimit: 8, lendingLimit: 0}")
    assert run(fleet_root, "render").code == 0
    fleet = load_fleet(fleet_root)
    stack, loaded = deployed.stack, deployed.fleet.clusters[deployed.name]
    apply(stack, cluster_queue(fleet.clusters[deployed.name], fleet.teams["inference"]).body)
    cfg = loaded.config
    quotas = {t: fleet.teams[t].config.quotas["prod-west"]["l40s"] for t in ("inference", "platform-ci", "vision")}
    assert cfg.kueue.preemption.reclaim_within_cohort == "LowerPriority"
    assert (cfg.pool("l40s").gpus, quotas["inference"].gpus, quotas["inference"].borrowing_limit,  # type: ignore
            quotas["platform-ci"].gpus, quotas["vision"].gpus) == (48, 32, 8, 4, 8)
    explained = run(fleet_root, "explain", "team", "vision").out
    assert "its guaranteed l40s GPUs are not guaranteed once lent: inference can borrow them at standard or " \
        "above" in explained
    names = {key: f"{key}-{uuid.uuid4().hex[:5]}" for key in ("inference", "platform-ci", "vision")}
    sizes = {"inference": 10, "platform-ci": 1, "vision": 2}  # pods of 4 GPUs: 40 (8 borrowed), 4, 8
    classes = {"inference": "standard", "platform-ci": "preemptible", "vision": "standard"}
    objects = custom(stack)

    def submit(key: str) -> None:
        team = fleet.teams[key].config
        body = gpu_jobset(team, names[key], sizes[key], 4)
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = classes[key]
        pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", team.namespace_names[0], "jobsets", body)

    def ns(key: str) -> str:
        return fleet.teams[key].config.namespace_names[0]

    vision = fleet.teams["vision"]
    try:
        for key in ("inference", "platform-ci"):
            submit(key)
            assert wait_for(lambda k=key: admitted(stack, ns(k), names[k]), 60), workload_of(stack, ns(key), names[key])
        submit("vision")
        assert wait_for(lambda: "insufficient" in str(condition(workload_of(stack, ns("vision"), names["vision"]),
                                                                "QuotaReserved").get("message")), 60)
        assert not wait_for(lambda: admitted(stack, ns("vision"), names["vision"]), 8)
        assert admitted(stack, ns("inference"), names["inference"])  # the borrower keeps vision's guarantee
        reclaiming = Loaded(cfg.model_copy(update={"kueue": cfg.kueue.model_copy(update={
            "preemption": Preemption(reclaim_within_cohort="Any",
                                     within_cluster_queue=cfg.kueue.preemption.within_cluster_queue)})}),
            loaded.source)
        apply(stack, cluster_queue(reclaiming, vision).body)
        assert wait_for(lambda: admitted(stack, ns("vision"), names["vision"]), 60), \
            condition(workload_of(stack, ns("vision"), names["vision"]), "QuotaReserved")
        assert condition(workload_of(stack, ns("inference"), names["inference"]), "Preempted").get("status") == "True"
    finally:
        apply(stack, cluster_queue(loaded, vision).body)
        apply(stack, cluster_queue(loaded, deployed.fleet.teams["inference"]).body)
        for key in names:
            with contextlib.suppress(Exception):
                objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns(key), "jobsets", names[key],
                                                        propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns(k), names[k]) for k in names), 60)


def _l40s_jobset(team: TeamConfig, name: str, pods: int, priority: str) -> dict[str, Any]:
    """A JobSet of `pods` 4-GPU pods on prod-west's L40S, labelled with `priority`."""
    body = gpu_jobset(team, name, pods, 4)
    body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.product": "NVIDIA-L40S"}
    return body


def test_a_teams_own_queue_policy_on_the_real_kueue(deployed: Deployed, fleet_root: Path) -> None:
    """Issue 31: policy was cluster-wide only. A team file's `policy` now sets its own queue's, and
    the real Kueue does what `explain` says: inference with `policy.neverPreempted` (and so no
    borrowing): its `production` job waits for its own `preemptible` one instead of preempting it,
    which the cluster's LowerOrNewerEqualPriority would do. (Queueing strategies: the next test.)"""
    from kubernetes.client.exceptions import ApiException

    from generator.checks import load_fleet
    from generator.compile.kueue import cluster_queue
    from generator.config.fleet import Loaded

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's L40S pool")
    assert deployed.fleet.teams["inference"].config.never_preempted  # the example's (issue 53)
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "- its workloads are never preempted" in run(fleet_root, "explain", "team", "inference").out
    changed = load_fleet(fleet_root)
    stack, fleet, loaded = deployed.stack, deployed.fleet, deployed.fleet.clusters["prod-west"]
    objects = custom(stack)
    inference = fleet.teams["inference"].config
    created: list[tuple[str, str]] = []

    def submit(team: TeamConfig, key: str, pods: int, priority: str) -> str:
        name = f"{key}-{uuid.uuid4().hex[:5]}"
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", team.namespace_names[0], "jobsets",
                                                _l40s_jobset(team, name, pods, priority))
        created.append((team.namespace_names[0], name))
        return name

    def clean() -> None:
        for ns, name in created:
            with contextlib.suppress(ApiException):
                objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                        propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, name) for ns, name in created), 60)
        created.clear()

    def waits(ns: str, name: str) -> bool:
        return "insufficient" in str(condition(workload_of(stack, ns, name), "QuotaReserved").get("message"))

    try:
        ns = inference.namespace_names[0]
        own = changed.teams["inference"]
        # Without borrowing either way, so that only the policy differs (with its borrowingLimit of 8
        # the production job would borrow instead of preempting).
        no_borrowing = Loaded(own.config.model_copy(update={"policy": None}), own.source)
        for policy in ("cluster", "own"):
            queue = cluster_queue(changed.clusters["prod-west"], no_borrowing if policy == "cluster" else own)
            apply(stack, queue.body)
            low = submit(inference, "batch", 8, "preemptible")  # all of its 32 L40S
            assert wait_for(lambda n=low: admitted(stack, ns, n), 60), workload_of(stack, ns, low)
            serving = submit(inference, "serving", 1, "production")
            if policy == "cluster":  # LowerOrNewerEqualPriority: production preempts preemptible
                assert wait_for(lambda n=serving: admitted(stack, ns, n), 60), workload_of(stack, ns, serving)
                assert condition(workload_of(stack, ns, low), "Preempted").get("status") == "True"
            else:  # never preempted: the production job waits for the team's own work to end
                assert wait_for(lambda n=serving: waits(ns, n), 60), workload_of(stack, ns, serving)
                assert not wait_for(lambda n=serving: admitted(stack, ns, n), 8)
                assert admitted(stack, ns, low)
                assert condition(workload_of(stack, ns, low), "Preempted").get("status") != "True"
            clean()
    finally:
        clean()
        apply(stack, cluster_queue(loaded, fleet.teams["inference"]).body)


@dataclass(frozen=True)
class SmallAndBig:
    """vision's later 4-GPU job and its older 12-GPU one that does not fit: whether the 4 were
    admitted, and both Workloads as Kueue saw them."""

    passed: bool
    big: dict[str, Any]
    small: dict[str, Any]

    def small_ahead(self) -> bool:
        """Kueue's order within a queue (same priority): the Workload's creationTimestamp, which the
        API server keeps to the second, then its UID (kueue v0.19.2 pkg/cache/queue/cluster_queue.go:
        1081-1089, pkg/workload/workload.go:1166)."""
        def key(wl: dict[str, Any]) -> tuple[str, str]:
            return wl["metadata"]["creationTimestamp"], wl["metadata"]["uid"]
        return key(self.small) < key(self.big)


def _small_and_big(stack: Stack, vision: TeamConfig, gap: str) -> SmallAndBig:
    """vision's 8 L40S, then 12 more that do not fit now, then 4 that do. `gap` before the 4: "tried"
    (Kueue has found the 12 do not fit), "second" (that, and the 12's creation second has passed),
    "none" (the 12's Workload exists; at the start of a second, so both are created in it). Its jobs
    are gone afterwards."""
    objects, ns = custom(stack), vision.namespace_names[0]
    names = {key: f"{key}-{uuid.uuid4().hex[:5]}" for key in ("hold", "big", "small")}
    try:
        for key, pods in (("hold", 2), ("big", 3), ("small", 1)):
            if key == "big" and gap == "none":
                time.sleep(1.02 - time.time() % 1)
            objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets",
                                                    _l40s_jobset(vision, names[key], pods, "standard"))
            if key == "hold":
                assert wait_for(lambda: admitted(stack, ns, names["hold"]), 60)
            if key == "big":
                assert wait_for(lambda: workload_of(stack, ns, names["big"]) is not None, 10, step=0.01)
            if key == "big" and gap != "none":
                assert wait_for(lambda: "insufficient" in str(condition(workload_of(
                    stack, ns, names["big"]), "QuotaReserved").get("message")), 60)
            if key == "big" and gap == "second":
                created = workload_of(stack, ns, names["big"])["metadata"]["creationTimestamp"]  # type: ignore[index]
                assert wait_for(lambda c=created: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > c, 3)
        passed = wait_for(lambda: admitted(stack, ns, names["small"]), 6)
        assert not admitted(stack, ns, names["big"])
        big, small = (workload_of(stack, ns, names[key]) for key in ("big", "small"))
        assert big is not None and small is not None
        return SmallAndBig(passed, big, small)
    finally:
        for name in names.values():
            with contextlib.suppress(Exception):
                objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                        propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, name) for name in names.values()), 60)


def test_best_effort_fifo_lets_a_later_job_that_fits_pass(deployed: Deployed) -> None:
    """Issue 31, the cluster's queueing strategy: under prod-west's BestEffortFIFO vision's later
    4-GPU job is admitted past its waiting 12-GPU one."""
    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's L40S pool")
    assert _small_and_big(deployed.stack, deployed.fleet.teams["vision"].config, "tried").passed


def test_strict_fifo_holds_a_later_job_behind_an_older_one_to_the_second(
        deployed: Deployed, fleet_root: Path) -> None:
    """Issue 31: with vision's own `policy.queueingStrategy: StrictFIFO` its later 4-GPU job waits
    behind its older 12-GPU one that does not fit, as `explain` says, when created in a later second
    than the 12: Kueue orders a queue by Workload creation time to the second, then by UID. Created
    in the same second, the 4 pass exactly when their UID sorts first (an earlier version of this
    test, which did not wait for the second, passed 12 times in 19 runs)."""
    from generator.compile.kueue import cluster_queue

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's L40S pool")
    edit(fleet_root, "teams/vision.yaml", "quotas:\n", "policy: {queueingStrategy: StrictFIFO}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "- its queue is StrictFIFO: its oldest workload that does not fit blocks its later ones, " \
        "ordered by creation time to the second" in run(fleet_root, "explain", "team", "vision").out
    changed = load_fleet(fleet_root)
    stack, vision = deployed.stack, deployed.fleet.teams["vision"].config
    try:
        apply(stack, cluster_queue(changed.clusters["prod-west"], changed.teams["vision"]).body)
        later = _small_and_big(stack, vision, "second")
        assert not later.small_ahead() and not later.passed, (later.big["metadata"], later.small["metadata"])
        together = _small_and_big(stack, vision, "none")
        assert together.passed == together.small_ahead(), (together.big["metadata"], together.small["metadata"])
    finally:
        apply(stack, cluster_queue(deployed.fleet.clusters["prod-west"], deployed.fleet.teams["vision"]).body)


def test_borrowed_gpus_split_by_weight_as_explain_says(deployed: Deployed, fleet_root: Path) -> None:
    """Issue 31: `explain` showed no weights nor the split they produce. Now it says, for prod-west's
    root cohort, recsys 1.5 and inference 1. On the real Kueue both want far more A100 than the pool
    has (8 jobs of 16 GPUs each, at the same priority, both queues taking back with
    `reclaimWithinCohort: Any`): once Kueue settles, each holds its guarantee and what they borrow is
    split 1.5 : 1, within one job (of the splits 16-GPU jobs allow, only 5 : 3 jobs is)."""
    from kubernetes.client.exceptions import ApiException

    from generator.checks import load_fleet
    from generator.compile.kueue import cluster_queue

    if deployed.name != "prod-west":
        pytest.skip("the case is prod-west's A100 pool")
    explained = run(REPO, "explain", "team", "recsys").out
    assert "the children of cohort prod-west split what they borrow by weight: platform 0.5 (10%), research 1 " \
        "(20%), research-vision 2 (40%), recsys 1.5 (30%); inference never borrows (policy.neverPreempted) and " \
        "takes none of it" in explained, explained
    edit(fleet_root, "clusters/prod-west.yaml", "    withinClusterQueue: LowerOrNewerEqualPriority\n",
         "    withinClusterQueue: LowerOrNewerEqualPriority\n  teamPolicy: {reclaimWithinCohort: [Any]}\n")
    edit(fleet_root, "teams/recsys.yaml", "quotas:\n", "policy: {reclaimWithinCohort: Any}\nquotas:\n")
    # The example's inference is never preempted (issue 53), so it borrows nothing: here it borrows.
    edit(fleet_root, "teams/inference.yaml", "policy: {neverPreempted: true}\n", "policy: {reclaimWithinCohort: Any}\n")
    assert run(fleet_root, "render").code == 0
    assert "the children of cohort prod-west split what they borrow by weight: platform 0.5 (8%), research 1 " \
        "(17%), research-vision 2 (33%), inference 1 (17%), recsys 1.5 (25%)\n" in \
        run(fleet_root, "explain", "team", "recsys").out
    changed = load_fleet(fleet_root)
    stack, fleet = deployed.stack, deployed.fleet
    objects = custom(stack)
    teams = {name: fleet.teams[name].config for name in ("recsys", "inference")}
    guaranteed = {name: t.quotas["prod-west"]["a100"].gpus for name, t in teams.items()}
    pool = fleet.clusters["prod-west"].config.pool("a100")
    assert pool is not None and pool.gpu.per_node == 8
    created: list[tuple[str, str]] = []

    def held(name: str) -> int:
        ns = teams[name].namespace_names[0]
        return 16 * sum(admitted(stack, ns, job) for n, job in created if n == ns)

    try:
        for name in teams:
            apply(stack, cluster_queue(changed.clusters["prod-west"], changed.teams[name]).body)
        for i in range(8):
            for name, team in teams.items():
                job = f"fair-{name[:3]}-{i}-{uuid.uuid4().hex[:4]}"
                body = gpu_jobset(team, job, 2, 8)
                body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "standard"
                body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
                objects.create_namespaced_custom_object(JOBSET, "v1alpha2", team.namespace_names[0], "jobsets", body)
                created.append((team.namespace_names[0], job))

        def settled() -> tuple[int, int] | None:
            first = (held("recsys"), held("inference"))
            if sum(first) != pool.gpus:
                return None
            time.sleep(5)  # unchanged for a while: Kueue is done preempting
            return first if (held("recsys"), held("inference")) == first else None

        assert wait_for(settled, 240), (held("recsys"), held("inference"))
        recsys, inference = settled() or (0, 0)
        borrowed = {"recsys": recsys - guaranteed["recsys"], "inference": inference - guaranteed["inference"]}
        assert borrowed["recsys"] > 0 and borrowed["inference"] > 0, borrowed
        # Equal borrowed share per weight, within one 16-GPU job.
        assert abs(borrowed["recsys"] / 1.5 - borrowed["inference"] / 1) <= 16, borrowed
        print(f"held after settling: recsys {recsys}, inference {inference} GPUs; borrowed {borrowed}")
    finally:
        for ns, job in created:
            with contextlib.suppress(ApiException):
                objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", job,
                                                        propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, job) for ns, job in created), 120)
        for name in teams:
            apply(stack, cluster_queue(fleet.clusters["prod-west"], fleet.teams[name]).body)


def test_a_profiles_grace_period_and_maximum_execution_time_on_the_real_kueue(deployed: Deployed) -> None:
    """Issue 31: a checkpoint-on-SIGTERM loop got Kubernetes' 30 s and a job could run for ever. A
    profile's `terminationGracePeriodSeconds` reaches every pod template (the JobSet controller copies
    it into the child Jobs), and `maxExecutionTime` becomes Kueue's label: the real Kueue sets the
    Workload's maximumExecutionTimeSeconds and deactivates the job once admitted that long."""
    from generator.kinds.jobset import jobset as compile_jobset

    if deployed.name != "prod-west":
        pytest.skip("one cluster shows it")
    stack, team = deployed.stack, deployed.fleet.teams["ml-research"].config
    cluster = deployed.fleet.clusters["prod-west"].config
    name = f"timed-{uuid.uuid4().hex[:5]}"
    profile = JobProfile.model_validate({"name": name, "cluster": "prod-west", "pool": "a100", "nodes": 1,
                                         "image": "registry.example/e2e:1", "command": ["python", "train.py"],
                                         "terminationGracePeriodSeconds": 120, "maxExecutionTime": "8s"})
    body = compile_jobset(team, cluster, profile)
    ns = body["metadata"]["namespace"]
    api = stack.client(member(stack, team).user, tuple(team.members.groups[:1]))
    objects = custom(stack, api)
    objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", body)
    try:
        assert wait_for(lambda: admitted(stack, ns, name), 60), workload_of(stack, ns, name)
        assert (workload_of(stack, ns, name) or {})["spec"].get("maximumExecutionTimeSeconds") == 8

        def child_grace() -> Any:
            from kubernetes import client

            jobs = client.BatchV1Api(stack.client()).list_namespaced_job(
                ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
            return jobs[0].spec.template.spec.termination_grace_period_seconds if jobs else None

        assert wait_for(lambda: child_grace() == 120, 30), child_grace()
        assert wait_for(lambda: (workload_of(stack, ns, name) or {})["spec"].get("active") is False, 60), \
            workload_of(stack, ns, name)
        assert "MaximumExecutionTimeExceeded" in str((workload_of(stack, ns, name) or {})["status"]["conditions"])
    finally:
        objects.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                propagation_policy="Foreground")
        assert wait_for(lambda: gone(stack, ns, name), 60)


def test_a_pool_shared_by_usage_admits_the_team_that_used_least_first(deployed: Deployed) -> None:
    """Issue 31: usage-based fairness. prod-west's l4 pool is shared by usage: one ClusterQueue, a
    LocalQueue per team (vision weight 2, platform-ci and recsys 1), no guarantees. On the real Kueue,
    with every job the whole pool (16 GPUs, from a job profile as `job new` makes it, all at
    `preemptible`, the one class platform-ci may use): platform-ci and vision each ran two jobs,
    recsys three; recsys runs a fourth and keeps the pool while recsys, platform-ci and vision queue
    another each, in that order. When recsys's job ends, vision's (the newest) goes first: it used
    as much as platform-ci, but its weight halves its usage. When vision's ends, platform-ci's goes
    before recsys's older one: recsys used more. `explain` states the same order."""
    from kubernetes.client.exceptions import ApiException

    from generator.kinds.jobset import jobset as compile_jobset

    if deployed.name != "prod-west":
        pytest.skip("prod-west's l4 pool is the one shared by usage")
    stack, fleet = deployed.stack, deployed.fleet
    cluster = fleet.clusters["prod-west"].config
    assert cluster.shared_pools == ["l4"]
    explained = run(REPO, "explain", "team", "vision").out
    assert ("jobs labelled kueue.x-k8s.io/queue-name: vision-l4 in namespace vision (not vision-eval) wait with "
            "those of platform-ci 1 (25%), recsys 1 (25%); Kueue admits first the team whose GPU use (counted half "
            "after 24h) divided by its weight is least, before priority and age; its weight 2") in explained, explained
    teams = {name: fleet.teams[name].config for name in ("platform-ci", "recsys", "vision")}
    created: list[tuple[str, str]] = []

    def ns_of(team: str) -> str:
        return teams[team].namespace_names[0]

    def submit(team: str, key: str) -> str:
        config = teams[team]
        name = f"afs-{key}-{uuid.uuid4().hex[:4]}"
        profile = JobProfile.model_validate({"name": name, "cluster": "prod-west", "pool": "l4", "nodes": 2,
                                             "priority": "preemptible", "image": "registry.example/e2e:1",
                                             "command": ["python", "eval.py"]})
        body = compile_jobset(config, cluster, profile)
        assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == f"{team}-l4"
        objects = custom(stack, stack.client(member(stack, config).user, tuple(config.members.groups[:1])))
        objects.create_namespaced_custom_object(JOBSET, "v1alpha2", ns_of(team), "jobsets", body)
        created.append((ns_of(team), name))
        return name

    def end(team: str, name: str) -> None:
        custom(stack).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns_of(team), "jobsets", name,
                                                      propagation_policy="Foreground")
        assert wait_for(lambda: gone(stack, ns_of(team), name), 60)  # Foreground: its Workload went first

    def queued(team: str, name: str) -> bool:
        """Its Workload exists and holds no quota (Kueue requeues it without a condition: no candidates)."""
        workload = workload_of(stack, ns_of(team), name)
        return workload is not None and condition(workload, "QuotaReserved").get("status") != "True"

    def states(jobs: dict[str, str]) -> dict[str, Any]:
        return {t: condition(workload_of(stack, ns_of(t), j), "QuotaReserved") for t, j in jobs.items()}

    try:
        # The past: whole-pool jobs admitted, then ended. Each admission adds its GPUs times
        # 1 - 0.5^(5m / 24h) to its queue's usage at once (pkg/util/admissionfairsharing/
        # admission_fair_sharing.go:45-59, settled at admission by pkg/controller/core/
        # workload_controller.go:1570-1592); the 5-minute sample adds at most about as much again
        # for what a queue holds, so the histories differ by two admissions or more.
        for team, times in (("platform-ci", 2), ("vision", 2), ("recsys", 3)):
            for i in range(times):
                job = submit(team, f"{team[:3]}{i}")
                assert wait_for(lambda t=team, j=job: admitted(stack, ns_of(t), j), 60), \
                    workload_of(stack, ns_of(team), job)
                assert flavors(workload_of(stack, ns_of(team), job)) == {"l4"}
                end(team, job)
        blocker = submit("recsys", "rec")
        assert wait_for(lambda: admitted(stack, ns_of("recsys"), blocker), 60)
        waiting: dict[str, str] = {}
        for team in ("recsys", "platform-ci", "vision"):  # oldest first: FIFO would admit recsys's
            waiting[team] = job = submit(team, f"{team[:3]}w")
            time.sleep(1.5)  # distinct creation seconds, and time for Kueue to try it
            assert queued(team, job), (workload_of(stack, ns_of(team), job) or {}).get("status")
        end("recsys", blocker)
        assert wait_for(lambda: admitted(stack, ns_of("vision"), waiting["vision"]), 60), states(waiting)
        time.sleep(3)  # and it stays so: nobody older preempts it
        assert admitted(stack, ns_of("vision"), waiting["vision"]), states(waiting)
        assert not admitted(stack, ns_of("recsys"), waiting["recsys"]), states(waiting)
        assert not admitted(stack, ns_of("platform-ci"), waiting["platform-ci"]), states(waiting)
        end("vision", waiting["vision"])
        assert wait_for(lambda: admitted(stack, ns_of("platform-ci"), waiting["platform-ci"]), 60), states(waiting)
        assert not admitted(stack, ns_of("recsys"), waiting["recsys"]), states(waiting)
    finally:
        for ns, name in created:
            with contextlib.suppress(ApiException):
                custom(stack).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                              propagation_policy="Foreground")
        assert wait_for(lambda: all(gone(stack, ns, name) for ns, name in created), 120)


def test_a_job_whose_pods_never_become_ready_releases_its_gpus(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`kueue.waitForPodsReady` as rendered into the Kueue configuration, on the real Kueue with a
    1 s timeout: no kubelet runs here, so an admitted job's pods never become ready; Kueue evicts
    it (reason PodsReadyTimeout, kueue v0.19.2 apis/kueue/v1beta2/workload_types.go:1090-1092),
    releases its quota and schedules the requeue with backoff (`requeueState`)."""
    import re

    path = fleet_root / "clusters/prod-west.yaml"
    text = re.sub(r"^kueue:\n", "kueue:\n  waitForPodsReady: {timeout: 1s, backoffBaseSeconds: 30}\n",
                  path.read_text(), count=1, flags=re.M)
    path.write_text(text)
    result = run(fleet_root, "render", "--cluster", "prod-west")
    assert result.code == 0, result.err
    objects = kustomize_build(fleet_root / "rendered/prod-west")
    config = rendered_kueue_config(objects + kustomize_build(fleet_root / "rendered/gitops/prod-west"))
    assert config["waitForPodsReady"]["timeout"] == "1s"
    fleet = load_fleet(fleet_root)
    stack = Stack.start(tmp_path_factory.mktemp("pods-ready"), upstream_etcd, kueue_config=config)
    try:
        create_nodes(stack, fake_nodes(fleet.clusters["prod-west"].config))
        crds, _ = platform_crds(objects, SHARED / "schemas") if (SHARED / "schemas").is_dir() else ([], [])
        kueue_objects = [o for o in objects if group_of(o) in ("", "kueue.x-k8s.io", "rbac.authorization.k8s.io")]
        assert apply_all(stack, crds + kueue_objects) == []
        team = fleet.teams["recsys"].config
        ns, name = team.namespace_names[0], f"never-ready-{uuid.uuid4().hex[:5]}"
        custom(stack).create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, name, 1, 8))
        assert wait_for(lambda: condition(workload_of(stack, ns, name), "Evicted").get("reason")
                        == "PodsReadyTimeout", 60), condition(workload_of(stack, ns, name), "Evicted")
        workload = workload_of(stack, ns, name) or {}
        assert condition(workload, "QuotaReserved").get("status") == "False"
        assert (workload["status"].get("requeueState") or {}).get("count") == 1, workload["status"]
    finally:
        stack.stop()
