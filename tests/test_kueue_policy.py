"""Issue 16: Kueue policy whose meaning matches what Kueue does (fair sharing and what it ignores)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import edit, run
from tests.rendered import kueue_config


def test_fair_sharing_accepted_explicitly_keeps_borrow_within_cohort(fleet_root: Path) -> None:
    """`kueue.fairSharing: true` says the cluster accepts fair sharing's preemption: borrowWithinCohort
    is then rendered (Kueue ignores it) instead of refused."""
    edit(fleet_root, "clusters/prod-east.yaml", "  queueingStrategy: BestEffortFIFO\n",
         "  queueingStrategy: BestEffortFIFO\n  fairSharing: true\n")
    edit(fleet_root, "clusters/prod-east.yaml", "    reclaimWithinCohort: Any\n",
         "    reclaimWithinCohort: Any\n    borrowWithinCohort: {policy: LowerPriority}\n")
    assert run(fleet_root, "render").code == 0
    cq = yaml.safe_load((fleet_root / "rendered/prod-east/teams/vision/clusterqueue-vision.yaml").read_text())
    assert cq["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}
    assert "fairSharing" in kueue_config(fleet_root, "prod-east")



CHART_RELEASES = {(0, 14): "v0.14.8", (0, 16): "v0.16.2", (0, 19): "v0.19.2"}
"""A release of each entry of KUEUE_CHART_FRAMEWORKS that the module proxy serves (v0.17 and v0.18
are not served, so their charts cannot be read here)."""


@pytest.mark.parametrize("minor", sorted(CHART_RELEASES))
def test_default_integrations_are_the_charts_own(minor: tuple[int, int], upstream_tools: None) -> None:
    """The chart's default integrations were dropped (Ray, TrainJob, LeaderWorkerSet, Deployment,
    StatefulSet jobs then ran unqueued); the table is read back from each chart in its Go module."""
    from generator.config.cluster import KUEUE_CHART_FRAMEWORKS, Kueue
    from tests.upstream import tools

    values = yaml.safe_load((tools.chart("kueue", CHART_RELEASES[minor]) / "values.yaml").read_text())
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert tuple(config["integrations"]["frameworks"]) == KUEUE_CHART_FRAMEWORKS[minor]
    rendered = Kueue(version=CHART_RELEASES[minor]).frameworks
    assert set(rendered) >= set(KUEUE_CHART_FRAMEWORKS[minor]) | {"jobset.x-k8s.io/jobset", "pod"}


def test_declared_integrations_must_keep_jobset(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n", "kueue:\n  integrations: [batch/job, pod]\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and "clusters/prod-west.yaml:6" in result.err
    assert "integrations must include jobset.x-k8s.io/jobset" in result.err


def test_a_team_policy_refuses_disallowed_priorities_on_the_real_api_server(kube_stack: Any) -> None:
    """`allowedPriorities` of platform-ci (preemptible only) as the API server enforces it: a Job
    labelled `standard` in its namespace is refused with the policy's message, `preemptible` passes,
    and other namespaces are not affected."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from tests.conftest import REPO
    from tests.upstream.fleet import apply
    from tests.upstream.processes import wait_for

    teams = REPO / "rendered" / "prod-east" / "teams"
    for name in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
        apply(kube_stack, yaml.safe_load((teams / f"{name}-fleetgen-priorities-platform-ci.yaml").read_text()))
    for ns in ("platform-ci", "someone-else"):
        apply(kube_stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    batch = client.BatchV1Api(kube_stack.client())

    def job(priority: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"generateName": "prio-", "labels": {"kueue.x-k8s.io/priority-class": priority}},
                "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "registry.example/x:1"}]}}}}

    def refused(ns: str, priority: str) -> str:
        try:
            batch.create_namespaced_job(ns, job(priority), dry_run="All")
        except ApiException as exc:
            return str(exc.body)
        return ""

    # The API server compiles a new policy asynchronously: wait until it answers.
    message = wait_for(lambda: refused("platform-ci", "standard"), 30)
    assert "team platform-ci may use priority classes preemptible, not standard" in message, message
    assert refused("platform-ci", "preemptible") == ""
    assert refused("someone-else", "standard") == ""


def test_allowed_priorities_must_cover_the_teams_own_jobs(fleet_root: Path) -> None:
    edit(fleet_root, "teams/platform-ci.yaml", "allowedPriorities: [preemptible]", "allowedPriorities: [standard]")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/platform-ci.yaml:8: defaultPriority: priority 'preemptible' is not in allowedPriorities" in result.err
    edit(fleet_root, "teams/platform-ci.yaml", "allowedPriorities: [standard]", "allowedPriorities: [urgent]")
    assert "allowedPriorities[0]: priority 'urgent' is not defined in cluster" in run(fleet_root, "render").err


def test_stop_policy_stops_the_teams_queue_in_the_named_cluster_only(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "quotas:\n", "stopPolicy: {prod-east: HoldAndDrain, dev: None}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err

    def spec(cluster: str) -> dict[str, Any]:
        path = fleet_root / "rendered" / cluster / "teams" / "vision" / "clusterqueue-vision.yaml"
        return dict(yaml.safe_load(path.read_text())["spec"])

    assert spec("prod-east")["stopPolicy"] == "HoldAndDrain"
    assert "stopPolicy" not in spec("prod-west") and "stopPolicy" not in spec("dev")  # None is Kueue's default
    explained = run(fleet_root, "explain", "team", "vision").out
    assert "in prod-east: queue stopped (HoldAndDrain: admitted jobs evicted, nothing admitted)" in explained
    assert "\nin dev: queue stopped" not in explained


def test_stop_policy_must_name_a_cluster_the_team_queues_in(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "quotas:\n", "stopPolicy:\n  prod-north: Hold\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/vision.yaml:11: stopPolicy.prod-north: team 'vision' has no queue in cluster 'prod-north'" \
        in result.err
    assert "fix: use one of: dev, hub, prod-east, prod-west" in result.err
    edit(fleet_root, "teams/vision.yaml", "prod-north: Hold", "prod-east: Drain")
    result = run(fleet_root, "render")
    assert result.code == 2 and "teams/vision.yaml:11: stopPolicy.prod-east:" in result.err, result.err


def test_stopping_and_starting_a_queue_are_risks_in_the_diff(repo: Path) -> None:
    from tests.conftest import git

    path = repo / "teams/vision.yaml"
    path.write_text(path.read_text().replace("quotas:\n", "stopPolicy: {prod-west: HoldAndDrain}\nquotas:\n"))
    result = run(repo, "diff", "--format", "json")
    assert result.code == 1, result.err
    risks = [(r["severity"], r["rule"], r["message"]) for r in json.loads(result.out)["risks"]]
    assert ("high", "queue-stopped", "prod-west: ClusterQueue vision stopPolicy None -> HoldAndDrain: evicts every "
            "admitted workload of the team (they requeue) and admits nothing new") in risks, risks
    git(repo, "commit", "-qam", "drain vision")
    path.write_text(path.read_text().replace("HoldAndDrain", "Hold"))
    risks = [(r["severity"], r["rule"]) for r in json.loads(run(repo, "diff", "--format", "json").out)["risks"]]
    assert ("medium", "queue-stopped") in risks, risks
    path.write_text(path.read_text().replace("stopPolicy: {prod-west: Hold}\n", ""))
    risks = [(r["severity"], r["rule"]) for r in json.loads(run(repo, "diff", "--format", "json").out)["risks"]]
    assert ("low", "queue-started") in risks, risks


def _queue(root: Path, cluster: str, team: str) -> dict[str, Any]:
    path = root / "rendered" / cluster / "teams" / team / f"clusterqueue-{team}.yaml"
    return dict(yaml.safe_load(path.read_text())["spec"])


def _flavors(spec: dict[str, Any]) -> list[str]:
    return [f["name"] for group in spec["resourceGroups"] for f in group["flavors"]]


def test_a_team_orders_its_own_pools(fleet_root: Path) -> None:
    """The cluster's pool order was every team's; `flavorOrder` puts inference's L40S first in
    prod-west only (after the CPU pool's flavor, always first)."""
    assert _flavors(_queue(fleet_root, "prod-west", "inference")) == ["cpu", "a100", "l40s"]
    edit(fleet_root, "teams/inference.yaml", "quotas:\n", "flavorOrder: {prod-west: [l40s, a100]}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert _flavors(_queue(fleet_root, "prod-west", "inference")) == ["cpu", "l40s", "a100"]
    assert _flavors(_queue(fleet_root, "prod-west", "platform-ci")) == ["cpu", "a100", "l40s"]


@pytest.mark.parametrize(("order", "message"), [
    ("{prod-west: [l40s]}", "flavorOrder.prod-west: lists l40s, but the team's pools in 'prod-west' are l40s, a100"),
    ("{prod-west: [l40s, a100, a100]}", "flavorOrder.prod-west: lists l40s, a100, a100, but the team's pools"),
    ("{prod-east: [h100]}", "flavorOrder.prod-east: team 'inference' has no queue in cluster 'prod-east'"),
])
def test_a_flavor_order_lists_exactly_the_teams_pools(fleet_root: Path, order: str, message: str) -> None:
    edit(fleet_root, "teams/inference.yaml", "quotas:\n", f"flavorOrder: {order}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and message in result.err, result.err
    assert result.err.startswith("teams/inference.yaml:"), result.err


def test_flavor_fungibility_from_the_cluster_or_the_team(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n",
         "kueue:\n  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n")
    edit(fleet_root, "teams/inference.yaml", "quotas:\n", "flavorFungibility:\n  whenCanBorrow: TryNextFlavor\n"
         "  whenCanPreempt: TryNextFlavor\n  preference: PreemptionOverBorrowing\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert _queue(fleet_root, "prod-west", "recsys")["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    assert _queue(fleet_root, "prod-west", "inference")["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}
    assert "flavorFungibility" not in _queue(fleet_root, "prod-east", "vision")  # Kueue's defaults there


def test_preference_needs_both_try_next_flavor_as_kueue_requires(fleet_root: Path) -> None:
    edit(fleet_root, "teams/inference.yaml", "quotas:\n",
         "flavorFungibility: {whenCanPreempt: TryNextFlavor, preference: BorrowingOverPreemption}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/inference.yaml:" in result.err and "flavorFungibility" in result.err
    assert "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor" in result.err


@pytest.mark.parametrize("release", ["v0.14.8", "v0.15.2"])
def test_fungibility_in_each_kueue_releases_words(fleet_root: Path, release: str, upstream_tools: None) -> None:
    """Kueue v0.14 says Borrow / Preempt where later releases say MayStopSearch: what dev renders
    is checked against the ClusterQueue CRD of that release, from its Go module."""
    import jsonschema_rs

    from tests.upstream import tools

    edit(fleet_root, "clusters/dev.yaml", "  version: v0.15.2", f"  version: {release}")
    edit(fleet_root, "clusters/dev.yaml", "kueue:\n", "kueue:\n  flavorFungibility: {whenCanBorrow: MayStopSearch, "
         "whenCanPreempt: MayStopSearch}\n")
    result = run(fleet_root, "render", "--cluster", "dev")
    assert result.code == 0, result.err
    rendered = _queue(fleet_root, "dev", "vision")["flavorFungibility"]
    assert rendered == ({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"} if release == "v0.14.8"
                        else {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"})
    module = tools.chart("kueue", release).parent.parent
    crd = yaml.safe_load((module / "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["flavorFungibility"]
    assert not [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(rendered)]
    # ... and the other release's words are refused by that CRD (the check can fail).
    other = {"whenCanBorrow": "MayStopSearch"} if release == "v0.14.8" else {"whenCanBorrow": "Bogus"}
    assert [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(other)]
    if release == "v0.14.8":
        edit(fleet_root, "teams/vision.yaml", "quotas:\n", "flavorFungibility: {whenCanBorrow: TryNextFlavor, "
             "whenCanPreempt: TryNextFlavor, preference: BorrowingOverPreemption}\nquotas:\n")
        result = run(fleet_root, "render")
        assert result.code == 2 and "flavorFungibility.preference: Kueue v0.14.8 in cluster 'dev' has no " \
            "flavorFungibility.preference" in result.err, result.err


def test_a_cohort_holds_gpus_for_its_teams_and_limits_its_borrowing(fleet_root: Path) -> None:
    """`cohorts[].quotas` becomes the Cohort's resourceGroups (CPU and memory in the pool's ratio);
    the GPUs count against the pool, leave the root cohort's share, and `explain` shows what the
    cohort's teams can then have."""
    edit(fleet_root, "clusters/prod-east.yaml", "  - {name: research}\n",
         "  - name: research\n    quotas:\n      h100: {gpus: 16, borrowingLimit: 8, lendingLimit: 8}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    cohort = yaml.safe_load((fleet_root / "rendered/prod-east/kueue/cohort-research.yaml").read_text())
    assert cohort["spec"]["resourceGroups"] == [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
        {"name": "h100", "resources": [
            {"name": "cpu", "nominalQuota": "384", "borrowingLimit": "192", "lendingLimit": "192"},
            {"name": "memory", "nominalQuota": "3600Gi", "borrowingLimit": "1800Gi", "lendingLimit": "1800Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": "16", "borrowingLimit": "8", "lendingLimit": "8"}]}]}]
    root = yaml.safe_load((fleet_root / "rendered/prod-east/kueue/cohort-prod-east.yaml").read_text())
    assert root["spec"]["resourceGroups"][0]["flavors"][0]["resources"][-1] == {
        "name": "nvidia.com/gpu", "nominalQuota": "16"}  # 32 nobody held, less the cohort's 16
    explained = run(fleet_root, "explain", "cluster", "prod-east").out
    assert "allocated 240 (94%), free 16, 16 lent by the root cohort" in explained, explained
    assert "held by cohorts for their teams: research 16" in explained
    # vision (in research-vision, under research) may borrow the cohort's 16, what ml-research lends
    # (16) and, research being limited to 8 from outside, 8 more: 40 of its own limit of 64.
    team = run(fleet_root, "explain", "team", "vision").out
    assert re.search(r"prod-east +h100 +32 +40 \(64\)", team), team


def test_cohort_quotas_count_against_the_pool_and_name_its_pools(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-east.yaml", "  - {name: research}\n",
         "  - name: research\n    quotas:\n      h100: {gpus: 40}\n      b200: {gpus: 8}\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "clusters/prod-east.yaml:30: cohorts[0].quotas.b200: pool 'b200' is not defined in cluster 'prod-east'" \
        in result.err, result.err
    assert "clusters/prod-east.yaml:16: nodePools[0]: pool 'h100' has 256 GPUs x overcommit 1 = 256, but teams " \
        "and cohorts hold 264 (llm-pretrain 128, ml-research 64, cohort research 40, vision 32, platform-ci 0)" \
        in result.err, result.err


def test_explain_says_who_can_preempt_whom(fleet_root: Path) -> None:
    """`explain team`: per cluster, the team's classes and what the cluster's preemption policy
    (and fair sharing, which overrides borrowWithinCohort) lets it and others do."""
    out = run(fleet_root, "explain", "team", "platform-ci").out
    west = out[out.index("preemption in prod-west:"):]
    assert west.splitlines()[:10] == [
        "preemption in prod-west:",
        "- its priority classes: preemptible (10); default preemptible, given to every workload created in its "
        "namespaces that names no class (label or pod priorityClassName)",
        "- Kubernetes PriorityClasses cannot lift its workloads off the cluster's ladder: in its namespaces pod "
        "templates may name only preemptible, production, standard as priorityClassName, and a pod or Kueue "
        "Workload runs only at one of the ladder's values or at most 10 (the API server refuses the rest: "
        "fleetgen-team-priorities)",
        "- when others borrow what it lends, it takes its guaranteed GPUs back by preempting borrowers' "
        "workloads of lower priority only; borrowers of its priority or above keep them until their jobs end",
        "- a reclaim takes at most 300 s plus Kueue's and the scheduler's reaction: Kueue stops the preempted job "
        "at once, its pods hold their GPUs until they have stopped, and no pod in a team namespace may take longer "
        "than 300 s to stop (kueue.maxTerminationGracePeriodSeconds 300, a team's policy may shorten its own)",
        # inference is never preempted, so it borrows from nobody (issue 53).
        "- its guaranteed a100 GPUs are not guaranteed once lent: ml-research, recsys can borrow them "
        "at preemptible or above and keep them until their jobs end",
        "- its guaranteed l40s GPUs are not guaranteed once lent: vision can borrow them at "
        "preemptible or above and keep them until their jobs end",
        # Kueue filters fair sharing's candidates by reclaimWithinCohort (issue 31; kueue v0.19.2
        # pkg/scheduler/preemption/preemption.go:636-646): not "any priority".
        "- while borrowing, fair sharing decides: it may preempt the borrowed workloads of teams above their "
        "weighted share (of lower priority only), and teams below theirs its borrowed work (of lower priority "
        "only, as reclaimWithinCohort LowerPriority allows)",
        "- what it borrows can be taken back by preemption by: inference, ml-research, recsys, vision",
        "- a job preempts the team's own jobs of lower priority, or of equal priority and started later"]
    edit(fleet_root, "clusters/prod-west.yaml", "reclaimWithinCohort: LowerPriority", "reclaimWithinCohort: Never")
    west = run(fleet_root, "explain", "team", "platform-ci").out
    west = west[west.index("preemption in prod-west:"):]
    assert "- while borrowing, it preempts nobody else's workloads, nor do others preempt its borrowed work: " \
        "under fair sharing Kueue still takes only what reclaimWithinCohort allows, and it is Never" in west, west
    assert "- its guaranteed a100 GPUs are not guaranteed once lent: ml-research, recsys can borrow " \
        "them and keep them until their jobs end" in west, west  # under Never, whatever their priority
    edit(fleet_root, "clusters/prod-west.yaml", "reclaimWithinCohort: Never", "reclaimWithinCohort: Any")
    west = run(fleet_root, "explain", "team", "platform-ci").out
    assert "not guaranteed once lent" not in west[west.index("preemption in prod-west:"):]
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n", "kueue:\n  fairSharing: false\n")
    for team in ("ml-research", "vision", "platform-ci", "recsys", "llm-pretrain", "inference"):
        path = fleet_root / f"teams/{team}.yaml"
        if path.exists():
            path.write_text(re.sub(r"fairSharingWeight: .*\n", "", path.read_text()))
    out = run(fleet_root, "explain", "team", "platform-ci").out
    assert "- while borrowing, it preempts nobody else's workloads" in out[out.index("preemption in prod-west:"):]


def test_a_cpu_pool_is_the_first_flavor_of_every_teams_queue(fleet_root: Path) -> None:
    """The CPU pool's flavor, lent whole by the root cohort (in the GPU pools' resource group: Kueue's
    webhook allows a resource in one group only), is the first flavor of each team's queue, holding
    nothing and no GPUs; both LocalQueues of every team namespace feed that queue, `default` marked
    as the namespace's default queue for CodeFlare. No `<team>-cpu` queue any more: it left GPU jobs
    without a queue label waiting forever (issue 31)."""
    flavor = yaml.safe_load((fleet_root / "rendered/prod-west/kueue/resourceflavor-cpu.yaml").read_text())
    assert flavor["spec"] == {"nodeLabels": {"node.fleetgen.io/pool": "cpu"}}
    root = yaml.safe_load((fleet_root / "rendered/prod-west/kueue/cohort-prod-west.yaml").read_text())
    (group,) = root["spec"]["resourceGroups"]
    # The pool (6 x 62 CPUs, 240Gi) less the teamLimit never-preempted inference holds (issue 53).
    assert group["flavors"][-1] == {"name": "cpu", "resources": [
        {"name": "cpu", "nominalQuota": "248"}, {"name": "memory", "nominalQuota": "960Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}
    (group,) = _queue(fleet_root, "prod-west", "vision")["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert [f["name"] for f in group["flavors"]] == ["cpu", "l40s"]
    assert group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "124"},
        {"name": "memory", "nominalQuota": "0", "borrowingLimit": "480Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]
    assert not list(fleet_root.glob("rendered/*/teams/*/clusterqueue-*-cpu.yaml"))
    for ns in ("vision", "vision-eval"):
        lqs = {name: yaml.safe_load((fleet_root / f"rendered/prod-west/teams/vision/{ns}/localqueue-{name}.yaml")
                                    .read_text()) for name in ("vision", "default")}
        assert {n: q["spec"] for n, q in lqs.items()} == {"vision": {"clusterQueue": "vision"},
                                                          "default": {"clusterQueue": "vision"}}
        assert lqs["default"]["metadata"]["annotations"] == {"kueue.x-k8s.io/default-queue": "true"}
        assert "annotations" not in lqs["vision"]["metadata"]
    explained = run(fleet_root, "explain", "team", "vision").out
    assert ("in prod-west: jobs without a queue label get LocalQueue default, on the team's queue (its quota); "
            "CPU-only jobs run on cpuPool cpu first (up to 124 CPUs and 480Gi of it), and on the CPU share of the "
            "team's GPU quota only when the team's limit is reached or the pool is full") in explained


def test_cpu_only_jobs_prefer_gpu_pools_when_the_queue_avoids_borrowing(fleet_root: Path) -> None:
    """All of the CPU pool is borrowed from the root cohort, so `whenCanBorrow: TryNextFlavor` makes
    Kueue look past it to a GPU pool where the team's own CPU share fits: `explain` and a warning say so."""
    edit(fleet_root, "teams/vision.yaml", "quotas:\n",
         "flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "teams/vision.yaml:" in result.err and "flavorFungibility.whenCanBorrow: in prod-west CPU-only jobs " \
        "prefer the CPU share of the team's GPU quota to cpuPool cpu" in result.err, result.err
    explained = run(fleet_root, "explain", "team", "vision").out
    assert "in prod-west: jobs without a queue label get LocalQueue default, on the team's queue (its quota); " \
        "CPU-only jobs prefer the CPU share of the team's GPU quota to cpuPool cpu" in explained


def test_the_cpu_pool_keeps_a_topology_aware_queue_topology_aware(fleet_root: Path) -> None:
    """Kueue places a job that asks for no topology by topology only in a queue whose flavors are all
    topology-aware (kueue v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go:198-220): on the
    real Kueue a plain GPU Job in prod-east (H100, topology-aware) was refused "Flavor h100 supports
    only TopologyAwareScheduling" once a CPU flavor without a topology joined the queue. So the CPU
    pool is topology-aware (the host) where every GPU pool is; in a cluster where only some are, a
    queue on topology-aware pools alone gets no CPU flavor, and `explain` says where its CPU-only jobs go."""
    flavor = yaml.safe_load((fleet_root / "rendered/prod-east/kueue/resourceflavor-cpu.yaml").read_text())
    assert flavor["spec"]["topologyName"] == "cpu"
    topology = yaml.safe_load((fleet_root / "rendered/prod-east/kueue/topology-cpu.yaml").read_text())
    assert topology["spec"] == {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}
    assert _flavors(_queue(fleet_root, "prod-east", "vision")) == ["cpu", "h100"]
    assert "topologyName" not in yaml.safe_load((fleet_root / "rendered/prod-west/kueue/resourceflavor-cpu.yaml")
                                                .read_text())["spec"]
    edit(fleet_root, "clusters/prod-west.yaml", "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-L40S}\n",
         "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-L40S}\n    topologyLevels: [kubernetes.io/hostname]\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert _flavors(_queue(fleet_root, "prod-west", "vision")) == ["l40s"]  # L40S only: topology-aware
    assert _flavors(_queue(fleet_root, "prod-west", "inference")) == ["cpu", "a100", "l40s"]  # mixed already
    assert "in prod-west: jobs without a queue label get LocalQueue default, on the team's queue (its quota); " \
        "CPU-only jobs run on its GPU pools, in the CPU share of its GPU quota: its queue is topology-aware and " \
        "cpuPool cpu is not" in run(fleet_root, "explain", "team", "vision").out
    # No CPU pool flavor in vision's queue, so nothing for TryNextFlavor to pass over: no warning.
    edit(fleet_root, "teams/vision.yaml", "quotas:\n", "flavorFungibility: {whenCanBorrow: TryNextFlavor}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "in prod-west CPU-only jobs prefer the CPU share" not in result.err, result.err
    assert "in prod-east CPU-only jobs prefer the CPU share" in result.err, result.err  # H100 and a CPU flavor


def test_a_cpu_pool_must_not_take_a_gpu_pools_name(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", "cpuPool:\n  nodes: 6", "cpuPool:\n  name: a100\n  nodes: 6")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "cpuPool.name: 'a100' is also a GPU pool's name" in result.err


def test_a_cohorts_quota_change_is_a_risk_in_the_diff(repo: Path) -> None:
    path = repo / "clusters/prod-east.yaml"
    path.write_text(path.read_text().replace("  - {name: research}\n",
                                             "  - name: research\n    quotas: {h100: {gpus: 0, borrowingLimit: 16}}\n"))
    result = run(repo, "diff", "--format", "json")
    assert result.code == 1, result.err
    risks = [(r["severity"], r["rule"], r["message"]) for r in json.loads(result.out)["risks"]]
    assert ("medium", "cohort-quota-changed", "prod-east: Cohort research changes its own quota or limits: what its "
            "teams can borrow, and lend outside it, changes") in risks, risks


def test_a_cpu_pool_caps_each_teams_cpu_only_jobs(fleet_root: Path) -> None:
    """prod-west's `cpuPool.teamLimit` on the CPU flavor of every team's queue (its borrowingLimit: the
    flavor holds nothing, all it uses is lent by the root cohort); `teamLimits` overrides it per team."""
    def cpu_limits(team: str) -> list[Any]:
        doc = yaml.safe_load((fleet_root / f"rendered/prod-west/teams/{team}/clusterqueue-{team}.yaml").read_text())
        cpu = doc["spec"]["resourceGroups"][0]["flavors"][0]
        assert cpu["name"] == "cpu"
        return [r.get("borrowingLimit") for r in cpu["resources"] if r["name"] in ("cpu", "memory")]

    assert cpu_limits("vision") == cpu_limits("recsys") == ["124", "480Gi"]
    edit(fleet_root, "clusters/prod-west.yaml", "  teamLimit: {cpu: \"124\", memory: 480Gi}\n",
         "  teamLimit: {cpu: \"124\", memory: 480Gi}\n  teamLimits: {recsys: {cpu: 8000m, memory: 16384Mi}}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert cpu_limits("vision") == ["124", "480Gi"]
    assert cpu_limits("recsys") == ["8", "16Gi"]
    edit(fleet_root, "clusters/prod-west.yaml", "teamLimits: {recsys:", "teamLimits: {speech:")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "clusters/prod-west.yaml:" in result.err and "cpuPool.teamLimits.speech: team 'speech' has no queue in " \
        "cluster 'prod-west'" in result.err, result.err


def test_a_guarantee_that_cannot_be_taken_back_is_warned(fleet_root: Path) -> None:
    """Issue 31: under prod-west's `reclaimWithinCohort: LowerPriority` a lender waits while a borrower
    of its priority or above keeps its GPUs (shown on the real Kueue in tests/test_e2e_fleet.py). One
    warning per cluster at the policy's line lists each lender, pool and who can keep it; quota that
    is never lent (`lendingLimit: 0`) is not listed, and `Any` warns of nothing."""
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "clusters/prod-west.yaml:9: kueue.preemption.reclaimWithinCohort: in prod-west guaranteed GPUs are " \
        "not guaranteed once lent: reclaimWithinCohort LowerPriority takes them back only from lower " \
        "priorities, so borrowers keep them until their jobs end: " in result.err, result.err
    assert "l40s of platform-ci (at preemptible) by vision" in result.err
    assert "l40s of inference" not in result.err  # lendingLimit: 0
    assert "fix: set reclaimWithinCohort: Any, or lendingLimit: 0 on quota that must be there at once" in result.err
    edit(fleet_root, "teams/platform-ci.yaml", "    l40s: {gpus: 4}", "    l40s: {gpus: 4, lendingLimit: 0}")
    result = run(fleet_root, "render")
    assert "l40s of platform-ci" not in result.err and "not guaranteed once lent" in result.err
    edit(fleet_root, "clusters/prod-west.yaml", "reclaimWithinCohort: LowerPriority", "reclaimWithinCohort: Any")
    result = run(fleet_root, "render")
    assert result.code == 0 and "not guaranteed once lent" not in result.err, result.err


def _refused(root: Path) -> str:
    """`render` refuses the fleet: its error output."""
    result = run(root, "render")
    assert result.code == 2, result.err
    return result.err


def _cq(root: Path, cluster: str, team: str) -> dict[str, Any]:
    return dict(yaml.safe_load((root / f"rendered/{cluster}/teams/{team}/clusterqueue-{team}.yaml").read_text()))


def test_a_team_sets_its_own_queue_policy_within_the_clusters_limits(fleet_root: Path) -> None:
    """Issue 31: queueing strategy and preemption were cluster-wide only. A team's `policy` sets its
    own queue's; what reaches other teams' work (reclaimWithinCohort, borrowWithinCohort) only where
    the cluster's `kueue.teamPolicy` lists it. Kueue's outcome: tests/test_e2e_fleet.py."""
    assert _cq(fleet_root, "prod-east", "llm-pretrain")["spec"]["queueingStrategy"] == "StrictFIFO"  # the example
    assert _cq(fleet_root, "prod-east", "vision")["spec"]["queueingStrategy"] == "BestEffortFIFO"
    edit(fleet_root, "teams/vision.yaml", "quotas:\n",
         "policy:\n  reclaimWithinCohort: Any\n  withinClusterQueue: Never\nquotas:\n")
    err = _refused(fleet_root)
    assert "teams/vision.yaml:11: policy.reclaimWithinCohort: cluster prod-west lets teams choose " \
        "reclaimWithinCohort LowerPriority, not Any" in err, err
    assert "fix: choose one of those, or ask the platform team to list Any in kueue.teamPolicy." \
        "reclaimWithinCohort of clusters/prod-west.yaml" in err
    assert "prod-east" not in err  # Any is prod-east's own policy
    edit(fleet_root, "clusters/prod-west.yaml", "    withinClusterQueue: LowerOrNewerEqualPriority\n",
         "    withinClusterQueue: LowerOrNewerEqualPriority\n  teamPolicy: {reclaimWithinCohort: [Any]}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    preemption = _cq(fleet_root, "prod-west", "vision")["spec"]["preemption"]
    assert preemption == {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    assert _cq(fleet_root, "prod-west", "recsys")["spec"]["preemption"]["reclaimWithinCohort"] == "LowerPriority"
    assert "l40s of vision" not in result.err  # vision takes its guarantee back from anyone now
    out = run(fleet_root, "explain", "team", "vision").out
    west = out[out.index("preemption in prod-west:"):]
    assert "it takes its guaranteed GPUs back from borrowers by preempting their workloads, whatever their " \
        "priority" in west
    assert "- the team's own jobs never preempt each other" in west
    assert "it may preempt the borrowed workloads of teams above their weighted share (of any priority), and teams " \
        "below theirs its borrowed work (of lower priority only, as reclaimWithinCohort LowerPriority allows)" in west


def test_a_team_choosing_a_weaker_reclaim_is_warned_at_its_own_line(fleet_root: Path) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "quotas:\n", "policy: {reclaimWithinCohort: Never}\nquotas:\n")
    edit(fleet_root, "clusters/dev.yaml", "kueue:\n", "kueue:\n  teamPolicy: {reclaimWithinCohort: [Never]}\n")
    edit(fleet_root, "clusters/prod-east.yaml", "kueue:\n", "kueue:\n  teamPolicy: {reclaimWithinCohort: [Never]}\n")
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n", "kueue:\n  teamPolicy: {reclaimWithinCohort: [Never]}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "teams/ml-research.yaml:10: policy.reclaimWithinCohort: in dev guaranteed GPUs are not guaranteed " \
        "once lent: reclaimWithinCohort Never takes them back from nobody, so borrowers keep them until their " \
        "jobs end: l4 of ml-research (at standard) by " in result.err, result.err


def test_a_team_never_preempted_never_borrows(fleet_root: Path) -> None:
    """`policy.neverPreempted` (serving; the example's inference): borrowingLimit 0 on every resource of
    every flavor, the CPU pool's included, where it holds its cpuPool limit (issue 53), and
    withinClusterQueue Never; a borrowingLimit that says otherwise is an error naming the quota, and a
    cluster may refuse it. Kueue's outcome: tests/test_never_preempted.py."""
    spec = _cq(fleet_root, "prod-west", "inference")["spec"]
    assert spec["preemption"]["withinClusterQueue"] == "Never"
    (group,) = spec["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["cpu", "a100", "l40s"]
    assert all(r["borrowingLimit"] == "0" for f in group["flavors"] for r in f["resources"]), group
    assert group["flavors"][0]["resources"] == [  # prod-west's teamLimit, held
        {"name": "cpu", "nominalQuota": "124", "borrowingLimit": "0"},
        {"name": "memory", "nominalQuota": "480Gi", "borrowingLimit": "0"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"}]
    out = run(fleet_root, "explain", "team", "inference").out
    assert "- its workloads are never preempted, by any team or by its own: its queue never borrows " \
        "(borrowingLimit 0 in every flavor: a100, l40s, cpuPool cpu)" in out, out
    assert "- the cost: it never borrows idle GPUs or CPUs, and runs only on what it holds: 8 a100 GPUs, 32 l40s " \
        "GPUs, of cpuPool cpu 124 CPUs and 480Gi (its cpuPool limit, held for it; others may borrow them while it " \
        "leaves them idle)" in out, out
    assert "prod-west  l40s          32               0 (0)" in out
    edit(fleet_root, "teams/inference.yaml", "l40s: {gpus: 32, lendingLimit: 0}",
         "l40s: {gpus: 32, borrowingLimit: 8, lendingLimit: 0}")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/inference.yaml" in result.err and "policy.neverPreempted: quotas.prod-west.l40s borrows up to 8 " \
        "GPUs, and borrowed GPUs are taken back by preemption; remove its borrowingLimit" in result.err, result.err
    edit(fleet_root, "teams/inference.yaml", "borrowingLimit: 8, ", "")
    # Without a cpuPool limit for it, it holds none of the pool and borrows none of it.
    edit(fleet_root, "clusters/prod-west.yaml", '  teamLimit: {cpu: "124", memory: 480Gi}\n', "")
    result = run(fleet_root, "render")  # so its CPU-only router profile could never be admitted there
    assert result.code == 2 and "teams/inference.yaml:36: jobProfiles[1].nodes: team inference is never preempted " \
        "and holds none of cpuPool cpu of prod-west" in result.err, result.err
    team_file = fleet_root / "teams/inference.yaml"
    team_file.write_text(team_file.read_text().split("  # The routers")[0])
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    cpu = _cq(fleet_root, "prod-west", "inference")["spec"]["resourceGroups"][0]["flavors"][0]
    assert cpu["resources"][:2] == [{"name": "cpu", "nominalQuota": "0", "borrowingLimit": "0"},
                                    {"name": "memory", "nominalQuota": "0", "borrowingLimit": "0"}], cpu
    root = yaml.safe_load((fleet_root / "rendered/prod-west/kueue/cohort-prod-west.yaml").read_text())
    assert root["spec"]["resourceGroups"][0]["flavors"][-1]["resources"][0] == {"name": "cpu", "nominalQuota": "372"}
    out = run(fleet_root, "explain", "team", "inference").out
    assert "CPU-only jobs run on GPU nodes, in the CPU share of its GPU quota: never preempted, it borrows nothing, " \
        "and it holds none of cpuPool cpu (the cluster sets no cpuPool limit for it; " \
        "cpuPool.teamLimits.inference would be held for it)" in out, out
    # Never-preempted teams cannot hold more of the pool together than it has.
    edit(fleet_root, "clusters/prod-west.yaml", "  nodeLabels: {node.fleetgen.io/pool: cpu}\n",
         '  nodeLabels: {node.fleetgen.io/pool: cpu}\n  teamLimits: {inference: {cpu: "400", memory: 480Gi}}\n')
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "clusters/prod-west.yaml:55: cpuPool.teamLimits: teams never preempted hold their limit of cpuPool cpu " \
        "as quota (inference): 400 cpu together, more than the pool's 372" in result.err, result.err
    edit(fleet_root, "clusters/prod-west.yaml", '"400"', '"124"')
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n", "kueue:\n  teamPolicy: {neverPreempted: false}\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and "policy.neverPreempted: cluster prod-west sets kueue.teamPolicy.neverPreempted: " \
        "false" in result.err, result.err


def test_team_policies_kueue_refuses_or_ignores_are_refused(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/dev.yaml", "kueue:\n",
         "kueue:\n  teamPolicy: {reclaimWithinCohort: [Never], borrowWithinCohort: [LowerPriority]}\n")
    edit(fleet_root, "teams/vision.yaml", "quotas:\n", "policy:\n  reclaimWithinCohort: Never\n"
         "  borrowWithinCohort: {policy: LowerPriority}\nquotas:\n")
    err = _refused(fleet_root)
    assert "in cluster dev team vision's queue would have reclaimWithinCohort: Never with borrowWithinCohort: " \
        "LowerPriority, which Kueue refuses" in err, err
    assert "policy.borrowWithinCohort: fair sharing is on in cluster dev, and then Kueue ignores " \
        "borrowWithinCohort" in err
    edit(fleet_root, "teams/vision.yaml", "policy:\n", "policy:\n  neverPreempted: true\n"
         "  withinClusterQueue: LowerPriority\n")
    assert "neverPreempted means withinClusterQueue: Never" in run(fleet_root, "render").err


def test_a_profile_sets_grace_period_and_maximum_execution_time(fleet_root: Path) -> None:
    """The example's pretrain-4node checkpoints on SIGTERM and stops after 72h admitted; Kueue's label
    and the pod field reach the JobSet and the SkyPilot task (real Kueue: tests/test_e2e_fleet.py)."""
    body = yaml.safe_load((fleet_root / "rendered/prod-west/templates/ml-research/pretrain-4node.jobset.yaml")
                          .read_text())
    assert body["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "259200"
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    task = yaml.safe_load((fleet_root / "rendered/prod-west/templates/ml-research/pretrain-4node.sky.yaml")
                          .read_text())
    pod_config = task["config"]["kubernetes"]["pod_config"]
    assert pod_config["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "259200"
    assert pod_config["spec"]["terminationGracePeriodSeconds"] == 120
    edit(fleet_root, "teams/ml-research.yaml", "maxExecutionTime: 72h", "maxExecutionTime: 100000d")
    result = run(fleet_root, "render")
    assert result.code == 2 and "teams/ml-research.yaml:39: jobProfiles[1].maxExecutionTime" in result.err and \
        "not between 1s and 2147483647s" in result.err, result.err


def test_explain_states_weights_and_the_split_they_produce(fleet_root: Path) -> None:
    """Issue 31: each team's weight and, at each level of its cohort tree, how its siblings split what
    they borrow when all want more (the real Kueue's split: tests/test_e2e_fleet.py); weight 0 means
    borrowing last and being preempted first."""
    out = run(fleet_root, "explain", "team", "vision").out
    east = out[out.index("preemption in prod-east:"):out.index("preemption in prod-west:")]
    assert "- fair sharing: weight 2\n" in east
    assert "- when they all want more than their guarantees, the children of cohort research split what they " \
        "borrow by weight: research-vision 2 (67%), ml-research 1 (33%)" in east
    assert "the children of cohort prod-east split what they borrow by weight: foundation-models 4 (73%), " \
        "platform 0.5 (9%), research 1 (18%)" in east
    edit(fleet_root, "teams/platform-ci.yaml", "fairSharingWeight: 0.5", "fairSharingWeight: 0")
    edit(fleet_root, "clusters/prod-east.yaml", "  - {name: platform, fairSharingWeight: 0.5}",
         "  - {name: platform, fairSharingWeight: 0}")
    out = run(fleet_root, "explain", "team", "platform-ci").out
    west = out[out.index("preemption in prod-west:"):]
    assert "- fair sharing: weight 0: it gets borrowed GPUs only while teams with a weight leave them, and its " \
        "borrowed work is preempted first" in west
    assert "platform 0 (only what the others leave), research 1 (22%)" in west  # inference never borrows


def test_a_never_preempted_team_takes_no_part_in_the_weight_split(fleet_root: Path) -> None:
    """Issue 53: a queue that never borrows (`policy.neverPreempted`: borrowingLimit 0 in every flavor)
    never has a share above its quota, so Kueue's fair sharing never counts it (its DRS stays 0, kueue
    v0.19.2 pkg/cache/scheduler/fair_sharing.go:149-163) and its siblings split what they borrow among
    themselves. Before, explain listed prod-west's never-preempted inference at 1 (17%) of the split."""
    root = ("- when they all want more than their guarantees, the children of cohort prod-west split what they "
            "borrow by weight: platform 0.5 (10%), research 1 (20%), research-vision 2 (40%), recsys 1.5 (30%); "
            "inference never borrows (policy.neverPreempted) and takes none of it")
    out = run(fleet_root, "explain", "team", "recsys").out
    assert root in out, out
    out = run(fleet_root, "explain", "team", "inference").out
    assert "- fair sharing: weight 1, which never counts: its queue never borrows, so it takes no share of what " \
        "its cohort's teams borrow" in out, out
    assert root in out, out
    edit(fleet_root, "teams/inference.yaml", "policy: {neverPreempted: true}\n", "")
    assert "platform 0.5 (8%), research 1 (17%), research-vision 2 (33%), inference 1 (17%), recsys 1.5 (25%)\n" \
        in run(fleet_root, "explain", "team", "recsys").out


def test_the_guarantee_warning_stays_linear_and_short_with_many_teams(fleet_root: Path) -> None:
    """Lenders are grouped by class (the check is one pass per class, not a pass per pair of teams),
    and long lists of names are cut."""
    for i in range(40):
        (fleet_root / f"teams/extra-{i:02d}.yaml").write_text(
            f"name: extra-{i:02d}\nowners: ['@acme/extra']\nmembers: {{groups: [extra-{i:02d}]}}\n"
            "defaultPriority: standard\nquotas:\n  prod-west:\n    a100: {gpus: 1}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    line = next(w for w in result.err.splitlines() if "not guaranteed once lent" in w)
    assert "a100 of extra-00, extra-01, extra-02, extra-03, extra-04, extra-05, extra-06, extra-07 and 34 more " \
        "(at standard) by each other" in line, line  # inference, never preempted, borrows nothing
    assert len(line) < 1000, len(line)


def test_a_pool_the_teams_hold_whole_keeps_its_flavor_in_the_root_cohort(fleet_root: Path) -> None:
    """A team's quota moves only numbers in the root cohort, never its shape: vision taking the last 32
    of prod-east's H100 left the cohort without its h100 flavor and its GPU resource (found by the
    injection property test); now the flavor stays, at 0, and the rest of the object is unchanged."""
    path = fleet_root / "rendered/prod-east/kueue/cohort-prod-east.yaml"

    def shape(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
        return [(f["name"], [r["name"] for r in f["resources"]]) for g in doc["spec"]["resourceGroups"]
                for f in g["flavors"]]

    before = yaml.safe_load(path.read_text())
    edit(fleet_root, "teams/vision.yaml", "    h100: {gpus: 32, borrowingLimit: 64}",
         "    h100: {gpus: 64, borrowingLimit: 64}")
    assert run(fleet_root, "render").code == 0
    after = yaml.safe_load(path.read_text())
    assert shape(after) == shape(before)
    [h100] = [f for g in after["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "h100"]
    assert {r["name"]: r["nominalQuota"] for r in h100["resources"]} == {"cpu": "0", "memory": "0",
                                                                         "nvidia.com/gpu": "0"}
