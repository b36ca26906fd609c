"""Issue 53, one priority ladder per cluster: on prod-west's twin (the real API server, Kueue v0.19.2,
kube-scheduler and kwok), a Kubernetes PriorityClass no longer lifts a member's job over every team,
in the pool shared by usage too; members read the cluster's WorkloadPriorityClasses, so the SDK's
pre-submit check runs; and `job status` on a job held behind a StrictFIFO head names that head.
And on a plain API server, every kind Kueue takes a priority from is held to the ladder.
"""

from __future__ import annotations

import contextlib
import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from generator.connection import Connection
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, workload_of
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin

pytestmark = pytest.mark.upstream

CLUSTER = "prod-west"
RUNS = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}
"""kwok keeps the pods running (tests/test_twin_scheduling.py `submit` says why both are needed)."""
LADDER_REFUSED = "may name only the cluster's priority classes as priorityClassName"
OFF_LADDER = "is off the priority ladder of this cluster"


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    from tests.upstream.twin import running_twin

    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"ladder-{CLUSTER}")) as running:
        yield running


def gpu_job(name: str, queue: str, pods: int, gpus: int, labels: dict[str, str] | None = None,
            **pod: Any) -> dict[str, Any]:
    """A batch Job of `pods` pods of `gpus` GPUs each on LocalQueue `queue`, its pods kept running."""
    container = {"name": "c", "image": "registry.example/ladder:1",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": dict(RUNS)},
                "spec": {"restartPolicy": "Never", "containers": [container], **pod}}}}


def member_api(stack: Stack, fleet: Fleet, team: str) -> Any:
    tcfg = fleet.teams[team].config
    if tcfg.members.groups:
        return stack.client(f"ladder@{team}.test", (tcfg.members.groups[0],))
    return stack.client(tcfg.members.users[0])


def refusal(call: Any) -> str:
    """The API server's message when `call` is refused; fails the test when it is not."""
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        call()
    return str(refused.value.body)


def test_a_kubernetes_priority_class_cannot_lift_a_job_off_the_ladder(twin: tuple[Stack, Fleet, Twin]) -> None:
    """Intent: one priority ladder per cluster, the cluster file's `priorities`, for every team. Before,
    recsys (no `allowedPriorities`) got the value of any Kubernetes PriorityClass its pods named (Kueue's
    fallback without the class label): `high` (1,000,000) preempted everyone at once in the l4 pool
    shared by usage. Now, in every team namespace: a Job or bare pod naming `high` is refused when
    submitted; a PriorityClass named like a rung of the ladder but of another value passes the
    template's name and is refused where Kueue copies the value, on the Workload, so it is never
    admitted; vision's job in the shared pool keeps running (Kueue neither evicts nor preempts it);
    and `explain` says both the ladder and, for the shared pool, the highest class each team reaches."""
    from kubernetes import client

    stack, fleet, _ = twin
    admin = client.CoreV1Api(stack.client())
    batch_admin = client.BatchV1Api(stack.client())
    for name, value in (("ladder-high", 1_000_000), ("production", 5000)):
        stack.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                      "value": value})
    vision, recsys = fleet.teams["vision"].config, fleet.teams["recsys"].config
    tag = uuid.uuid4().hex[:5]
    fill = gpu_job(f"fill-{tag}", "vision-l4", 2, 8, {"kueue.x-k8s.io/priority-class": "standard"})
    client.BatchV1Api(member_api(stack, fleet, "vision")).create_namespaced_job(vision.namespace_names[0], fill)
    vns, rns = vision.namespace_names[0], recsys.namespace_names[0]
    assert wait_for(lambda: condition(workload_of(stack, vns, fill["metadata"]["name"], "Job"), "Admitted")
                    .get("status") == "True", 60), "vision's job was not admitted to the shared pool"

    batch, core = client.BatchV1Api(member_api(stack, fleet, "recsys")), client.CoreV1Api(member_api(stack, fleet,
                                                                                                     "recsys"))
    high = gpu_job(f"high-{tag}", "recsys-l4", 1, 8, priorityClassName="ladder-high")
    said = refusal(lambda: batch.create_namespaced_job(rns, high))
    assert LADDER_REFUSED in said and "preemptible, production, standard" in said, said
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"high-pod-{tag}", "labels": {"kueue.x-k8s.io/queue-name": "recsys-l4"}},
           "spec": {**high["spec"]["template"]["spec"], "restartPolicy": "Never"}}
    said = refusal(lambda: core.create_namespaced_pod(rns, pod))
    assert f"pod priority 1000000 (class ladder-high) {OFF_LADDER}: production (1000), standard (100), " \
           "preemptible (10), or at most 10" in said, said

    # A PriorityClass named like a rung but of another value: Kueue copies 5000 onto the Workload.
    renamed = gpu_job(f"renamed-{tag}", "recsys-l4", 1, 8, priorityClassName="production")
    batch.create_namespaced_job(rns, renamed)

    def workload_refused() -> list[str]:
        return [str(e.get("responseStatus", {}).get("message")) for e in stack.audit()
                if e.get("verb") == "create" and e.get("objectRef", {}).get("resource") == "workloads"
                and e.get("objectRef", {}).get("namespace") == rns
                and e.get("responseStatus", {}).get("code", 0) >= 400]

    assert wait_for(workload_refused, 60), "Kueue's Workload for the renamed class was not refused"
    assert f"Workload priority 5000 (class production) {OFF_LADDER}" in workload_refused()[0], workload_refused()
    assert workload_of(stack, rns, renamed["metadata"]["name"], "Job") is None
    held = workload_of(stack, vns, fill["metadata"]["name"], "Job")
    assert condition(held, "Admitted").get("status") == "True", held
    assert not condition(held, "Evicted") and not condition(held, "Preempted"), held

    # Outside team namespaces the ladder does not apply: the platform's own pods keep their classes.
    assert batch_admin.create_namespaced_job("default", high, dry_run="All").metadata.name == high["metadata"]["name"]
    for name in (fill["metadata"]["name"],):
        batch_admin.delete_namespaced_job(name, vns, propagation_policy="Background")
    batch.delete_namespaced_job(renamed["metadata"]["name"], rns, propagation_policy="Background")
    admin.list_namespace()  # the admin client still answers: nothing above was left half done

    explained = run(REPO, "explain", "team", "recsys").out
    assert ("in prod-west: pool l4 is shared by usage" in explained
            and "each team's jobs reach at most its highest allowed class there: platform-ci preemptible (10), "
                "recsys production (1000), vision production (1000)" in explained), explained
    assert ("- Kubernetes PriorityClasses cannot lift its workloads off the cluster's ladder: in its namespaces pod "
            "templates may name only preemptible, production, standard as priorityClassName, and a pod or Kueue "
            "Workload runs only at one of the ladder's values or at most 10 (the API server refuses the rest: "
            "fleetgen-team-priorities)") in explained, explained


def test_members_read_the_clusters_workload_priority_classes(twin: tuple[Stack, Fleet, Twin]) -> None:
    """Intent: a member's pre-submit check tells a class that exists from one that does not. Before,
    members got 403 reading WorkloadPriorityClasses and the SDK skipped the check; now a read-only
    ClusterRole bound to every authenticated user lets it run: an existing class passes, a
    misspelt one fails before anything is created. Writing one is still refused."""
    from kubernetes import client

    from generator.jobs import presubmit

    stack, fleet, _ = twin
    api = Connection(member_api(stack, fleet, "recsys"))
    assert presubmit.priority(api, "standard").passed is True, presubmit.priority(api, "standard")
    missing = presubmit.priority(api, "standrd")
    assert missing.passed is False and "does not exist on this cluster" in missing.detail, missing
    said = refusal(lambda: client.CustomObjectsApi(api.client).create_cluster_custom_object(
        KUEUE, "v1beta2", "workloadpriorityclasses",
        {"apiVersion": f"{KUEUE}/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "mine"},
         "value": 10 ** 6}))
    assert "forbidden" in said.lower(), said


def test_status_names_the_strict_fifo_head_a_job_waits_behind(twin: tuple[Stack, Fleet, Twin]) -> None:
    """Intent: under StrictFIFO a member sees which job holds theirs. vision's queue made StrictFIFO (as
    fleetgen renders `policy.queueingStrategy: StrictFIFO`): its first job holds 8 GPUs, the next (16)
    does not fit and stays at the head, a third (4) that would fit waits behind it, unevaluated by
    Kueue. Before, `job status` said "not evaluated yet"; now it names the head and why it waits."""
    from kubernetes import client

    from generator.jobs import Job

    stack, fleet, _ = twin
    if stack.visibility:
        pytest.skip(stack.visibility)
    vision = fleet.teams["vision"].config
    ns = vision.namespace_names[0]
    custom(stack).patch_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "vision",
                                              {"spec": {"queueingStrategy": "StrictFIFO"}})
    api = Connection(member_api(stack, fleet, "vision"))
    tag = uuid.uuid4().hex[:5]
    first, head, behind = (gpu_job(f"{what}-{tag}", "vision", pods, 4) for what, pods in
                           (("first", 2), ("head", 4), ("behind", 1)))
    jobs = []

    def submit(body: dict[str, Any]) -> None:
        jobs.append(Job({**body, "metadata": {**body["metadata"], "namespace": ns}}, api).submit(check=False))

    try:
        submit(first)
        assert wait_for(lambda: condition(workload_of(stack, ns, first["metadata"]["name"], "Job"),
                                          "Admitted").get("status") == "True", 60)
        submit(head)
        head_name = str(wait_for(lambda: (workload_of(stack, ns, head["metadata"]["name"], "Job") or {})
                                 .get("metadata", {}).get("name"), 30))
        assert wait_for(lambda: condition(workload_of(stack, ns, head["metadata"]["name"], "Job"),
                                          "QuotaReserved").get("status") == "False", 60), "the head was not evaluated"
        # Kueue orders equal priorities by their Workloads' creation time, to the second, then by UID:
        # the next Workload is made in a later second than the head's.
        created = (workload_of(stack, ns, head["metadata"]["name"], "Job") or {})["metadata"]["creationTimestamp"]
        stamp = datetime.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        assert wait_for(lambda: datetime.datetime.now(datetime.UTC) >= stamp + datetime.timedelta(
            seconds=1.2), 10)
        submit(behind)
        status = wait_for(lambda: (s := jobs[2].status()).position.startswith("position 2") and s, 60)
        assert status, jobs[2].status()
        behind_workload = workload_of(stack, ns, behind["metadata"]["name"], "Job")
        assert condition(behind_workload, "QuotaReserved").get("reason", "PendingEvaluation") == \
            "PendingEvaluation", behind_workload
        assert status.phase == "pending" and status.reason.startswith(f"waiting behind {head_name} ("), status
        assert "couldn't assign flavors" in status.reason, status  # the head's own reason, as Kueue gives it
        assert "the head of its ClusterQueue (1 ahead of it)" in status.reason, status
    finally:
        for body in (first, head, behind):
            with contextlib.suppress(client.exceptions.ApiException):
                client.BatchV1Api(stack.client()).delete_namespaced_job(body["metadata"]["name"], ns,
                                                                        propagation_policy="Background")


def test_every_kind_kueue_reads_a_priority_from_is_held_to_the_ladder(
        upstream_etcd: Any, tmp_path_factory: Any) -> None:
    """Intent: no kind is a way around the ladder. prod-west's ladder policy on a real API server with
    every Kueue integration's CRD: each kind, created in a team namespace with any one of its pod
    templates naming a PriorityClass outside the ladder, is refused; naming a rung of the ladder, or
    none, it is accepted; outside team namespaces it is left alone."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import ServiceUnavailableError

    from generator.compile.admission import INTEGRATION_KINDS
    from generator.compile.namespace_policies import TEAM_NAMESPACE_LABEL, TEMPLATE_KINDS
    from tests.kueue_kinds import KIND_CRDS, classed_object
    from tests.upstream import tools
    from tests.upstream.fleet import apply

    crds = {framework: yaml.safe_load(tools.module_file(module, rel).read_text())
            for framework, (module, rel) in KIND_CRDS.items()}
    stack = Stack.start(tmp_path_factory.mktemp("ladder-kinds"), upstream_etcd, platform=False)
    try:
        for crd in crds.values():
            stack.create(crd)
        stack._wait_established([c["metadata"]["name"] for c in crds.values()])
        teams = REPO / "rendered" / CLUSTER / "teams"
        for name in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
            apply(stack, yaml.safe_load((teams / f"{name}-fleetgen-team-priorities.yaml").read_text()))
        apply(stack, {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "team-a", "labels": {TEAM_NAMESPACE_LABEL: "true"}}})
        for name, value in (("high", 10 ** 6), ("standard", 100)):
            apply(stack, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": name}, "value": value})
        client = stack.dynamic()

        def create(framework: str, ns: str, classed: int | None, name: str = "high") -> str:
            """'ok', or the refusal's message."""
            body = classed_object(framework, crds.get(framework), classed)
            text = yaml.safe_dump(body).replace("priorityClassName: high", f"priorityClassName: {name}")
            body = yaml.safe_load(text)
            api = client.resources.get(api_version=body["apiVersion"], kind=body["kind"])

            def attempt() -> tuple[str] | None:
                try:
                    api.create(body=body, namespace=ns, dry_run="All")
                except ServiceUnavailableError:  # the policy's type for a new CRD comes a moment later
                    return None
                except ApiException as exc:
                    return (str(exc.body),)
                return ("ok",)
            answer = wait_for(attempt, 30)
            assert answer is not None, f"{framework}: still unavailable"
            return answer[0]

        assert wait_for(lambda: create("batch/job", "team-a", 0) != "ok", 30), "the policy never acted"
        wrong = {}
        for framework, (group, plural, paths) in INTEGRATION_KINDS.items():
            if not paths:
                continue  # a TrainJob's templates are its runtime's: its Workload is judged instead
            assert (group, plural) in TEMPLATE_KINDS or plural == "pods", framework
            for i in range(len(paths)):
                high, rung = create(framework, "team-a", i), create(framework, "team-a", i, "standard")
                outside = create(framework, "default", i)
                expected = LADDER_REFUSED if plural != "pods" else f"pod priority 1000000 (class high) {OFF_LADDER}"
                if expected not in high or rung != "ok" or outside != "ok":
                    wrong[f"{framework}[{i}]"] = (high[:200], rung[:200], outside[:200])
            if create(framework, "team-a", None) != "ok":
                wrong[framework] = "refused without a class"
        assert not wrong, wrong
    finally:
        stack.stop()
