"""Issue 32, TrainJobs under Kueue: prod-east's `operators.trainer` on its fleet twin.

prod-east as rendered on the real API server with Kueue and JobSet, the CRDs of Kubeflow Trainer's chart
(the trainer module at the pin), and the real Trainer controller manager (built from its module) started
as its chart deploys it: the chart's ServiceAccount, RBAC and webhook configurations (pointed at the
process, with a serving certificate of the test's CA, as its cert-controller would provide), its
configuration with the chart's values, and the chart's `torch-distributed` ClusterTrainingRuntime, which
the controller's own webhook admits. kube-scheduler binds pods to Nodes made from clusters/prod-east.yaml
and kwok runs them.

A member of ml-research submits the team's `finetune` profile with `fleetgen job`: Kueue admits it
against the team's quota, Trainer makes its JobSet with the profile's runtime patch and torchrun's
settings, the pods are bound to the H100 pool and run to completion, and `fleetgen job` follows it.
A member of another team may not create one in ml-research's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.operators import TRAINER, TRAINER_VERSION, start_trainer, trainer_crds
from tests.upstream.processes import wait_for
from tests.upstream.twin import LOG, MANAGED, Twin, operator_twin, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER, PROFILE = "prod-east", "ml-research", "llm-pretrain", "finetune"
VERSION, PLURAL = TRAINER_VERSION, "trainjobs"


@pytest.fixture(scope="module")
def trainer_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with operator_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"trainer-{CLUSTER}"), trainer_crds(),
                       start_trainer) as running:
        yield running


def test_a_members_trainjob_profile_is_admitted_placed_in_its_pool_and_runs_to_completion(
        trainer_twin: tuple[Stack, Fleet, Twin]) -> None:
    """`fleetgen job submit ml-research finetune` as a member: the TrainJob is admitted by Kueue against the
    team's quota; the real Trainer makes a JobSet named after it whose two pods carry the profile's pool
    pinning, /dev/shm and torchrun's PET_* settings (rank 0 at finetune-node-0-0.finetune); they are bound
    to H100 nodes and complete, and so does the TrainJob; `job status|wait|logs|list --kind trainjob` follow
    it (each rank's log is what kwok serves as the kubelet) and `job cancel` removes it with its JobSet."""
    from kubernetes.client.exceptions import ApiException

    stack, fleet, twin = trainer_twin
    team, other = fleet.teams[TEAM].config, fleet.teams[OTHER].config
    ns = team.namespace_names[0]
    objects = custom(stack)
    rendered = yaml.safe_load((REPO / "rendered" / CLUSTER / "templates" / TEAM / f"{PROFILE}.trainjob.yaml")
                              .read_text())
    outsider = custom(stack, stack.client(f"trainer@{OTHER}.test", (other.members.groups[0],)))
    with pytest.raises(ApiException) as refused:
        outsider.create_namespaced_custom_object(TRAINER, VERSION, ns, PLURAL,
                                                 {**rendered, "metadata": {**rendered["metadata"], "name": "intruder"}})
    assert refused.value.status == 403

    who = stack.identity(f"trainer@{TEAM}.test", (team.members.groups[0],))
    login = ("-n", ns, "--kubeconfig", str(who.kubeconfig))
    submitted = run(REPO, "job", "submit", TEAM, PROFILE, "--kubeconfig", str(who.kubeconfig))
    assert submitted.code == 0, submitted.err

    def trainjob() -> dict[str, Any]:
        found: dict[str, Any] = objects.get_namespaced_custom_object(TRAINER, VERSION, ns, PLURAL, PROFILE)
        return found

    def workload() -> dict[str, Any] | None:
        found = objects.list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads", label_selector=(
            f"kueue.x-k8s.io/job-uid={trainjob()['metadata']['uid']}"))["items"]
        return found[0] if found else None
    try:
        assert wait_for(lambda: condition(workload(), "Admitted").get("status") == "True", 60), \
            f"{workload()}\n{trainjob().get('status')}"
        admitted = workload()["status"]["admission"]  # type: ignore[index]
        assert admitted["clusterQueue"] == team.name
        # 2 nodes of 8 H100s, charged to the team in the H100 flavor.
        (podset,) = admitted["podSetAssignments"]
        assert (podset["count"], podset["flavors"]["nvidia.com/gpu"], podset["resourceUsage"]["nvidia.com/gpu"]) \
            == (2, "h100", "16"), podset
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
            fleet.clusters[CLUSTER].config)}
        selector = f"jobset.sigs.k8s.io/jobset-name={PROFILE}"

        def placed() -> list[Any]:
            found = [p for p in pods(stack, ns, selector) if p.spec.node_name]
            return found if len(found) == 2 else []
        bound = wait_for(placed, 90)
        assert bound, f"{[(p.metadata.name, p.spec.node_name) for p in pods(stack, ns, selector)]}\n{twin.logs()}"
        assert sorted(pool_of[p.spec.node_name] for p in bound) == ["h100", "h100"]
        for pod in bound:
            (container,) = pod.spec.containers
            env = {e.name: e.value for e in container.env if e.value is not None}
            assert container.name == "node" and container.command == ["torchrun"], container
            assert container.args[:2] == ["--no-python", "python"], container.args
            assert env["PET_MASTER_ADDR"] == f"{PROFILE}-node-0-0.{PROFILE}" and env["PET_NNODES"] == "2" \
                and env["PET_NPROC_PER_NODE"] == "8" and env["PYTHONUNBUFFERED"] == "1", env
            assert container.resources.requests["nvidia.com/gpu"] == "8"
            assert {m.mount_path for m in container.volume_mounts} >= {"/dev/shm"}
            assert pod.spec.node_selector["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", pod.spec.node_selector
            assert pod.spec.hostname.startswith(f"{PROFILE}-node-0-") and pod.spec.subdomain == PROFILE

        finished = run(REPO, "job", "wait", PROFILE, "--kind", "trainjob", "--for", "finished", "--timeout", "120",
                       *login)
        said = finished.out.strip().splitlines()  # each change it saw (kwok may end pods between looks), the end
        assert finished.code == 0 and said[-1] == f"{PROFILE}: succeeded: jobset completed successfully", \
            finished.out + finished.err + str(trainjob().get("status"))
        status = run(REPO, "job", "status", PROFILE, "--kind", "trainjob", *login)
        assert status.code == 0 and status.out.startswith(f"{PROFILE}: succeeded"), status.out + status.err
        # Its JobSet has the same name: asked for without --kind, fleetgen points at the TrainJob instead of
        # following, or deleting, what Trainer would make again.
        for command in ("status", "cancel"):
            hinted = run(REPO, "job", command, PROFILE, *login)
            assert hinted.code == 2 and f"{ns}/{PROFILE} is the JobSet of TrainJob {PROFILE}, which makes it: follow " \
                "or cancel that one (--kind trainjob)" in hinted.err, hinted.err
        assert objects.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", PROFILE)
        for rank in ("0", "1"):  # container `node` of each node's pod, through the API server
            logged = run(REPO, "job", "logs", PROFILE, "--kind", "trainjob", "--rank", rank, *login)
            assert (logged.code, logged.out) == (0, LOG), logged.out + logged.err
        beyond = run(REPO, "job", "logs", PROFILE, "--kind", "trainjob", "--rank", "2", *login)
        assert beyond.code == 2 and "rank 2 is out of range: the job has 2 nodes" in beyond.err, beyond.err
        listed = run(REPO, "job", "list", *login)
        assert listed.code == 0 and listed.out.splitlines() == [
            f"{ns}/{PROFILE}: succeeded: jobset completed successfully (TrainJob)"], \
            listed.out + listed.err  # its JobSet is Trainer's, not listed again
    finally:
        cancelled = run(REPO, "job", "cancel", PROFILE, "--kind", "trainjob", *login)
        assert cancelled.code == 0, cancelled.err
    assert wait_for(lambda: not objects.list_namespaced_custom_object(TRAINER, VERSION, ns, PLURAL)["items"]
                    and not objects.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns,
                                                                  "jobsets")["items"], 90)
