"""The job lifecycle, CLI and Python API, against the real API server with Kueue and JobSet.

prod-west's queues and team objects are applied to the session's stack, so submissions go through
the real RBAC, the JobSet and Kueue webhooks, and Kueue admits them against prod-west's quotas.
Jobs progress as far as controllers take them without a kubelet: to do more (running, finished),
a test writes the child Jobs' status, as the Job controller would, and the real JobSet controller
derives the JobSet's. Logs come through the API server from a node's log endpoint (FakeKubelet).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.jobs import ClusterError, Connection, Job, JobList, connect
from tests.conftest import REPO, run
from tests.upstream.cluster import Identity, Stack
from tests.upstream.fleet import apply_all, create_nodes, fake_nodes, kustomize_build
from tests.upstream.kubelet import FakeKubelet
from tests.upstream.processes import free_port, wait_for


@dataclass
class Cluster:
    stack: Stack
    kubelet: FakeKubelet
    alice: Identity
    """A member of ml-research (a user of its group)."""

    def kc(self, who: Identity | None = None) -> list[str]:
        return ["--kubeconfig", str((who or self.alice).kubeconfig)]

    def api(self, who: Identity | None = None) -> Connection:
        return connect(kubeconfig=str((who or self.alice).kubeconfig))


@pytest.fixture(scope="module")
def cluster(kube_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from generator.checks import load_fleet

    objects = [*kustomize_build(REPO / "rendered/prod-west/kueue"), *kustomize_build(REPO / "rendered/prod-west/teams"),
               *kustomize_build(REPO / "rendered/prod-east/teams/llm-pretrain/llm-pretrain")]
    assert apply_all(kube_stack, objects) == []
    create_nodes(kube_stack, fake_nodes(load_fleet(REPO).clusters["prod-west"].config))
    kubelet = FakeKubelet(kube_stack.ca, tmp_path_factory.mktemp("kubelet"))
    node = kubelet.node("log-node-0")
    from kubernetes import client

    core = client.CoreV1Api(kube_stack.client())
    core.create_node({k: v for k, v in node.items() if k != "status"})
    core.patch_node_status("log-node-0", {"status": node["status"]})
    yield Cluster(kube_stack, kubelet, kube_stack.identity("alice@acme.com", ("ml-research",)))
    kubelet.stop()


def objects(c: Cluster) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(c.stack.client())


def resumed_child_jobs(c: Cluster, ns: str, name: str) -> list[Any]:
    """The JobSet's child Jobs once Kueue has unsuspended the JobSet and the JobSet controller its Jobs.

    Only then does the Job controller start pods and count them. A status written earlier races the
    JobSet controller's resume, which clears a suspended Job's startTime (jobset v0.12.0
    pkg/controllers/jobset_controller.go:640-644) and then updates its spec: in a loaded CI run the
    JobSet stayed "admitted" for 30 s after such a write.
    """
    from kubernetes import client

    batch = client.BatchV1Api(c.stack.client())
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    seen: dict[str, Any] = {}

    def resumed() -> bool:
        jobset = objects(c).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
        seen["jobs"] = batch.list_namespaced_job(ns, label_selector=selector).items
        seen["state"] = (f"JobSet suspend={jobset['spec'].get('suspend')}, Jobs "
                         f"{[(j.metadata.name, j.spec.suspend) for j in seen['jobs']]}")
        return not jobset["spec"].get("suspend") and bool(seen["jobs"]) and not any(
            j.spec.suspend for j in seen["jobs"])

    assert wait_for(resumed, 60), f"JobSet {ns}/{name} was not resumed: {seen.get('state')}"
    return list(seen["jobs"])


def jobset_state(c: Cluster, ns: str, name: str) -> str:
    """What the JobSet and its Jobs say, for a failure message."""
    from kubernetes import client

    jobset = objects(c).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
    jobs = client.BatchV1Api(c.stack.client()).list_namespaced_job(
        ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
    return (f"\nJobSet suspend={jobset['spec'].get('suspend')} status={jobset.get('status')}\n"
            + "\n".join(f"Job {j.metadata.name} suspend={j.spec.suspend} active={j.status.active} "
                        f"ready={j.status.ready} startTime={j.status.start_time}" for j in jobs))


def finish_child_jobs(c: Cluster, ns: str, name: str, active: bool = False) -> None:
    """Write each child Job's status as the Job controller would: all pods running, or all succeeded."""
    from kubernetes import client

    batch = client.BatchV1Api(c.stack.client())
    jobs = resumed_child_jobs(c, ns, name)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for job in jobs:
        pods = int(job.spec.completions or 1)
        if active:
            status: dict[str, Any] = {"startTime": now, "active": pods, "ready": pods}
        else:
            done = "0" if pods == 1 else f"0-{pods - 1}"
            status = {"completionTime": now, "active": 0, "ready": 0, "succeeded": pods, "completedIndexes": done,
                      "conditions": [{"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                                      "reason": "CompletionsReached", "message": "Reached expected number of "
                                      "succeeded pods"} for t in ("SuccessCriteriaMet", "Complete")]}
        batch.patch_namespaced_job_status(job.metadata.name, ns, {"status": status},
                                          _content_type="application/merge-patch+json")


def add_pod(c: Cluster, ns: str, jobset: str, rjob: str, index: int, log: str) -> None:
    """A pod of the JobSet on the log node, as the Job controller, the gates' owners and the
    scheduler would leave it: created (webhooks may add scheduling gates), ungated, then bound."""
    from kubernetes import client

    core = client.CoreV1Api(c.stack.client())
    name = f"{jobset}-{rjob}-0-{index}-abcde"
    # Owned by its child Job, as the Job controller makes it: Kueue's pod webhook then leaves it to
    # the Job's admission (kueue v0.19.2 pkg/controller/jobs/pod/pod_webhook.go:145-149, an ancestor
    # managed by Kueue). A bare pod would be Kueue's own to gate, and to delete when not admitted
    # (it did, in a slow run, between the create and the binding).
    batch = client.BatchV1Api(c.stack.client())
    children = f"jobset.sigs.k8s.io/jobset-name={jobset},jobset.sigs.k8s.io/replicatedjob-name={rjob}"
    assert wait_for(lambda: bool(batch.list_namespaced_job(ns, label_selector=children).items), 30), \
        f"JobSet {ns}/{jobset} made no {rjob} Job"
    owner = batch.read_namespaced_job(f"{jobset}-{rjob}-0", ns)
    pod = core.create_namespaced_pod(ns, {
        "metadata": {"name": name, "labels": {
            "jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
            "batch.kubernetes.io/job-name": owner.metadata.name,
            "batch.kubernetes.io/job-completion-index": str(index)},
            # No blockOwnerDeletion: no kubelet is here to confirm a pod's deletion, and a cancelled
            # JobSet's foreground deletion would wait for it for ever.
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner.metadata.name,
                                 "uid": owner.metadata.uid, "controller": True}]},
        "spec": {"containers": [{"name": "trainer", "image": "ghcr.io/acme/x:1"}]}})
    if pod.spec.scheduling_gates:
        core.patch_namespaced_pod(name, ns, [{"op": "remove", "path": "/spec/schedulingGates"}])
    core.create_namespaced_binding(ns, {"metadata": {"name": name},
                                        "target": {"apiVersion": "v1", "kind": "Node", "name": "log-node-0"}},
                                   _preload_content=False)
    core.patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running"}})  # as its kubelet reports
    c.kubelet.logs[(ns, name, "trainer")] = log


def test_cli_lifecycle(cluster: Cluster) -> None:
    c = cluster
    try:
        lifecycle(c)
    finally:  # a failure here must not leave 32 GPUs held for the module's later tests
        run(REPO, "job", "cancel", "pt-run1", "--team", "ml-research", *c.kc())
        assert wait_for(lambda: not jobsets_named(c, "ml-research", "pt-run1"), 60)


def lifecycle(c: Cluster) -> None:
    """Submit, refuse a second submit, admitted, running, logs, list, succeeded, cancel, gone."""
    result = run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "pt-run1", *c.kc())
    assert result.code == 0, result.err
    assert "submitted ml-research/pt-run1" in result.out
    stored = objects(c).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ml-research", "jobsets", "pt-run1")
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4

    # Submitting the same name again: the API server's 409, said clearly.
    again = run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "pt-run1", *c.kc())
    assert again.code == 2 and "409" in again.err and "already exists" in again.err

    # Kueue admits it (32 A100: 16 guaranteed + 16 borrowed from idle prod-west teams).
    status = ["job", "status", "pt-run1", "--team", "ml-research", *c.kc()]
    assert wait_for(lambda: "admitted on workers -> a100" in run(REPO, *status).out, 60), run(REPO, *status).out

    finish_child_jobs(c, "ml-research", "pt-run1", active=True)
    # Its Jobs count their pods active, but no pod runs yet: admitted, not running, and why.
    assert wait_for(lambda: "pt-run1: admitted on workers -> a100: no pod yet" in run(REPO, *status).out, 30), \
        run(REPO, *status).out + jobset_state(c, "ml-research", "pt-run1")
    for rank in range(4):
        add_pod(c, "ml-research", "pt-run1", "workers", rank, f"rank {rank} step 1\nrank {rank} step 2\n")
    assert wait_for(lambda: run(REPO, *status).out == "pt-run1: running on workers -> a100\n", 30), \
        run(REPO, *status).out + jobset_state(c, "ml-research", "pt-run1")
    logs = run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--rank", "2", *c.kc())
    assert logs.code == 0 and logs.out == "rank 2 step 1\nrank 2 step 2\n", logs.err
    followed = run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--follow", *c.kc())
    assert followed.out == "rank 0 step 1\nrank 0 step 2\n"
    assert run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--rank", "9", *c.kc()).code == 2

    listed = run(REPO, "job", "list", "--team", "ml-research", *c.kc())
    assert "ml-research/pt-run1: running" in listed.out

    finish_child_jobs(c, "ml-research", "pt-run1")
    assert wait_for(lambda: "pt-run1: succeeded" in run(REPO, *status).out, 30), run(REPO, *status).out

    cancel = run(REPO, "job", "cancel", "pt-run1", "--team", "ml-research", *c.kc())
    assert cancel.code == 0 and "cancelled ml-research/pt-run1" in cancel.out

    def deleted() -> bool:
        gone = run(REPO, *status)
        return gone.code == 2 and "404" in gone.err and "does not exist" in gone.err

    assert wait_for(deleted, 60), run(REPO, *status).err


def test_leader_and_worker_ranks_map_to_their_pods(cluster: Cluster) -> None:
    c = cluster
    carol = c.stack.identity("carol@acme.com")  # a member of llm-pretrain by name
    job = Job.from_profile("llm-pretrain", "pretrain-70b", root=REPO, nodes=3, name="big")
    # Only prod-east's team objects are applied here, not its ClusterQueue: the pre-submit check
    # rightly says the LocalQueue is inactive. The pods are made by hand; only ranks matter.
    with pytest.raises(ClusterError, match="LocalQueue 'llm-pretrain' is inactive"):
        job.submit(c.api(carol))
    job.submit(c.api(carol), check=False)
    add_pod(c, "llm-pretrain", "big", "leader", 0, "leader\n")
    add_pod(c, "llm-pretrain", "big", "workers", 0, "worker rank 1\n")
    add_pod(c, "llm-pretrain", "big", "workers", 1, "worker rank 2\n")
    handle = Job.on_cluster(c.api(carol), "big", "llm-pretrain")
    assert list(handle.logs(rank=0)) == ["leader"]
    assert list(handle.logs(rank=2)) == ["worker rank 2"]
    handle.cancel()


def test_python_api(cluster: Cluster) -> None:
    c = cluster
    api = c.api()
    job = Job.from_profile("ml-research", "finetune-1node", root=REPO, name="ft", image="ghcr.io/acme/x:1",
                           command=["python", "other.py"])
    container = job.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/acme/x:1" and container["args"][-2:] == ["python", "other.py"]
    job.submit(api)
    # finetune-1node is pinned to prod-east's H100 nodes: on prod-west's queues no flavor matches.
    assert wait_for(lambda: "node affinity" in job.status().reason, 30), job.status()
    status = job.status()
    assert status.phase == "pending" and "flavor a100 doesn't match node affinity" in status.reason, status
    assert [j.name for j in JobList(api).jobs(["ml-research"], "ml-research")] == ["ft"]
    job.cancel()

    def deleted() -> bool:
        try:
            job.status()
        except ClusterError as exc:
            return "404" in str(exc)
        return False

    assert wait_for(deleted, 60)


def test_job_new_writes_a_file_that_submit_reads(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    out = tmp_path / "job.yaml"
    made = run(REPO, "job", "new", "ml-research", "pretrain-4node", "--name", "sweep-7", "--nodes", "2",
               "-o", str(out), "--", "python", "sweep.py", "--lr", "3e-4")
    assert made.code == 0, made.err
    body = yaml.safe_load(out.read_text())
    spec = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert spec["parallelism"] == 2 and spec["template"]["spec"]["containers"][0]["args"][-4:] == [
        "python", "sweep.py", "--lr", "3e-4"]
    env = {e["name"]: e.get("value") for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["NNODES"] == "2" and env["MASTER_ADDR"] == "sweep-7-workers-0-0.sweep-7"
    submitted = run(REPO, "job", "submit", str(out), *c.kc())
    assert submitted.code == 0, submitted.err
    stored = objects(c).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ml-research", "jobsets", "sweep-7")
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"][-1] \
        == "3e-4"  # a string on the server too: the emitter quoted it
    assert run(REPO, "job", "cancel", "sweep-7", "-n", "ml-research", *c.kc()).code == 0


def test_unreachable_cluster_fails_fast_with_a_clear_error() -> None:
    start = time.monotonic()
    result = run(REPO, "job", "status", "x", "-n", "ml-research", "--server", f"http://127.0.0.1:{free_port()}",
                 "--token", "t")
    assert result.code == 2
    assert "cannot reach the cluster at http://127.0.0.1:" in result.err and "check --server or --context" in result.err
    assert "Traceback" not in result.err
    assert time.monotonic() - start < 20


def test_tokens_certificate_authority_and_missing_rights(cluster: Cluster) -> None:
    """A bearer token with the cluster's CA (a ServiceAccount's, from TokenRequest); then the real 401 and 403."""
    from kubernetes import client

    c = cluster
    ca = str(c.stack.workdir / "ca.crt")
    core = client.CoreV1Api(c.stack.client())
    core.create_namespaced_service_account("ml-research", {"metadata": {"name": "ci-bot"}})
    client.RbacAuthorizationV1Api(c.stack.client()).create_namespaced_role_binding("ml-research", {
        "metadata": {"name": "ci-bot-jobs"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                        "kind": "ClusterRole", "name": "fleetgen-team-member"},
        "subjects": [{"kind": "ServiceAccount", "name": "ci-bot", "namespace": "ml-research"}]})
    token = core.create_namespaced_service_account_token("ci-bot", "ml-research",
                                                         {"spec": {"expirationSeconds": 600}}).status.token
    token_login = ["--server", c.stack.server, "--token", token, "--certificate-authority", ca]
    ok = run(REPO, "job", "submit", "ml-research", "finetune-1node", "--name", "by-token", *token_login)
    assert ok.code == 0, ok.err
    assert run(REPO, "job", "cancel", "by-token", "-n", "ml-research", *token_login).code == 0
    # The same login from Python, then logout: the token is forgotten, the next call is nobody's.
    from generator.jobs import connect, logout

    api = connect(server=c.stack.server, token=token, certificate_authority=ca)
    assert Job.on_cluster(api, "by-token", "ml-research").api is api
    JobList(api).jobs(["ml-research"], "ml-research")  # allowed with the token
    logout(api)
    assert api.client.configuration.api_key == {}
    with pytest.raises(ClusterError, match="system:anonymous|401"):
        JobList(api).jobs(["ml-research"], "ml-research")

    untrusted = run(REPO, "job", "status", "x", "-n", "ml-research", "--server", c.stack.server, "--token", token)
    assert untrusted.code == 2 and "cannot reach the cluster" in untrusted.err  # TLS verification failed
    missing_ca = run(REPO, "job", "status", "x", "-n", "ml-research", *token_login[:4],
                     "--certificate-authority", "/nonexistent/ca.crt")
    assert missing_ca.code == 2 and "no such file" in missing_ca.err

    denied = run(REPO, "job", "status", "x", "-n", "ml-research", "--server", c.stack.server, "--token", "wrong",
                 "--certificate-authority", ca)
    assert denied.code == 2 and "401" in denied.err and "credentials were rejected" in denied.err
    bob = c.stack.identity("bob@acme.com", ("vision",))
    refused = run(REPO, "job", "submit", "ml-research", "finetune-1node", *c.kc(bob))
    assert refused.code == 2 and "rights: you may not create JobSets in namespace ml-research" in refused.err
    # Without the pre-submit check, the API server's own 403 is said as clearly.
    forbidden = run(REPO, "job", "submit", "ml-research", "finetune-1node", "--no-check", *c.kc(bob))
    assert forbidden.code == 2
    assert 'User "bob@acme.com" cannot create resource "jobsets" in API group "jobset.x-k8s.io" in the namespace ' \
           '"ml-research"' in forbidden.err
    assert "you lack the rights" in forbidden.err


def test_kubeconfig_and_context(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    config = yaml.safe_load(c.alice.kubeconfig.read_text())
    config["clusters"].append({"name": "nowhere", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}})
    config["contexts"] = [{"name": "prod-west", "context": {"cluster": "test", "user": config["users"][0]["name"]}},
                          {"name": "other", "context": {"cluster": "nowhere", "user": config["users"][0]["name"]}}]
    config["current-context"] = "other"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    ok = run(REPO, "job", "submit", "ml-research", "finetune-1node", "--name", "by-context", "--kubeconfig", str(path),
             "--context", "prod-west")
    assert ok.code == 0, ok.err
    assert run(REPO, "job", "cancel", "by-context", "-n", "ml-research", "--kubeconfig", str(path),
               "--context", "prod-west").code == 0
    unreachable = run(REPO, "job", "status", "x", "-n", "y", "--kubeconfig", str(path))
    assert unreachable.code == 2 and "cannot reach the cluster" in unreachable.err
    bad = run(REPO, "job", "status", "x", "-n", "y", "--kubeconfig", str(tmp_path / "missing"))
    assert bad.code == 2 and "cannot load kubeconfig" in bad.err
    assert run(REPO, "job", "status", "x", "-n", "y", "--server", c.stack.server).code == 2  # token missing


def test_bad_job_requests_are_usage_errors() -> None:
    cases = [
        (["job", "new", "nobody", "p"], "unknown team 'nobody'"),
        (["job", "new", "ml-research", "nope"], "no job profile 'nope'; known: finetune-1node, pretrain-4node"),
        (["job", "new", "ml-research", "pretrain-4node", "--name", "x" * 50], "at most 45 fit"),
        (["job", "new", "ml-research", "pretrain-4node", "--name", "Bad_Name"], "is not a DNS-1035 label"),
        (["job", "new", "ml-research", "pretrain-4node", "--nodes", "0"], "nodes must be at least 1, not 0"),
        (["job", "status", "x"], "say which namespace"),
    ]
    for args, message in cases:
        result = run(REPO, *args)
        assert result.code == 2 and message in result.err, (args, result.err)


# ------------------------------------------------------------------ pre-submit checks and dry run


def jobsets_named(c: Cluster, ns: str, name: str) -> list[str]:
    found = objects(c).list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets")["items"]
    return [j["metadata"]["name"] for j in found if j["metadata"]["name"] == name]


def test_dry_run_checks_and_goes_through_the_webhooks_without_creating(cluster: Cluster) -> None:
    c = cluster
    result = run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "dry-1", "--dry-run", *c.kc())
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("ok      rights: you may create JobSets in namespace ml-research")
    assert "ok      queue: LocalQueue ml-research/ml-research is active (ClusterQueue ml-research)" in lines
    # Members read the cluster's WorkloadPriorityClasses (fleetgen-priority-reader, issue 53).
    assert "ok      priority: WorkloadPriorityClass 'standard' exists" in lines
    assert "ok      capacity: 32 GPUs of at most 32 in prod-west/a100 (borrows 16 while others are idle)" in lines
    assert "ok      services: Service name dry-1 free in namespace ml-research" in lines  # JobSet's headless one
    assert lines[-1] == ("dry run: ml-research/dry-1 accepted by the API server and its admission webhooks; "
                         "nothing was created")
    assert jobsets_named(c, "ml-research", "dry-1") == []

    # The Python API: the same, and the webhook's own refusal surfaces as one line.
    job = Job.from_profile("ml-research", "pretrain-4node", root=REPO, name="dry-2")
    assert [o.passed for o in job.check(c.api())] == [True, True, True, True, True]
    job.submit(c.api(), dry_run=True)
    job.body["spec"]["failurePolicy"]["rules"][0]["name"] = "restart-on-disruption"
    with pytest.raises(ClusterError, match="submit job dry-2 failed: 422 .*vjobset.kb.io.*failure policy rule name"):
        job.submit(c.api(), dry_run=True)
    assert jobsets_named(c, "ml-research", "dry-2") == []


def test_a_job_that_cannot_run_is_refused_before_anything_is_created(cluster: Cluster, tmp_path: Path) -> None:
    from generator.jobs import SubmitRefused

    c = cluster
    bob = c.stack.identity("bob@acme.com", ("vision",))
    denied = run(REPO, "job", "submit", "ml-research", "finetune-1node", "--name", "not-bobs", *c.kc(bob))
    assert denied.code == 2 and "job not-bobs not submitted: rights: you may not create JobSets in namespace " \
        "ml-research" in denied.err and "ask the team's owners" in denied.err, denied.err

    too_big = run(REPO, "job", "new", "ml-research", "pretrain-4node", "--nodes", "40")
    assert too_big.code == 2 and "nodes: the job needs 320 GPUs but team 'ml-research' can have at most 32 in " \
        "prod-west/a100" in too_big.err and "Kueue would never admit it" in too_big.err, too_big.err

    made = Job.from_profile("ml-research", "finetune-1node", root=REPO, name="no-queue")
    made.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research"  # a typo
    path = tmp_path / "no-queue.yaml"
    path.write_text(yaml.safe_dump(made.body))
    typo = run(REPO, "job", "submit", str(path), *c.kc())
    assert typo.code == 2 and "queue: no LocalQueue 'research' in namespace ml-research" in typo.err, typo.err

    # Without a queue label Kueue gives the job the namespace's LocalQueue `default`, on the team's
    # own queue (issue 31: `job submit` used to refuse it, saying Kueue would never admit it).
    del made.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    path.write_text(yaml.safe_dump(made.body))
    unlabelled = run(REPO, "job", "submit", str(path), "--dry-run", *c.kc())
    assert unlabelled.code == 0 and "ok      queue: no kueue.x-k8s.io/queue-name label: Kueue gives the job " \
        "LocalQueue ml-research/default (ClusterQueue ml-research), as every job without one in the namespace" \
        in unlabelled.out, (unlabelled.out, unlabelled.err)

    # An admin can read WorkloadPriorityClasses, so a missing one is caught on the cluster itself.
    admin = connect(kubeconfig=str(c.stack.identity().kubeconfig))
    urgent = Job.from_profile("ml-research", "finetune-1node", root=REPO, name="urgent")
    urgent.body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    with pytest.raises(SubmitRefused, match="priority: WorkloadPriorityClass 'urgent' does not exist"):
        urgent.submit(admin)
    for name in ("not-bobs", "no-queue", "urgent"):
        assert jobsets_named(c, "ml-research", name) == []


# ------------------------------------------------------------ queue position, why pending, wait


def workload_name(c: Cluster, ns: str, jobset: str) -> str:
    stored = objects(c).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", jobset)
    uid = stored["metadata"]["uid"]
    found = objects(c).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads",
                                                     label_selector=f"kueue.x-k8s.io/job-uid={uid}")["items"]
    return str(found[0]["metadata"]["name"]) if found else ""


def pending_positions(c: Cluster) -> dict[str, int]:
    """Workload name -> position in the LocalQueue, straight from Kueue's visibility API (from 0)."""
    from generator.connection import get_json

    found = get_json(c.stack.connection(), "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ml-research/"
                                           "localqueues/ml-research/pendingworkloads")
    return {i["metadata"]["name"]: int(i["positionInLocalQueue"]) for i in found.get("items") or []}


def test_queue_position_why_pending_and_wait(cluster: Cluster) -> None:
    """Three 32-GPU jobs where the team may hold 32: one admitted, the others queued; `job status`
    says each one's position as Kueue's visibility API lists it. Deactivating the admitted one
    makes Kueue evict it and admit the next.

    Positions are compared with the API's own list rather than fixed numbers: Kueue v0.19.2 at
    times drops a just-requeued workload from its pending lists (seen in CI: queue-b never tried
    again while queue-c was), which the status then reports as not in the pending list.
    """
    c = cluster
    if c.stack.visibility:
        pytest.skip(c.stack.visibility)
    names = ["queue-a", "queue-b", "queue-c"]
    status = ["--team", "ml-research", *c.kc()]
    try:
        assert run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "queue-a", *c.kc()).code == 0
        waited = run(REPO, "job", "wait", "queue-a", "--for", "admitted", "--timeout", "60", "--interval", "1",
                     *status)
        assert waited.code == 0 and "queue-a: admitted on workers -> a100" in waited.out, waited.out + waited.err
        for name in names[1:]:
            assert run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", name, *c.kc()).code == 0
        said: dict[str, str] = {}

        def positions_agree() -> bool:
            listed = pending_positions(c)
            said.update({name: run(REPO, "job", "status", name, *status).out for name in names[1:]})
            if listed != pending_positions(c) or not listed:
                return False  # moved while we looked
            for name in names[1:]:
                position = listed.get(workload_name(c, "ml-research", name))
                expected = (f"{name}: pending (position {position + 1} in queue ml-research" if position is not None
                            else f"{name}: pending (not in the queue's pending list")
                if expected not in said[name]:
                    return False
            return sorted(listed.values()) == list(range(len(listed)))

        assert wait_for(positions_agree, 60), said
        assert any("(position 1 in queue ml-research" in text for text in said.values()), said
        # Why: Kueue's own words once it tried the job, or that it has not tried it yet.
        assert all("insufficient unused quota" in text or "has not evaluated it yet" in text
                   for text in said.values()), said
        assert any("insufficient unused quota for nvidia.com/gpu in flavor a100" in text for text in said.values())

        timed_out = run(REPO, "job", "wait", "queue-c", "--for", "running", "--timeout", "2", "--interval", "0.5",
                        *status)
        assert timed_out.code == 2 and "job queue-c is not running after 2 s; it is queue-c: pending" in timed_out.err

        # Deactivating an admitted Workload (what `kueuectl stop workload` does) makes Kueue evict it.
        first = workload_name(c, "ml-research", "queue-a")
        objects(c).patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "ml-research", "workloads", first,
                                                  {"spec": {"active": False}})

        def deactivated() -> bool:
            out = run(REPO, "job", "status", "queue-a", *status).out
            return "queue-a: pending" in out and "deactivated (spec.active is false)" in out and "evicted:" in out

        assert wait_for(deactivated, 60), run(REPO, "job", "status", "queue-a", *status).out
        outs = {}

        def next_admitted() -> bool:
            outs.update({name: run(REPO, "job", "status", name, *status).out for name in names[1:]})
            return any(": admitted" in out for out in outs.values())

        assert wait_for(next_admitted, 60), outs
        listed = run(REPO, "job", "list", *c.kc())  # no --team: every team namespace alice may read
        assert listed.code == 0 and "ml-research/queue-a: pending" in listed.out, listed.out + listed.err
    finally:
        for name in names:
            run(REPO, "job", "cancel", name, *status)
        assert wait_for(lambda: not any(jobsets_named(c, "ml-research", name) for name in names), 60)


def test_wait_exits_1_when_the_job_fails(cluster: Cluster) -> None:
    from kubernetes import client

    c = cluster
    job = Job.from_profile("ml-research", "finetune-1node", root=REPO, name="fails")
    job.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].pop("nodeSelector")
    job.submit(c.api(), check=False)
    assert job.wait(until="admitted", timeout_seconds=60, poll=1).phase in ("admitted", "running")
    # The Job controller's verdict on a program bug, written as it would: JobSet fails the set.
    batch = client.BatchV1Api(c.stack.client())
    child = resumed_child_jobs(c, "ml-research", "fails")[0]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                   "reason": "PodFailurePolicy", "message": "Container trainer for pod ml-research/fails-0 failed "
                   "with exit code 2 matching FailJob rule at index 1"} for t in ("FailureTarget", "Failed")]
    batch.patch_namespaced_job_status(child.metadata.name, "ml-research", {"status": {
        "startTime": now, "active": 0, "failed": 1, "conditions": conditions}},
        _content_type="application/merge-patch+json")
    result = run(REPO, "job", "wait", "fails", "-n", "ml-research", "--timeout", "60", "--interval", "1", *c.kc())
    assert result.code == 1 and "fails: failed" in result.out, result.out + result.err
    job.cancel()
    assert wait_for(lambda: not jobsets_named(c, "ml-research", "fails"), 60)


def test_a_notebook_without_a_checkout(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a folder with no fleet repository: the member reads the fleet files prod-west publishes
    (through the real RBAC), lists the queues she may submit to, defines a job in Python, and Kueue
    admits it against ml-research's quota; the queue then counts its GPUs in use."""
    from generator.jobs import ConfigurationError, queues
    from generator.jobs.published import published_fleet

    c = cluster
    monkeypatch.chdir(tmp_path)
    api = c.api()
    assert sorted(published_fleet(api).teams) == ["inference", "ml-research", "platform-ci", "recsys", "vision"]
    stranger = c.stack.identity("mallory@acme.com")  # in no team: may read the files, submit nowhere
    assert sorted(published_fleet(c.api(stranger)).teams) == sorted(published_fleet(api).teams)
    assert queues(c.api(stranger)) == []

    assert wait_for(lambda: queues(api)[0].in_use == 0, 60), queues(api)  # earlier tests' jobs are gone
    (mine,) = queues(api)
    assert (mine.team, mine.queue, mine.namespaces, mine.cluster, mine.pool) == (
        "ml-research", "ml-research", ("ml-research",), "prod-west", "a100")
    assert (mine.guaranteed, mine.borrowable, mine.in_use, mine.free) == (16, 16, 0, 16), mine

    with pytest.raises(ConfigurationError, match="nodes: the job needs 40 GPUs but team 'ml-research' can have at "
                       "most 32"):
        Job.define("ml-research", "nb-train", "ghcr.io/acme/x:1", ["python", "train.py"], nodes=5, api=api)
    job = Job.define("ml-research", "nb-train", "ghcr.io/acme/x:1", ["python", "train.py"], nodes=2, api=api)
    checked = {o.check: o for o in job.check()}
    assert [o.passed for o in checked.values()] == [True, True, True, True, True], checked
    assert checked["capacity"].detail == "16 GPUs of at most 32 in prod-west/a100 (within the team's guarantee)"
    job.submit()
    try:
        assert job.wait(until="admitted", timeout_seconds=60, poll=1).flavors == {"workers": "a100"}
        assert wait_for(lambda: queues(api)[0].in_use == 16, 30), queues(api)
        (now,) = queues(api)
        assert (now.free, now.free_at_most) == (0, 16)
        shown = run(tmp_path, "job", "queues", "--team", "ml-research", *c.kc())
        assert shown.code == 0 and shown.out == (
            "ml-research: queue ml-research in ml-research: a100 (NVIDIA-A100-SXM4-80GB) on prod-west: 16 guaranteed "
            "+ 16 borrowable; 16 in use, 0 free, up to 16 if the cohort is idle\n"), shown.out + shown.err
    finally:
        job.cancel()
        assert wait_for(lambda: not jobsets_named(c, "ml-research", "nb-train"), 60)
    # Logged out, the connection acts as nobody: the API server refuses it (anonymous, or 401 where
    # anonymous requests are off); it never reads as the member again.
    from generator.jobs import logout

    logout(api)
    with pytest.raises(ClusterError) as refused:
        Job.on_cluster(api, "nb-train", "ml-research").status()
    assert ": 401 " in str(refused.value) or '"system:anonymous"' in str(refused.value), refused.value


def test_the_command_line_without_a_checkout(cluster: Cluster, tmp_path: Path) -> None:
    """Outside a fleet repository `fleetgen job new|submit TEAM PROFILE`, `--team` and `job list` read
    the fleet files the cluster publishes: the member makes, submits, finds and cancels a profile's job
    with nothing but a kubeconfig; a job file's quota is checked against the published files too."""
    c = cluster
    made = run(tmp_path, "job", "new", "ml-research", "pretrain-4node", "--name", "cli-nb", "--nodes", "2",
               "-o", str(tmp_path / "job.yaml"), *c.kc())
    assert made.code == 0 and "JobSet ml-research/cli-nb" in made.err, made.err
    too_big = run(tmp_path, "job", "new", "ml-research", "pretrain-4node", "--nodes", "5", *c.kc())
    assert too_big.code == 2 and "nodes: the job needs 40 GPUs but team 'ml-research' can have at most 32" \
        in too_big.err, too_big.err
    dry = run(tmp_path, "job", "submit", str(tmp_path / "job.yaml"), "--dry-run", *c.kc())
    assert dry.code == 0 and "ok      capacity: 16 GPUs of at most 32 in prod-west/a100" in dry.out, dry.out + dry.err
    submitted = run(tmp_path, "job", "submit", "ml-research", "pretrain-4node", "--name", "cli-nb", "--nodes", "2",
                    *c.kc())
    assert submitted.code == 0, submitted.err
    try:
        listed = run(tmp_path, "job", "list", *c.kc())
        assert listed.code == 0 and "ml-research/cli-nb: " in listed.out, listed.out + listed.err
        status = run(tmp_path, "job", "status", "cli-nb", "--team", "ml-research", *c.kc())
        assert status.code == 0 and status.out.startswith("cli-nb: "), status.out + status.err
        unknown = run(tmp_path, "job", "status", "cli-nb", "--team", "llm-pretrain", *c.kc())
        assert unknown.code == 2 and "unknown team 'llm-pretrain'; known: inference, ml-research" in unknown.err
    finally:
        cancelled = run(tmp_path, "job", "cancel", "cli-nb", "--team", "ml-research", *c.kc())
        assert cancelled.code == 0, cancelled.err
        assert wait_for(lambda: not jobsets_named(c, "ml-research", "cli-nb"), 60)


def test_a_rewritten_published_fleet_is_refused_and_sends_no_job(cluster: Cluster, tmp_path: Path) -> None:
    """The ConfigMap as anyone who may write in kube-public could leave it after render: ml-research's
    namespaces made kube-system. The member reads it through the real RBAC; the render-time checks
    refuse it, so neither a job file nor a job is made, and kube-system holds no JobSet of it."""
    import json

    from kubernetes import client

    from generator.compile.published import NAME, NAMESPACE

    c = cluster
    core = client.CoreV1Api(c.stack.client())
    rendered = dict(core.read_namespaced_config_map(NAME, NAMESPACE).data)
    team = {**json.loads(rendered["team.ml-research.json"]), "namespaces": ["kube-system"]}
    core.patch_namespaced_config_map(NAME, NAMESPACE, {"data": {"team.ml-research.json": json.dumps(team)}})
    try:
        said = "team.ml-research.json: namespaces[0]: namespace 'kube-system' is reserved for the platform"
        made = run(tmp_path, "job", "new", "ml-research", "pretrain-4node", "--name", "hostile", "--nodes", "2",
                   "-o", str(tmp_path / "job.yaml"), *c.kc())
        assert made.code == 2 and said in made.err and not (tmp_path / "job.yaml").exists(), made.err
        submitted = run(tmp_path, "job", "submit", "ml-research", "pretrain-4node", "--name", "hostile", "--nodes",
                        "2", *c.kc())
        assert submitted.code == 2 and said in submitted.err, submitted.out + submitted.err
        assert jobsets_named(c, "kube-system", "hostile") == [] and jobsets_named(c, "ml-research", "hostile") == []
    finally:
        core.patch_namespaced_config_map(NAME, NAMESPACE, {"data": rendered})
