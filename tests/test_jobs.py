"""Job lifecycle through the real kubernetes client against the API stand-in: CLI and Python API."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.jobs import ClusterError, Job, JobList, connect
from tests.conftest import REPO, run
from tests.kubeapi import KubeApi, free_port_closed


def conn(url: str, token: str = "admin-token") -> list[str]:
    return ["--server", url, "--token", token]


def _pod(api: KubeApi, ns: str, jobset: str, rjob: str, index: int, log: str) -> None:
    name = f"{jobset}-{rjob}-0-{index}-abcde"
    api.put("", "pods", ns, {"metadata": {"name": name, "labels": {
        "jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "batch.kubernetes.io/job-completion-index": str(index)}},
        "spec": {"containers": [{"name": "trainer", "image": "ghcr.io/acme/x:1"}]}})
    api.logs[(ns, name)] = log


def _workload(api: KubeApi, ns: str, uid: str, conditions: list[dict[str, Any]],
              admission: dict[str, Any] | None = None) -> None:
    status: dict[str, Any] = {"conditions": conditions}
    if admission:
        status["admission"] = admission
    api.put("kueue.x-k8s.io", "workloads", ns, {"metadata": {"name": f"jobset-{uid[:8]}",
                                                             "labels": {"kueue.x-k8s.io/job-uid": uid}},
                                                "spec": {}, "status": status})


def test_cli_lifecycle(kube: Any) -> None:
    api, url = kube
    result = run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "pt-run1", *conn(url))
    assert result.code == 0, result.err
    assert "submitted ml-research/pt-run1" in result.out
    stored = api.get("jobset.x-k8s.io", "jobsets", "ml-research", "pt-run1")
    assert stored is not None
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4

    # Submitting the same name again: a clear 409.
    again = run(REPO, "job", "submit", "ml-research", "pretrain-4node", "--name", "pt-run1", *conn(url))
    assert again.code == 2 and "409" in again.err and "already exists" in again.err

    status = ["job", "status", "pt-run1", "--team", "ml-research", *conn(url)]
    assert "pt-run1: pending: Kueue has not created a Workload yet" in run(REPO, *status).out
    uid = stored["metadata"]["uid"]
    _workload(api, "ml-research", uid, [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                         "message": "couldn't assign flavors to pod set workers: insufficient "
                                                    "unused quota for nvidia.com/gpu in flavor a100, 8 more needed"}])
    out = run(REPO, *status).out
    assert "pending: couldn't assign flavors" in out and "8 more needed" in out
    _workload(api, "ml-research", uid, [{"type": "QuotaReserved", "status": "True"},
                                        {"type": "Admitted", "status": "True"}],
              {"podSetAssignments": [{"name": "workers", "flavors": {"nvidia.com/gpu": "a100", "cpu": "a100"}}]})
    assert "pt-run1: admitted on workers -> a100" in run(REPO, *status).out
    stored = api.get("jobset.x-k8s.io", "jobsets", "ml-research", "pt-run1")
    assert stored is not None
    stored["status"] = {"replicatedJobsStatus": [{"name": "workers", "active": 1}], "restarts": 1}
    api.put("jobset.x-k8s.io", "jobsets", "ml-research", stored)
    assert "pt-run1: running on workers -> a100 (restarted 1x)" in run(REPO, *status).out

    for rank in range(4):
        _pod(api, "ml-research", "pt-run1", "workers", rank, f"rank {rank} step 1\nrank {rank} step 2\n")
    logs = run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--rank", "2", *conn(url))
    assert logs.code == 0 and logs.out == "rank 2 step 1\nrank 2 step 2\n"
    followed = run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--follow", *conn(url))
    assert followed.out == "rank 0 step 1\nrank 0 step 2\n"
    assert run(REPO, "job", "logs", "pt-run1", "-n", "ml-research", "--rank", "9", *conn(url)).code == 2

    listed = run(REPO, "job", "list", "--team", "ml-research", *conn(url))
    assert "ml-research/pt-run1: running" in listed.out

    stored = api.get("jobset.x-k8s.io", "jobsets", "ml-research", "pt-run1")
    assert stored is not None
    stored["status"]["conditions"] = [{"type": "Completed", "status": "True", "message": "jobset completed"}]
    api.put("jobset.x-k8s.io", "jobsets", "ml-research", stored)
    assert "pt-run1: succeeded (restarted 1x): jobset completed" in run(REPO, *status).out

    cancel = run(REPO, "job", "cancel", "pt-run1", "--team", "ml-research", *conn(url))
    assert cancel.code == 0 and "cancelled ml-research/pt-run1" in cancel.out
    assert api.get("jobset.x-k8s.io", "jobsets", "ml-research", "pt-run1") is None
    gone = run(REPO, *status)
    assert gone.code == 2 and "404" in gone.err and "does not exist" in gone.err


def test_leader_and_worker_ranks_map_to_their_pods(kube: Any) -> None:
    api, url = kube
    job = Job.from_profile("llm-pretrain", "pretrain-70b", root=REPO, nodes=3, name="big")
    job.submit(connect(token="admin-token", server=url))
    _pod(api, "llm-pretrain", "big", "leader", 0, "leader\n")
    _pod(api, "llm-pretrain", "big", "workers", 0, "worker rank 1\n")
    _pod(api, "llm-pretrain", "big", "workers", 1, "worker rank 2\n")
    handle = Job.on_cluster(connect(token="admin-token", server=url), "big", "llm-pretrain")
    assert list(handle.logs(rank=0)) == ["leader"]
    assert list(handle.logs(rank=2)) == ["worker rank 2"]


def test_python_api(kube: Any) -> None:
    api, url = kube
    client = connect(token="admin-token", server=url)
    job = Job.from_profile("ml-research", "finetune-1node", root=REPO, name="ft", image="ghcr.io/acme/x:1",
                           command=["python", "other.py"])
    container = job.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/acme/x:1" and container["args"][-2:] == ["python", "other.py"]
    job.submit(client)
    assert job.status().phase == "pending"
    assert [j.name for j in JobList(client).jobs(["ml-research"], "ml-research")] == ["ft"]
    job.cancel()
    with pytest.raises(ClusterError, match="404"):
        job.status()


def test_job_new_writes_a_file_that_submit_reads(kube: Any, tmp_path: Path) -> None:
    api, url = kube
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
    assert run(REPO, "job", "submit", str(out), *conn(url)).code == 0
    assert api.get("jobset.x-k8s.io", "jobsets", "ml-research", "sweep-7") is not None


def test_unreachable_cluster_fails_fast_with_a_clear_error() -> None:
    start = time.monotonic()
    result = run(REPO, "job", "status", "x", "-n", "ml-research", "--server", f"http://127.0.0.1:{free_port_closed()}",
                 "--token", "t")
    assert result.code == 2
    assert "cannot reach the cluster at http://127.0.0.1:" in result.err and "check --server or --context" in result.err
    assert "Traceback" not in result.err
    assert time.monotonic() - start < 20


def test_bad_credentials_and_missing_rights(kube: Any) -> None:
    api, url = kube
    denied = run(REPO, "job", "status", "x", "-n", "ml-research", *conn(url, "wrong-token"))
    assert denied.code == 2 and "401" in denied.err and "credentials were rejected" in denied.err
    api.tokens["bob-token"] = "bob"
    api.authorize = lambda user, verb, res, ns: user != "bob" or ns == "vision"
    forbidden = run(REPO, "job", "submit", "ml-research", "finetune-1node", *conn(url, "bob-token"))
    assert forbidden.code == 2
    assert 'User "bob" cannot create resource "jobsets" in API group "jobset.x-k8s.io" in the namespace ' \
           '"ml-research"' in forbidden.err
    assert "you lack the rights" in forbidden.err


def test_kubeconfig_and_context(kube: Any, tmp_path: Path) -> None:
    _, url = kube
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "other",
              "clusters": [{"name": "stand-in", "cluster": {"server": url}},
                           {"name": "nowhere", "cluster": {"server": f"http://127.0.0.1:{free_port_closed()}"}}],
              "users": [{"name": "admin", "user": {"token": "admin-token"}}],
              "contexts": [{"name": "prod-west", "context": {"cluster": "stand-in", "user": "admin"}},
                           {"name": "other", "context": {"cluster": "nowhere", "user": "admin"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    ok = run(REPO, "job", "submit", "ml-research", "finetune-1node", "--kubeconfig", str(path),
             "--context", "prod-west")
    assert ok.code == 0, ok.err
    bad = run(REPO, "job", "status", "x", "-n", "y", "--kubeconfig", str(tmp_path / "missing"))
    assert bad.code == 2 and "cannot load kubeconfig" in bad.err
    assert run(REPO, "job", "status", "x", "-n", "y", "--server", url).code == 2  # token missing


def test_bad_job_requests_are_usage_errors() -> None:
    cases = [
        (["job", "new", "nobody", "p"], "unknown team 'nobody'"),
        (["job", "new", "ml-research", "nope"], "no job profile 'nope'; known: finetune-1node, pretrain-4node"),
        (["job", "new", "ml-research", "pretrain-4node", "--name", "x" * 50], "at most 45 fit"),
        (["job", "new", "ml-research", "pretrain-4node", "--name", "Bad_Name"], "is not a DNS-1035 label"),
        (["job", "new", "ml-research", "pretrain-4node", "--nodes", "0"], "--nodes must be at least 1"),
        (["job", "status", "x"], "say which namespace"),
    ]
    for args, message in cases:
        result = run(REPO, *args)
        assert result.code == 2 and message in result.err, (args, result.err)
