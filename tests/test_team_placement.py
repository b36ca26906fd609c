"""Issue 57: where a team is placed is stated, checked and explained.

A team with no `quotas` rendered nothing in any cluster, with no warning, while `explain` printed its
namespace as if it existed. A CPU-only team is now a first-class form (`quotas: {<cluster>: {}}`, on
the cluster's cpuPool), a team placed nowhere is an error, and a follow-on error never offers a typo
as its fix.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import edit, run

CPU_ONLY = """# A data-engineering team: CPU jobs only, on prod-east's CPU pool.
name: data-eng
owners: ["@acme/data-eng"]
members: {groups: [data-eng]}
defaultPriority: standard
quotas:
  prod-east: {}
"""


def _team(root: Path, text: str, name: str = "data-eng") -> None:
    (root / "teams" / f"{name}.yaml").write_text(text)


def _rendered(root: Path, cluster: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for path in (root / "rendered" / cluster).rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "kind" in doc and "metadata" in doc:
                out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


@pytest.mark.parametrize("quotas", ["", "quotas: {}\n"], ids=["omitted", "empty"])
def test_a_team_placed_nowhere_is_a_located_error_that_says_how_to_place_it(fleet_root: Path, quotas: str) -> None:
    _team(fleet_root, CPU_ONLY.replace("quotas:\n  prod-east: {}\n", quotas))
    result = run(fleet_root, "render")
    assert result.code == 2, result.out + result.err
    line = 6 if quotas else 2  # the quotas key where it is written, else the team's name
    assert f"teams/data-eng.yaml:{line}" in result.err, result.err
    assert "has no queue in any cluster, so nothing of it is rendered" in result.err
    assert "quotas: {<cluster>: {}} in a cluster with a cpuPool: dev, prod-east, prod-west" in result.err
    assert "Traceback" not in result.err
    explained = run(fleet_root, "explain", "team", "data-eng")
    assert explained.code == 2 and "namespaces" not in explained.out, explained.out  # no namespace claimed


def test_a_cpu_only_team_gets_namespace_and_a_queue_with_the_cpu_pool_only(fleet_root: Path) -> None:
    _team(fleet_root, CPU_ONLY)
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    objects = _rendered(fleet_root, "prod-east")
    assert ("Namespace", "data-eng") in objects
    assert objects[("LocalQueue", "default")]  # every team namespace's default queue
    queue = objects[("ClusterQueue", "data-eng")]
    assert [[f["name"] for f in g["flavors"]] for g in queue["spec"]["resourceGroups"]] == [["cpu"]]
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory"]
    assert not any(k == ("Namespace", "data-eng") for k in _rendered(fleet_root, "dev"))
    explained = run(fleet_root, "explain", "team", "data-eng").out
    assert "in prod-east: CPU-only: no GPU quota, so a job asking for GPUs waits" in explained, explained
    assert "CPU-only jobs run on cpuPool cpu" in explained, explained


def test_a_cpu_only_team_where_no_cpu_pool_is_refused(fleet_root: Path) -> None:
    _team(fleet_root, CPU_ONLY.replace("prod-east: {}", "hub: {}"))
    result = run(fleet_root, "render")
    assert result.code == 2 and "teams/data-eng.yaml:7" in result.err, result.err
    assert "has no GPU quota in cluster 'hub', which has no cpuPool: its queue there could admit no job" in result.err


def test_a_never_preempted_cpu_only_team_needs_a_held_cpu_limit(fleet_root: Path) -> None:
    _team(fleet_root, CPU_ONLY + "policy: {neverPreempted: true}\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and "set cpuPool.teamLimits.data-eng in clusters/prod-east.yaml" in result.err, result.err
    edit(fleet_root, "clusters/prod-east.yaml", "cpuPool: {nodes: 8, cpuPerNode: \"62\", memoryPerNode: 240Gi,",
         "cpuPool: {teamLimits: {data-eng: {cpu: \"32\", memory: 128Gi}}, nodes: 8, cpuPerNode: \"62\", "
         "memoryPerNode: 240Gi,")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err


def test_a_follow_on_error_never_offers_the_typo_as_its_fix(fleet_root: Path) -> None:
    """A misspelt cluster in `quotas` is its own error; the stop and the profile that name the right
    cluster used to be told `use one of: prod-eats`."""
    edit(fleet_root, "teams/vision.yaml", "quotas:\n  prod-east:",
         "stopPolicy: {prod-east: Hold}\nquotas:\n  prod-eats:")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "unknown cluster 'prod-eats'" in result.err and "use one of: dev, hub, prod-east, prod-west" in result.err
    follow_ons = [line for line in result.err.splitlines() if "no queue in cluster 'prod-east'" in line
                  or "no quota in cluster 'prod-east'" in line]
    assert follow_ons, result.err
    fixes = [line for line in result.err.splitlines() if "use one of" in line and "prod-eats" in line]
    assert fixes == [], fixes


def test_a_renamed_pool_is_never_suggested_by_its_old_name(fleet_root: Path) -> None:
    """dev's pool l4 renamed l4-ada: the team quotas still naming l4 are each an error suggesting l4-ada;
    speech's job profiles on l4 used to be told `use one of: l4`, the name just removed."""
    edit(fleet_root, "clusters/dev.yaml", "  - name: l4\n", "  - name: l4-ada\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "cluster 'dev' has no node pool 'l4'" in result.err and "use one of: l4-ada" in result.err, result.err
    profiles = [line for line in result.err.splitlines() if "has no quota in pool 'l4'" in line]
    assert profiles, result.err
    fixes = [line for line in result.err.splitlines() if line.strip().startswith("fix: use one of") and " l4," in
             line + ","]
    assert fixes == [], fixes


@pytest.mark.upstream
def test_a_cpu_only_teams_job_runs_on_the_cpu_pool_and_a_gpu_job_waits_on_the_real_kueue(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A member of the CPU-only team submits a CPU Job with no queue label and a GPU Job: Kueue admits
    the first on the team's queue, flavor cpu, and kube-scheduler binds its pod to a CPU node; the GPU
    Job stays unadmitted, Kueue saying the queue has no such resource."""
    from kubernetes import client

    from tests.upstream.fleet import condition, fake_nodes, flavors, workload_of
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import MANAGED, running_twin

    _team(fleet_root, CPU_ONLY)
    assert run(fleet_root, "render", "--cluster", "prod-east").code == 0
    # bound, never run: the admitted Job keeps its quota while we look
    with running_twin("prod-east", upstream_etcd, tmp_path_factory.mktemp("cpu-only"), root=fleet_root,
                      kubelets=False) as (stack, fleet, twin):
        cluster, team = fleet.clusters["prod-east"].config, fleet.teams["data-eng"].config
        member = stack.client("ana@data-eng.test", tuple(team.members.groups))
        batch, ns, tag = client.BatchV1Api(member), "data-eng", uuid.uuid4().hex[:5]
        requests = {"cpu": {"cpu": "4", "memory": "8Gi"},
                    "gpu": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}}
        for kind, wants in requests.items():
            batch.create_namespaced_job(ns, {"apiVersion": "batch/v1", "kind": "Job",
                                             "metadata": {"name": f"{kind}-{tag}"}, "spec": {"template": {"spec": {
                                                 "restartPolicy": "Never", "containers": [{
                                                     "name": "c", "image": "registry.example/work:1",
                                                     "resources": {"requests": wants, "limits": wants}}]}}}})

        def workload(job: str) -> dict[str, Any]:
            return workload_of(stack, ns, job, "Job") or {}

        cpu_job, gpu_job = f"cpu-{tag}", f"gpu-{tag}"
        assert wait_for(lambda: condition(workload(cpu_job), "Admitted").get("status") == "True", 60), \
            workload(cpu_job).get("status")
        admitted = workload(cpu_job)
        assert admitted["status"]["admission"]["clusterQueue"] == "data-eng" and flavors(admitted) == {"cpu"}
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(cluster)}

        def node_pool() -> str:
            pods = client.CoreV1Api(stack.client()).list_namespaced_pod(ns, label_selector=f"job-name={cpu_job}")
            return next((pool_of.get(p.spec.node_name or "", "") for p in pods.items if p.spec.node_name), "")
        assert wait_for(node_pool, 60) == "cpu", (node_pool(), twin.logs())

        def refusal() -> str:
            return str(condition(workload(gpu_job), "QuotaReserved").get("message", ""))
        assert wait_for(lambda: "nvidia.com/gpu" in refusal(), 60), workload(gpu_job).get("status")
        assert condition(workload(gpu_job), "Admitted").get("status") != "True"
