"""Issue 32, multi-node serving under Kueue: a `kind: leaderworkerset` profile on prod-east's fleet twin.

prod-east as rendered on the real API server with Kueue (its LeaderWorkerSet integration, and the pod
integration it turns on), the CRDs of LeaderWorkerSet's chart and its real controller (built from the lws
module at the pin) started as the chart deploys it: its configuration, ServiceAccount, RBAC and webhooks
(only where it listens and who provides its serving certificate change). kube-controller-manager's
StatefulSet controller makes the groups' pods, kube-scheduler binds them to Nodes made from
clusters/prod-east.yaml and kwok runs them.

A member of ml-research submits the team's `big-serve` (2 replicas of a leader and a worker, 8 H100s
each) with `fleetgen job`: Kueue admits each group as one Workload against the team's quota,
LeaderWorkerSet tells every pod its leader's address, the pods are bound to the H100 pool, the leaders
serve the Service, and `fleetgen job status|wait|logs|list|cancel --kind leaderworkerset` follow it until
it is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from generator.config.fleet import Fleet
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.operators import LWS, lws_crds, start_lws
from tests.upstream.processes import wait_for
from tests.upstream.twin import LOG, MANAGED, Twin, operator_twin, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE = "prod-east", "ml-research", "big-serve"
VERSION, PLURAL = "v1", "leaderworkersets"
SELECTOR = f"leaderworkerset.sigs.k8s.io/name={PROFILE}"


@pytest.fixture(scope="module")
def lws_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with operator_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"lws-{CLUSTER}"), lws_crds(),
                       start_lws) as running:
        yield running


def resolve(stack: Stack, name: str) -> str | None:
    """The address cluster DNS gives `<hostname>.<service>.<namespace>`, read from the objects it serves: a
    headless Service's EndpointSlices, whose endpoints carry the hostname of each pod whose subdomain is the
    Service (k8s.io/endpointslice v0.36.3 utils.go:67-68, util/controller_utils.go:201-202); a Service with a
    cluster IP has no per-pod names (Kubernetes DNS specification, 2.4.1: records per endpoint for headless
    Services only). None where it would not resolve."""
    from kubernetes import client

    hostname, service, namespace = name.split(".")[:3]
    found = client.CoreV1Api(stack.client()).read_namespaced_service(service, namespace)
    if found.spec.cluster_ip != "None":
        return None
    slices = client.DiscoveryV1Api(stack.client()).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}").items
    return next((e.addresses[0] for s in slices for e in s.endpoints or [] if e.hostname == hostname), None)


def _workloads(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace,
                                                                             "workloads")["items"]
    return found


def test_a_members_multi_node_server_is_admitted_group_by_group_and_cancelled(
        lws_twin: tuple[Stack, Fleet, Twin]) -> None:
    from kubernetes import client

    stack, fleet, twin = lws_twin
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    who = stack.identity(f"lws@{TEAM}.test", (team.members.groups[0],))
    login = ("--kubeconfig", str(who.kubeconfig))
    core = client.CoreV1Api(stack.client())
    objects = custom(stack)
    dry = run(REPO, "job", "submit", TEAM, PROFILE, "--dry-run", *login)
    assert dry.code == 0 and "capacity: 32 GPUs of at most" in dry.out and "nothing was created" in dry.out, dry
    assert objects.list_namespaced_custom_object(LWS, VERSION, ns, PLURAL)["items"] == []
    submitted = run(REPO, "job", "submit", TEAM, PROFILE, *login)
    assert submitted.code == 0 and submitted.out.strip().endswith(
        f"fleetgen job status {PROFILE} --namespace {ns} --kind leaderworkerset"), submitted
    try:
        # Kueue's webhook put the team's queue and priority on the pod template; each group of a leader and
        # its worker is one Workload, admitted to the team's ClusterQueue.
        created = objects.get_namespaced_custom_object(LWS, VERSION, ns, PLURAL, PROFILE)
        labels = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
        assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/priority-class"]) == \
            (team.name, "standard"), labels

        def admitted() -> list[dict[str, Any]]:
            found = [w for w in _workloads(stack, ns) if condition(w, "Admitted").get("status") == "True"]
            return found if len(found) == 2 else []
        assert wait_for(admitted, 90), (_workloads(stack, ns), twin.logs())
        assert {w["status"]["admission"]["clusterQueue"] for w in admitted()} == {team.name}
        assert sorted(sum(p["count"] for p in w["spec"]["podSets"]) for w in admitted()) == [2, 2]
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
            fleet.clusters[CLUSTER].config)}

        def placed() -> list[str]:
            found = [p for p in pods(stack, ns, SELECTOR) if p.spec.node_name and p.status.phase == "Running"]
            return sorted(pool_of[p.spec.node_name] for p in found) if len(found) == 4 else []
        assert wait_for(placed, 120) == ["h100"] * 4, (pods(stack, ns, SELECTOR), twin.logs())
        assert submitted.err == "", submitted  # nothing collided with what LeaderWorkerSet made
        # LeaderWorkerSet told each pod where its group's leader is.
        env = {p.metadata.name: {e.name: e.value for e in p.spec.containers[0].env or []}
               for p in pods(stack, ns, SELECTOR)}
        assert env[f"{PROFILE}-1-1"]["LWS_LEADER_ADDRESS"] == f"{PROFILE}-1.{PROFILE}.{ns}", env
        assert env[f"{PROFILE}-1-1"]["LWS_GROUP_SIZE"] == "2" and env[f"{PROFILE}-0"]["LWS_WORKER_INDEX"] == "0"
        # The leader's address resolves: LeaderWorkerSet's own headless Service, named after the set and made
        # by its controller (fleetgen's would have taken the name), publishes each pod under its hostname.
        leader_ip = core.read_namespaced_pod(f"{PROFILE}-1", ns).status.pod_ip
        assert leader_ip and wait_for(lambda: resolve(stack, env[f"{PROFILE}-1-1"]["LWS_LEADER_ADDRESS"]) == leader_ip,
                                      30), (env, core.read_namespaced_service(PROFILE, ns))
        service = core.read_namespaced_service(f"{PROFILE}-leaders", ns)
        assert [(p.name, p.port) for p in service.spec.ports] == [("serving", 8000)]
        assert service.metadata.owner_references[0].kind == "LeaderWorkerSet"  # deleted with it
        leaders = core.list_namespaced_pod(ns, label_selector=",".join(f"{k}={v}" for k, v in
                                                                      service.spec.selector.items())).items
        assert sorted(p.metadata.name for p in leaders) == [f"{PROFILE}-0", f"{PROFILE}-1"]

        ready = run(REPO, "job", "wait", PROFILE, "-n", ns, "--kind", "leaderworkerset", "--for", "running",
                    "--timeout", "120", *login)
        assert (ready.code, ready.out.splitlines()[-1]) == (0, f"{PROFILE}: running: 2/2 replicas ready"), ready
        never = run(REPO, "job", "wait", PROFILE, "-n", ns, "--kind", "leaderworkerset", *login)
        assert never.code == 2 and "never finishes" in never.err, never
        logs = run(REPO, "job", "logs", PROFILE, "-n", ns, "--kind", "leaderworkerset", "--rank", "3", *login)
        assert (logs.code, logs.out) == (0, LOG), logs
        listed = run(REPO, "job", "list", "-n", ns, *login)
        assert listed.code == 0 and f"{ns}/{PROFILE}: running: 2/2 replicas ready (LeaderWorkerSet)" in listed.out, \
            listed
    finally:
        cancelled = run(REPO, "job", "cancel", PROFILE, "-n", ns, "--kind", "leaderworkerset", *login)
        assert cancelled.code == 0, cancelled

    def gone() -> bool:
        return not (objects.list_namespaced_custom_object(LWS, VERSION, ns, PLURAL)["items"]
                    or pods(stack, ns, SELECTOR) or core.list_namespaced_service(ns).items or _workloads(stack, ns))
    assert wait_for(gone, 120), (pods(stack, ns, SELECTOR), _workloads(stack, ns))


def test_another_team_may_not_create_one_in_the_teams_namespace(lws_twin: tuple[Stack, Fleet, Twin]) -> None:
    from kubernetes.client.exceptions import ApiException

    stack, fleet, _ = lws_twin
    team, other = fleet.teams[TEAM].config, fleet.teams["llm-pretrain"].config
    outsider = custom(stack, stack.client(f"lws@{other.name}.test", (other.members.groups[0],)))
    body = {"apiVersion": f"{LWS}/{VERSION}", "kind": "LeaderWorkerSet", "metadata": {"name": "intruder"},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": [
                {"name": "x", "image": "registry.example/x:1"}]}}}}}
    with pytest.raises(ApiException) as refused:
        outsider.create_namespaced_custom_object(LWS, VERSION, team.namespace_names[0], PLURAL, body)
    assert refused.value.status == 403
