"""Issue 53: every GPU job in a team namespace lands on a queue that can hold it, shared pools included.

A team whose only GPUs in a cluster are in a pool shared by usage (Kueue's Admission Fair Sharing) has
a ClusterQueue with the CPU pool's flavor only. Kueue gives a job without a queue label LocalQueue
`default`, on that queue, and so did a job labelled with the team's name: a GPU job there stayed
pending for ever ("resource nvidia.com/gpu unavailable in ClusterQueue"), render said nothing and
`explain` said it ran "on the team's queue (its quota)". Now the API server relabels it onto the team's
queue on the shared pool (`compile/queue_routing.py`); where it cannot, render warns and explain says so.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.compile.admission import INTEGRATION_KINDS
from tests.conftest import edit, run
from tests.kueue_kinds import KIND_CRDS, POD, object_of_kind

ONLY_SHARED = ("teams/recsys.yaml", "    a100: {gpus: 24, lendingLimit: 24}\n", "")
"""recsys without its A100s: in prod-west it has GPUs only in l4, shared by usage."""
POLICY = "rendered/prod-west/teams/mutatingadmissionpolicy-fleetgen-shared-queue-recsys.yaml"
BINDING = "rendered/prod-west/teams/mutatingadmissionpolicybinding-fleetgen-shared-queue-recsys.yaml"
RELABELLED = ("in prod-west: jobs without a queue label get LocalQueue default, on the team's queue (its quota), "
              "which has no nvidia.com/gpu: the team has them here only in pools shared by usage (l4); in namespace "
              "recsys a job asking for nvidia.com/gpu with no queue label, or labelled default or recsys, is "
              "relabelled kueue.x-k8s.io/queue-name: recsys-l4 as it is created (a MutatingAdmissionPolicy) and "
              "waits there with the team's other jobs on the pool; CPU-only jobs run on cpuPool cpu (up to 124 CPUs "
              "and 480Gi of it), and wait when the team's limit is reached or the pool is full")


def _gpu_pod(gpus: int) -> dict[str, Any]:
    return {"restartPolicy": "Never", "containers": [{
        "name": "c", "image": "registry.example/work:1",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                      "limits": {"nvidia.com/gpu": str(gpus)}}}]}


def test_a_teams_gpu_jobs_are_admitted_on_its_shared_pool_on_the_real_kueue(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Intent: a team whose only GPUs in prod-west are in the l4 pool shared by usage submits, as a member,
    a GPU Job with no queue label and a GPU JobSet labelled `kueue.x-k8s.io/queue-name: recsys`; both are
    admitted to the pool, charged to the team's one queue there (recsys-l4, so Kueue ranks the team by
    its usage as one tenant), and kube-scheduler binds their pods to L4 nodes. Its CPU-only Job without
    a label still runs on the CPU pool, on the team's own queue. `explain` says exactly this. Before,
    Kueue left both GPU jobs pending: "resource nvidia.com/gpu unavailable in ClusterQueue"."""
    from kubernetes import client

    from tests.upstream.fleet import JOBSET, KUEUE, condition, custom, fake_nodes, flavors
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import MANAGED, running_twin

    edit(fleet_root, *ONLY_SHARED)
    result = run(fleet_root, "render", "--cluster", "prod-west")
    assert result.code == 0, result.err
    # bound, never run: they hold their GPUs while we look
    with running_twin("prod-west", upstream_etcd, tmp_path_factory.mktemp("shared-only"), root=fleet_root,
                      kubelets=False) as (stack, fleet, twin):
        cluster, team = fleet.clusters["prod-west"].config, fleet.teams["recsys"].config
        api = stack.client(team.members.users[0])
        batch, ns, tag = client.BatchV1Api(api), team.namespace_names[0], uuid.uuid4().hex[:5]
        jobs = {"unlabelled": f"gpu-{tag}", "cpu": f"cpu-{tag}"}
        batch.create_namespaced_job(ns, {"apiVersion": "batch/v1", "kind": "Job",
                                         "metadata": {"name": jobs["unlabelled"]},
                                         "spec": {"template": {"spec": _gpu_pod(1)}}})
        cpu_pod = _gpu_pod(0)
        cpu_pod["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        batch.create_namespaced_job(ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": jobs["cpu"]},
                                         "spec": {"template": {"spec": cpu_pod}}})
        named = f"named-{tag}"
        client.CustomObjectsApi(api).create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", {
            "apiVersion": f"{JOBSET}/v1alpha2", "kind": "JobSet",
            "metadata": {"name": named, "labels": {"kueue.x-k8s.io/queue-name": team.name}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": {"spec": _gpu_pod(4)}}}}]}})

        def workload(owner: str) -> dict[str, Any] | None:
            for wl in custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads")["items"]:
                if any(o["name"] == owner for o in wl["metadata"].get("ownerReferences") or []):
                    return dict(wl)
            return None

        def why(owner: str) -> str:
            return str(condition(workload(owner), "QuotaReserved").get("message"))

        admitted = {owner: wait_for(lambda o=owner: condition(workload(o), "Admitted").get("status") == "True", 60)
                    for owner in (jobs["unlabelled"], named, jobs["cpu"])}
        assert all(admitted.values()), {owner: why(owner) for owner, ok in admitted.items() if not ok}
        for owner in (jobs["unlabelled"], named):
            wl = workload(owner) or {}
            assert wl["spec"]["queueName"] == "recsys-l4", wl["spec"]
            assert wl["status"]["admission"]["clusterQueue"] == "shared-l4"
            assert flavors(wl) == {"l4"}
        cpu = workload(jobs["cpu"]) or {}
        assert (cpu["spec"]["queueName"], cpu["status"]["admission"]["clusterQueue"]) == ("default", "recsys")
        assert flavors(cpu) == {"cpu"}
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(cluster)}

        def bound() -> dict[str, str]:
            found = client.CoreV1Api(stack.client()).list_namespaced_pod(ns).items
            placed = {p.metadata.name: pool_of.get(p.spec.node_name or "", "") for p in found}
            return placed if len(placed) == 4 and all(placed.values()) else {}
        assert wait_for(bound, 60), (bound(), twin.logs())
        pools = {pod: pool for pod, pool in bound().items() if not pod.startswith(jobs["cpu"])}
        assert set(pools.values()) == {"l4"} and len(pools) == 3, pools
    explained = run(fleet_root, "explain", "team", "recsys").out
    assert RELABELLED in explained, explained


def test_the_policy_relabels_only_gpu_jobs_on_the_teams_own_queues_in_its_first_namespace(fleet_root: Path) -> None:
    """What the API server is given: creations of Kueue's job kinds, in the team's first namespace (by the
    name the API server sets), naming no queue, `default` or the team's; not children of another Kueue
    workload; asking for the shared pool's GPU. The example fleet, where every team holds GPUs of its own
    beside its shared ones, has no such policy."""
    assert not list(fleet_root.glob("rendered/*/teams/mutatingadmissionpolicy-fleetgen-shared-queue-*"))
    edit(fleet_root, *ONLY_SHARED)
    assert run(fleet_root, "render").code == 0
    policy = yaml.safe_load((fleet_root / POLICY).read_text())["spec"]
    binding = yaml.safe_load((fleet_root / BINDING).read_text())["spec"]
    assert binding["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["recsys"]}]
    conditions = {c["name"]: c["expression"] for c in policy["matchConditions"]}
    assert "object.metadata.labels['kueue.x-k8s.io/queue-name'] in ['default', 'recsys']" in \
        conditions["on-the-teams-own-queue"]
    assert "o.apiVersion.startsWith('jobset.x-k8s.io/')" in conditions["not-a-child-workload"]
    assert "'nvidia.com/gpu' in c.resources.limits" in conditions["asks-for-a-shared-pool-gpu"]
    assert policy["mutations"][0]["applyConfiguration"]["expression"] == \
        "Object{metadata: Object.metadata{labels: {'kueue.x-k8s.io/queue-name': 'recsys-l4'}}}"
    assert all(rule["operations"] == ["CREATE"] for rule in policy["matchConstraints"]["resourceRules"])


def test_a_second_namespace_has_no_queue_on_the_pool_and_render_says_so(fleet_root: Path) -> None:
    """vision keeps only l4 in prod-west (and so none of l40s on the hub, its MultiKueue manager) and has
    two namespaces: its queue on the pool is in the first
    only (a second would be a second tenant), so a GPU job in vision-eval is never admitted. The render
    warns at the team's quota line and explain says where to submit."""
    edit(fleet_root, "teams/vision.yaml", "    l40s: {gpus: 8}\n    l4: {gpus: 0, usageWeight: 2}",
         "    l4: {gpus: 0, usageWeight: 2}")
    edit(fleet_root, "teams/vision.yaml", "    h100: {gpus: 32}\n    l40s: {gpus: 8}", "    h100: {gpus: 32}")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert ("teams/vision.yaml:13: quotas.prod-west: team vision has nvidia.com/gpu in prod-west only in pools "
            "shared by usage (l4), whose queue vision-l4 is in namespace vision only: in vision-eval a job asking "
            "for them with no queue label, or labelled default or vision, stays pending for ever (Kueue: resource "
            "nvidia.com/gpu unavailable in ClusterQueue vision) [warning]") in result.err, result.err
    explained = run(fleet_root, "explain", "team", "vision").out
    assert ("; in vision-eval such a job stays pending for ever (Kueue: resource nvidia.com/gpu unavailable in "
            "ClusterQueue vision): label it kueue.x-k8s.io/queue-name: vision-l4 and submit it in namespace "
            "vision;") in explained, explained


def test_before_kubernetes_1_36_nothing_relabels_and_render_says_so(fleet_root: Path) -> None:
    """Without MutatingAdmissionPolicy nothing is rendered the API server would refuse; a warning and
    explain say that such jobs wait for ever unless labelled with the team's queue on the pool."""
    edit(fleet_root, *ONLY_SHARED)
    edit(fleet_root, "clusters/prod-west.yaml", 'kubernetesVersion: "1.36"', 'kubernetesVersion: "1.35"')
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert not (fleet_root / POLICY).exists()
    assert ("teams/recsys.yaml:9: quotas.prod-west: team recsys has nvidia.com/gpu in prod-west only in pools "
            "shared by usage (l4): in recsys a job asking for them with no queue label, or labelled default or "
            "recsys, stays pending for ever (Kueue: resource nvidia.com/gpu unavailable in ClusterQueue recsys) "
            "[warning]") in result.err, result.err
    explained = run(fleet_root, "explain", "team", "recsys").out
    assert ("(l4); a job asking for nvidia.com/gpu with no queue label, or labelled default or recsys, stays "
            "pending for ever (Kueue: resource nvidia.com/gpu unavailable in ClusterQueue "
            "recsys): label it kueue.x-k8s.io/queue-name: recsys-l4 and submit it in namespace recsys (relabelling "
            "it needs Kubernetes 1.36, the cluster is 1.35)") in explained, explained


def _kind_object(framework: str, crd: dict[str, Any] | None, gpu_at: int | None,
                 queue: str | None = None) -> dict[str, Any]:
    """A minimal object of the kind with a pod template at each of its template paths; the one at path
    number `gpu_at` asks for an L4 GPU (a limit, as most jobs write it); labelled `queue` when given."""
    gpu = {"containers": [{**POD["containers"][0], "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    meta: dict[str, Any] = {"generateName": "rq-"}
    if queue is not None:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return object_of_kind(framework, crd, lambda i: gpu if i == gpu_at else POD, meta)


def test_the_real_api_server_relabels_every_kind_that_asks_for_the_pools_gpu(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each Kueue job kind the policy names, with its controller's CRD, created (dry run) in recsys's
    namespace on the real API server: asking for the L4 GPU in any one of its pod templates with no queue
    label, or labelled `default` or `recsys`, it gets `recsys-l4`; asking for none, or labelled with
    another queue, it keeps what it had. A Job that a JobSet made keeps no label (Kueue queues the JobSet)."""
    from kubernetes.dynamic.exceptions import ServiceUnavailableError

    from tests.upstream import tools
    from tests.upstream.cluster import Stack
    from tests.upstream.fleet import apply
    from tests.upstream.processes import wait_for

    edit(fleet_root, *ONLY_SHARED)
    assert run(fleet_root, "render", "--cluster", "prod-west").code == 0
    policy = yaml.safe_load((fleet_root / POLICY).read_text())
    named = {f"{g}/{r}" for rule in policy["spec"]["matchConstraints"]["resourceRules"]
             for g in rule["apiGroups"] for r in rule["resources"]}
    kinds = [f for f, (g, r, paths) in INTEGRATION_KINDS.items() if paths and f"{g}/{r}" in named]
    assert len(kinds) >= 10, kinds
    crds = {f: yaml.safe_load(tools.module_file(*KIND_CRDS[f]).read_text()) for f in kinds if f in KIND_CRDS}
    stack = Stack.start(tmp_path_factory.mktemp("shared-queue-kinds"), upstream_etcd, platform=False)
    try:
        for crd in crds.values():
            stack.create(crd)
        stack._wait_established([c["metadata"]["name"] for c in crds.values()])
        apply(stack, policy)
        apply(stack, yaml.safe_load((fleet_root / BINDING).read_text()))
        apply(stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "recsys"}})
        client = stack.dynamic()

        def queue_of(body: dict[str, Any]) -> str | None:
            api = client.resources.get(api_version=body["apiVersion"], kind=body["kind"])

            def attempt() -> tuple[str | None] | None:
                try:
                    out = api.create(body=body, namespace="recsys", dry_run="All").to_dict()
                except ServiceUnavailableError:  # the policy's type for a new CRD comes a moment later
                    return None
                return ((out["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name"),)
            answer = wait_for(attempt, 30)
            assert answer is not None, f"{body['kind']}: still unavailable"
            return answer[0]

        # A new policy is compiled asynchronously: wait until it acts.
        assert wait_for(lambda: queue_of(_kind_object("batch/job", None, 0)) == "recsys-l4", 30)
        wrong: dict[str, Any] = {}
        for framework in kinds:
            crd, paths = crds.get(framework), INTEGRATION_KINDS[framework][2]
            got = [queue_of(_kind_object(framework, crd, i, q)) for i in range(len(paths))
                   for q in (None, "default", "recsys")]
            kept = [queue_of(_kind_object(framework, crd, None)), queue_of(_kind_object(framework, crd, 0, "other"))]
            if got != ["recsys-l4"] * len(got) or kept != [None, "other"]:
                wrong[framework] = (got, kept)
        assert not wrong, wrong
        child = _kind_object("batch/job", None, 0)
        child["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                 "name": "parent", "uid": str(uuid.uuid4())}]
        assert queue_of(child) is None
    finally:
        stack.stop()
