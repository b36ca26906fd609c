"""Issue 56, the tools ML engineers already use: Kueue's own `kueuectl` (v0.19.2) in a team's namespace.

prod-east as rendered, on its twin (the real API server, Kueue with its visibility API, JobSet,
kube-scheduler and kwok). A member of ml-research fills the team's quota: one job admitted, two waiting.
The real kueuectl binary, run with the member's own kubeconfig, then does what the member asked for:

- `list workload` shows the team's Workloads, the waiting ones with their place in the LocalQueue. For a
  waiting Workload it reads the ClusterQueue's pending list (kueue v0.19.2 cmd/kueuectl/app/list/
  list_workload.go:434-476), a cluster-scoped subresource, and any error but NotFound ends the command
  (:457-459); fleetgen grants it on the team's own ClusterQueue only (`fleetgen-members-<team>`).
- `list localqueue` lists the namespace's LocalQueues (list_localqueue.go:169).
- `stop workload` / `resume workload` patch the Workload's `spec.active`
  (options/update_workload_activation_options.go:99-117), which `fleetgen-team-member` grants and
  `fleetgen-team-workloads` holds to that one field: Kueue evicts a stopped one and admits it again once
  resumed and quota frees up; `delete workload` deletes the job that owns it (delete/delete_workload.go:
  349-355).

Every right is what fleetgen renders (generator/compile/member_rights.py); the test grants nothing by hand.

Refused, by the API server: a member of another team reading or stopping ml-research's Workloads and
queues, or its ClusterQueue's pending list; a member stopping or resuming a LocalQueue, creating one, or
changing anything of a Workload but `spec.active` (its priority, its queue); resuming a Workload Kueue
deactivated itself (its maximum execution time ran out).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.config.fleet import Fleet
from generator.connection import get_json
from tests.upstream import tools
from tests.upstream.cluster import Identity, Stack
from tests.upstream.fleet import JOBSET, KUEUE, condition, custom, gpu_jobset, workload_of
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER = "prod-east", "ml-research", "llm-pretrain"
MEMBER = "alice@acme.com"
"""A member of ml-research by name (teams/ml-research.yaml `members.users`)."""
OUTSIDER = "carol@acme.com"
"""A member of llm-pretrain by name (teams/llm-pretrain.yaml), none of ml-research."""
RUNS = {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s"}
"""kwok keeps the pods running (tests/upstream/twin.py `submit`)."""
PENDING = f"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{TEAM}/pendingworkloads"
"""What kueuectl reads for a waiting Workload (list_workload.go:455-456), served by Kueue's visibility API."""
QUOTA_JOB = (8, 8)
"""Pods and GPUs per pod of a job that takes 64 H100s: ml-research may use 64 of its own plus 32 borrowed
(teams/ml-research.yaml), so one runs and the next ones wait."""


def _job(fleet: Fleet, name: str, pods: int, gpus: int, **labels: str) -> dict[str, Any]:
    """A JobSet on ml-research's queue whose pods kwok keeps running and ends within a second once deleted."""
    body = gpu_jobset(fleet.teams[TEAM].config, name, pods, gpus)
    body["metadata"]["labels"].update(labels)
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"] = {"annotations": dict(RUNS)}
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    return body


class Queue:
    """The team's queue as the member filled it: Workload names by job."""

    def __init__(self, stack: Stack, fleet: Fleet, twin: Twin, workdir: Path) -> None:
        self.stack, self.fleet, self.twin, self.workdir = stack, fleet, twin, workdir
        self.ns = fleet.teams[TEAM].config.namespace_names[0]
        self.member = stack.identity(MEMBER)
        self.outsider = stack.identity(OUTSIDER)
        self.workloads: dict[str, str] = {}

    def submit(self, name: str, pods: int, gpus: int, **labels: str) -> None:
        custom(self.stack, self.stack.client(MEMBER)).create_namespaced_custom_object(
            JOBSET, "v1alpha2", self.ns, "jobsets", _job(self.fleet, name, pods, gpus, **labels))
        found = wait_for(lambda: workload_of(self.stack, self.ns, name), 30)
        assert found, f"no Workload for {name}\n{self.twin.logs()}"
        self.workloads[name] = found["metadata"]["name"]

    def workload(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = custom(self.stack).get_namespaced_custom_object(
            KUEUE, "v1beta2", self.ns, "workloads", self.workloads[name])
        return found

    def wait(self, name: str, kind: str, status: str = "True", seconds: float = 60, reason: str = "") -> None:
        def reached() -> bool:
            found = condition(self.workload(name), kind)
            return found.get("status") == status and (not reason or found.get("reason") == reason)
        assert wait_for(reached, seconds), f"{name}: no {kind}={status} {reason}\n{self.workload(name).get('status')}"

    def pending(self) -> list[str]:
        """The ClusterQueue's pending Workloads in Kueue's order, as its visibility API lists them."""
        found = get_json(self.stack.connection(), PENDING)
        return [item["metadata"]["name"] for item in found.get("items") or []]

    def kueuectl(self, who: Identity, *args: str) -> subprocess.CompletedProcess[str]:
        """The real kueuectl as `who`, in the team's namespace unless `args` say otherwise; kubectl on PATH
        for its pass-through commands (passthrough/passthrough.go:94-108)."""
        path = f"{tools.binary('kubectl').parent}{os.pathsep}{os.environ.get('PATH', '')}"
        where = () if "-n" in args else ("-n", self.ns)
        return subprocess.run([str(tools.binary("kueuectl")), *args, *where, "--kubeconfig", str(who.kubeconfig),
                               "--cache-dir", str(self.workdir / "kube-cache")],
                              capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "PATH": path, "HOME": str(self.workdir)})


@pytest.fixture(scope="module")
def queue(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    """prod-east's twin; the member's job `expired` (Kueue deactivated it when its 1 s maximum execution
    time ran out), then `first` admitted and `second`, `third` waiting, in that order."""
    if not tools.binary("kueuectl").is_file():
        pytest.skip("kueuectl is not built: run python3 tests/upstream/tools.py build kueuectl")
    workdir = tmp_path_factory.mktemp("kueuectl")
    with running_twin(CLUSTER, upstream_etcd, workdir / "twin") as (stack, fleet, twin):
        if stack.visibility:
            pytest.skip(stack.visibility)
        q = Queue(stack, fleet, twin, workdir)
        q.submit("expired", 1, 8, **{"kueue.x-k8s.io/max-exec-time-seconds": "1"})
        q.wait("expired", "Evicted", reason="DeactivatedDueToMaximumExecutionTimeExceeded", seconds=90)
        q.submit("first", *QUOTA_JOB)
        q.wait("first", "Admitted")
        for name in ("second", "third"):
            time.sleep(1.1)  # distinct creation seconds: Kueue orders equal priorities by creation time
            q.submit(name, *QUOTA_JOB)
        waiting = [q.workloads[n] for n in ("second", "third")]  # not `expired`: Kueue queues no inactive one
        assert wait_for(lambda: q.pending() == waiting, 60), f"{q.pending()}\n{twin.logs()}"
        yield q


def _table(text: str) -> list[dict[str, str]]:
    """Rows of a kubectl-style table by its header's columns (cells may be empty, so not split on blanks)."""
    header, *rows = text.splitlines()
    names = [n for n in header.split("  ") if n.strip()]
    starts = [header.index(n.strip()) for n in names]
    out = []
    for row in rows:
        cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        out.append(dict(zip((n.strip() for n in names), cells, strict=True)))
    return out


def _by_job(q: Queue, listed: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    assert listed.returncode == 0, listed.stderr
    named = {wl: job for job, wl in q.workloads.items()}
    return {named[row["NAME"]]: row for row in _table(listed.stdout)}


def test_a_member_lists_the_teams_workloads_with_the_waiting_ones_places_and_its_localqueues(queue: Queue) -> None:
    rows = _by_job(queue, queue.kueuectl(queue.member, "list", "workload"))
    assert sorted(rows) == ["expired", "first", "second", "third"], rows
    assert [(rows[j]["STATUS"], rows[j]["POSITION IN QUEUE"]) for j in ("first", "expired")] == \
        [("ADMITTED", ""), ("PENDING", "")], rows  # Kueue queues no inactive Workload: it has no place
    assert [(rows[j]["STATUS"], rows[j]["POSITION IN QUEUE"]) for j in ("second", "third")] == \
        [("PENDING", "0"), ("PENDING", "1")], rows
    assert {r["CLUSTERQUEUE"] for r in rows.values()} == {TEAM} and rows["first"]["JOB NAME"] == "first", rows
    pending = _by_job(queue, queue.kueuectl(queue.member, "list", "workload", "--status", "pending"))
    assert sorted(pending) == ["expired", "second", "third"], pending  # a deactivated one is pending too

    def localqueues() -> dict[str, tuple[str, str, str]]:
        listed = queue.kueuectl(queue.member, "list", "localqueue")
        assert listed.returncode == 0, listed.stderr
        return {row["NAME"]: (row["CLUSTERQUEUE"], row["PENDING WORKLOADS"], row["ADMITTED WORKLOADS"])
                for row in _table(listed.stdout)}
    # Kueue writes a LocalQueue's counts into its status a little after it queues or admits a Workload.
    wanted = {"default": (TEAM, "0", "0"), TEAM: (TEAM, "2", "1")}
    assert wait_for(lambda: localqueues() == wanted, 30), localqueues()


def test_a_member_stops_and_resumes_a_workload_and_kueue_evicts_and_readmits_it(queue: Queue) -> None:
    first = queue.workloads["first"]
    stopped = queue.kueuectl(queue.member, "stop", "workload", first)
    assert (stopped.returncode, stopped.stdout.strip()) == (0, f"workload.kueue.x-k8s.io/{first} stopped"), \
        stopped.stderr
    queue.wait("first", "Evicted", reason="Deactivated")
    queue.wait("first", "QuotaReserved", "False")
    queue.wait("second", "Admitted")  # the quota it freed goes to the next in line
    resumed = queue.kueuectl(queue.member, "resume", "workload", first)
    assert (resumed.returncode, resumed.stdout.strip()) == (0, f"workload.kueue.x-k8s.io/{first} resumed"), \
        resumed.stderr
    queue.wait("first", "Requeued", reason="Reactivated")

    def place() -> str:
        row = _by_job(queue, queue.kueuectl(queue.member, "list", "workload"))["first"]
        return row["POSITION IN QUEUE"] if row["STATUS"] == "PENDING" else ""
    assert wait_for(place, 30), queue.pending()  # waiting again, with a place in the LocalQueue
    # Stop the other waiting one and delete the running job: Kueue admits the resumed Workload again.
    assert queue.kueuectl(queue.member, "stop", "workload", queue.workloads["third"]).returncode == 0
    deleted = queue.kueuectl(queue.member, "delete", "workload", queue.workloads["second"], "--yes")
    assert deleted.returncode == 0 and "jobsets.jobset.x-k8s.io/second deleted" in deleted.stdout, \
        deleted.stdout + deleted.stderr
    queue.wait("first", "Admitted", seconds=90)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0, done.stdout
    assert all(w in done.stderr for w in words), done.stderr


def test_a_member_may_not_hold_or_make_queues_nor_change_a_workload_but_its_switch(queue: Queue) -> None:
    member = queue.member
    for verb in ("stop", "resume"):
        _refused(queue.kueuectl(member, verb, "localqueue", TEAM), "forbidden", 'cannot patch resource "localqueues"')
    _refused(queue.kueuectl(member, "create", "localqueue", "mine", "-c", TEAM), "forbidden",
             'cannot get resource "clusterqueues"')
    _refused(queue.kueuectl(member, "create", "localqueue", "mine", "-c", TEAM, "-i"), "forbidden",
             'cannot create resource "localqueues"')
    third = queue.workloads["third"]
    for patch in ('{"spec":{"priority":1000}}', '{"spec":{"queueName":"default"}}',
                  '{"metadata":{"labels":{"kueue.x-k8s.io/priority-class":"production"}}}',
                  '{"spec":{"active":true,"priority":1000}}'):
        _refused(queue.kueuectl(member, "patch", "workload", third, "--type", "merge", "-p", patch),
                 "fleetgen-team-workloads", "may change only spec.active")
    _refused(queue.kueuectl(member, "resume", "workload", queue.workloads["expired"]), "fleetgen-team-workloads",
             "Kueue deactivated this Workload itself (DeactivatedDueToMaximumExecutionTimeExceeded")


def test_another_teams_member_may_not_see_or_stop_the_teams_work(queue: Queue) -> None:
    from kubernetes.client.exceptions import ApiException

    outsider = queue.outsider
    _refused(queue.kueuectl(outsider, "list", "workload"), "forbidden", 'cannot list resource "workloads"')
    _refused(queue.kueuectl(outsider, "list", "localqueue"), "forbidden", 'cannot list resource "localqueues"')
    for verb in ("stop", "resume"):
        _refused(queue.kueuectl(outsider, verb, "workload", queue.workloads["third"]), "forbidden",
                 'cannot get resource "workloads"')
    with pytest.raises(ApiException) as refused:
        get_json(queue.stack.connection(OUTSIDER), PENDING)
    assert refused.value.status == 403
    own = queue.kueuectl(outsider, "list", "workload", "-n", OTHER)
    assert own.returncode == 0 and f"No resources found in {OTHER} namespace." in own.stderr, own.stderr
