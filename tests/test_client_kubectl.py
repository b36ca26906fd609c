"""Issue 56: kubectl, as a member of a team runs it, on prod-east's fleet twin.

prod-east as rendered on the real API server with Kueue v0.19.2 and its visibility API, kube-scheduler and
kwok. The real kubectl (the Kubernetes release of the API server) runs with a member's own client
certificate: ml-research's member creates two 8-node jobs, so one is admitted and one waits on the
team's quota, and follows them with kubectl alone; a member of llm-pretrain is refused the same.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO, run
from tests.upstream import tools
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER, PROFILE = "prod-east", "ml-research", "llm-pretrain", "pretrain-8node-slices"
RUNS = {"pod-complete.stage.kwok.x-k8s.io/delay": "20m", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "20m"}
"""kwok keeps the pods running this long (tests/upstream/twin.py submit says why both)."""
PENDING = ("/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{queue}/pendingworkloads")


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"kubectl-{CLUSTER}")) as running:
        yield running


def kubectl(stack: Stack, team: str, group: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl as a member of `team` (its file's first group)."""
    who = stack.identity(f"kubectl@{team}.test", (group,))
    return subprocess.run([str(tools.binary("kubectl")), f"--kubeconfig={who.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def _job(tmp_path: Path, name: str) -> Path:
    """`fleetgen job new` of the profile, its pods kept running by kwok."""
    path = tmp_path / f"{name}.yaml"
    made = run(REPO, "job", "new", TEAM, PROFILE, "--name", name, "-o", str(path))
    assert made.code == 0, made.err
    body = yaml.safe_load(path.read_text())
    for rjob in body["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {}).update(RUNS)
    path.write_text(yaml.safe_dump(body))
    return path


def test_a_member_follows_the_teams_jobs_with_kubectl_and_another_team_is_refused(
        twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    """Two 8-node jobs of 64 GPUs on a team that may hold 96: kubectl creates both as the member, lists
    their Workloads (one admitted, one waiting), reads the waiting list from Kueue's visibility API, lists
    the Nodes (`tenancy.membersReadNodes` is on for prod-east), and cannot create Roles, change a Workload
    or read ClusterQueues; suspending the admitted JobSet is undone by Kueue. A member of llm-pretrain
    gets 403 for the same reads and writes in ml-research's namespace."""
    stack, fleet, _ = twin
    team, other = fleet.teams[TEAM].config, fleet.teams[OTHER].config
    ns, queue = team.namespace_names[0], team.queue_for(fleet.clusters[CLUSTER].config, "h100")
    member = lambda *args: kubectl(stack, TEAM, team.members.groups[0], *args)  # noqa: E731
    outsider = lambda *args: kubectl(stack, OTHER, other.members.groups[0], *args)  # noqa: E731

    for name in ("slices-a", "slices-b"):
        created = member("create", "-f", str(_job(tmp_path, name)))
        assert created.returncode == 0, created.stderr

    def workloads() -> dict[str, dict[str, Any]]:
        listed = member("-n", ns, "get", "workloads", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        return {w["metadata"]["ownerReferences"][0]["name"]: w for w in json.loads(listed.stdout)["items"]}

    def admitted(w: dict[str, Any]) -> bool:
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in w.get("status", {}).get("conditions", []))

    assert wait_for(lambda: len(workloads()) == 2 and sum(map(admitted, workloads().values())) == 1, 60)
    waiting = next(name for name, w in workloads().items() if not admitted(w))
    pending = member("get", "--raw", PENDING.format(ns=ns, queue=queue))
    assert pending.returncode == 0, pending.stderr
    assert [w["metadata"]["ownerReferences"][0]["name"] for w in json.loads(pending.stdout)["items"]] == [waiting]

    nodes = member("get", "nodes", "-o", "name")
    assert nodes.returncode == 0 and len(nodes.stdout.split()) >= 32, nodes.stderr
    for verb, resource in (("create", "roles"), ("patch", "workloads"), ("update", "localqueues")):
        said = member("auth", "can-i", verb, resource, "-n", ns)
        assert said.stdout.strip() == "no", (verb, resource, said.stdout)
    assert member("auth", "can-i", "list", "clusterqueues").stdout.strip() == "no"

    running = next(name for name in ("slices-a", "slices-b") if name != waiting)
    assert member("-n", ns, "patch", "jobset", running, "--type=merge", "-p", '{"spec":{"suspend":true}}'
                  ).returncode == 0

    def resumed() -> bool:
        got = member("-n", ns, "get", "jobset", running, "-o", "jsonpath={.spec.suspend}")
        return got.returncode == 0 and got.stdout == "false"
    assert wait_for(resumed, 30), "Kueue left the admitted JobSet suspended"

    for args in (("-n", ns, "get", "jobsets"), ("-n", ns, "get", "workloads"), ("get", "--raw", PENDING.format(
            ns=ns, queue=queue)), ("-n", ns, "delete", "jobset", running)):
        refused = outsider(*args)
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), (args, refused.stderr)
    for name in ("slices-a", "slices-b"):
        assert member("-n", ns, "delete", "jobset", name).returncode == 0
