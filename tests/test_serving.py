"""Issue 32, serving under Kueue: a `kind: deployment` profile on prod-east's fleet twin.

prod-east as rendered on the real API server with Kueue (its deployment and pod integrations, as the
chart of v0.19.2 enables them), kube-controller-manager's Deployment and ReplicaSet controllers,
kube-scheduler binding pods to Nodes made from clusters/prod-east.yaml, and kwok running them.

A member of ml-research submits the team's `chat-serve` with `fleetgen job`: the Deployment and its
Service are created, Kueue's webhook puts the team's queue on its pods and admits each against the
team's quota, the pods are bound to the H100 pool, and `fleetgen job status|wait|logs|list|cancel
--kind deployment` follow it until it and its Service are gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from generator.config.fleet import Fleet
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.processes import wait_for
from tests.upstream.twin import CRI_LOG, LOG, MANAGED, Twin, pods, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE = "prod-east", "ml-research", "chat-serve"
SELECTOR = f"app.kubernetes.io/instance={PROFILE}"


@pytest.fixture(scope="module")
def serving_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    workdir = tmp_path_factory.mktemp(f"serving-{CLUSTER}")
    logs = workdir / "container.log"
    logs.write_text(CRI_LOG)
    with running_twin(CLUSTER, upstream_etcd, workdir, logs=logs) as running:
        yield running


def _workloads(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace,
                                                                             "workloads")["items"]
    return found


def test_a_members_serving_profile_is_admitted_replica_by_replica_and_cancelled(
        serving_twin: tuple[Stack, Fleet, Twin]) -> None:
    from kubernetes import client

    stack, fleet, twin = serving_twin
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    who = stack.identity(f"serving@{TEAM}.test", (team.members.groups[0],))
    login = ("--kubeconfig", str(who.kubeconfig))
    apps, core = client.AppsV1Api(stack.client()), client.CoreV1Api(stack.client())
    dry = run(REPO, "job", "submit", TEAM, PROFILE, "--dry-run", *login)
    assert dry.code == 0 and "capacity: 2 GPUs of at most" in dry.out and "nothing was created" in dry.out, dry
    assert apps.list_namespaced_deployment(ns).items == [] and core.list_namespaced_service(ns).items == []
    submitted = run(REPO, "job", "submit", TEAM, PROFILE, *login)
    assert submitted.code == 0 and submitted.out.strip().endswith(
        f"fleetgen job status {PROFILE} --namespace {ns} --kind deployment"), submitted
    try:
        # Kueue's deployment webhook put the team's queue and priority on the pod template; each pod is
        # a Workload of its own, admitted to the team's ClusterQueue.
        template = apps.read_namespaced_deployment(PROFILE, ns).spec.template.metadata.labels
        assert (template["kueue.x-k8s.io/queue-name"], template["kueue.x-k8s.io/priority-class"]) == \
            (team.name, "standard"), template

        def admitted() -> list[dict[str, Any]]:
            found = [w for w in _workloads(stack, ns) if condition(w, "Admitted").get("status") == "True"]
            return found if len(found) == 2 else []
        assert wait_for(admitted, 90), _workloads(stack, ns)
        assert {w["status"]["admission"]["clusterQueue"] for w in admitted()} == {team.name}
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
            fleet.clusters[CLUSTER].config)}

        def placed() -> list[str]:
            found = [p for p in pods(stack, ns, SELECTOR) if p.spec.node_name and p.status.phase == "Running"]
            return sorted(pool_of[p.spec.node_name] for p in found) if len(found) == 2 else []
        assert wait_for(placed, 90) == ["h100", "h100"], twin.logs()
        service = core.read_namespaced_service(PROFILE, ns)
        assert [(p.name, p.port) for p in service.spec.ports] == [("serving", 8000)]
        assert service.metadata.owner_references[0].kind == "Deployment"  # deleted with it

        ready = run(REPO, "job", "wait", PROFILE, "-n", ns, "--kind", "deployment", "--for", "running",
                    "--timeout", "90", *login)
        assert (ready.code, ready.out.splitlines()[-1]) == (0, f"{PROFILE}: running: 2/2 replicas ready"), ready
        never = run(REPO, "job", "wait", PROFILE, "-n", ns, "--kind", "deployment", *login)
        assert never.code == 2 and "never finishes" in never.err, never
        hinted = run(REPO, "job", "status", PROFILE, "-n", ns, *login)
        assert hinted.code == 2 and "is a serving Deployment, not a JobSet" in hinted.err \
            and "--kind deployment" in hinted.err, hinted
        logs = run(REPO, "job", "logs", PROFILE, "-n", ns, "--kind", "deployment", "--rank", "1", *login)
        assert (logs.code, logs.out) == (0, LOG), logs
        beyond = run(REPO, "job", "logs", PROFILE, "-n", ns, "--kind", "deployment", "--rank", "2", *login)
        assert beyond.code == 2 and f"no replica 2 of {PROFILE}: it has 2 pods now" in beyond.err, beyond
        listed = run(REPO, "job", "list", "-n", ns, *login)
        assert listed.code == 0 and f"{ns}/{PROFILE}: running: 2/2 replicas ready (Deployment)" in listed.out, listed
    finally:
        cancelled = run(REPO, "job", "cancel", PROFILE, "-n", ns, "--kind", "deployment", *login)
        assert cancelled.code == 0, cancelled

    def gone() -> bool:
        return not (apps.list_namespaced_deployment(ns).items or pods(stack, ns, SELECTOR)
                    or core.list_namespaced_service(ns).items or _workloads(stack, ns))
    assert wait_for(gone, 90), (pods(stack, ns, SELECTOR), _workloads(stack, ns))
