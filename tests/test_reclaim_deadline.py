"""Issue 53: a reclaim deadline and a team-wide maximum execution time, judged by the real API server
and Kueue v0.19.2 on the twin (kube-scheduler, kwok nodes shaped like clusters/dev.yaml).

The fleet is the example one with two edits: dev caps grace periods at 30 s (Kubernetes' default)
(`kueue.maxTerminationGracePeriodSeconds`), and team speech runs batch jobs for at most 8 s
(`maxExecutionTime`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO, edit, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import condition, workload_of
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin

pytestmark = pytest.mark.upstream

CAP, MAX_EXEC = 30, 8
TEAM, PROFILE = "speech", "asr-2node"


@pytest.fixture(scope="module")
def deadline_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deadline-fleet")
    for name in ("teams", "clusters", "rendered"):
        shutil.copytree(REPO / name, root / name)
    edit(root, "clusters/dev.yaml", "kueue:\n  version: v0.15.2\n",
         f"kueue:\n  version: v0.15.2\n  maxTerminationGracePeriodSeconds: {CAP}\n")
    edit(root, "teams/speech.yaml", "defaultPriority: standard\n",
         f"defaultPriority: standard\nmaxExecutionTime: {MAX_EXEC}s\n")
    rendered = run(root, "render")
    assert rendered.code == 0, rendered.err
    return root


@pytest.fixture(scope="module")
def twin(deadline_fleet: Path, upstream_etcd: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    from tests.upstream.twin import running_twin

    with running_twin("dev", upstream_etcd, tmp_path_factory.mktemp("twin-deadline"), root=deadline_fleet) as running:
        yield running


def _member(stack: Stack, fleet: Fleet) -> Any:
    team = fleet.teams[TEAM].config
    return stack.identity(f"deadline-member@{TEAM}.test", (team.members.groups[0],))


def _new(root: Path, name: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / f"{name}.yaml"
    made = run(root, "job", "new", TEAM, PROFILE, "--name", name, "-o", str(path))
    assert made.code == 0, made.err
    return path, yaml.safe_load(path.read_text())


def _pod_specs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["template"]["spec"]["template"]["spec"] for r in body["spec"]["replicatedJobs"]]


def test_a_members_jobset_with_a_long_grace_period_is_refused_and_every_pod_too(
        twin: tuple[Stack, Fleet, Twin], deadline_fleet: Path, tmp_path: Path) -> None:
    """Intent: a reclaim takes no longer than the cluster allows. A member's own JobSet whose pods
    would take 3600 s to stop (holding a lender's GPUs for an hour after a reclaim) is refused by the
    API server when submitted, with the cap and why; so is a bare Pod (what every controller's pods
    are checked as); one within the cap is accepted. `explain` states how long a reclaim takes."""
    stack, fleet, _ = twin
    who = _member(stack, fleet)
    path, body = _new(deadline_fleet, "long-grace", tmp_path)
    for spec in _pod_specs(body):
        spec["terminationGracePeriodSeconds"] = 3600
    path.write_text(yaml.safe_dump(body))
    refused = run(deadline_fleet, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert refused.code != 0, "the API server accepted a JobSet with a 3600 s grace period"
    assert f"terminationGracePeriodSeconds in namespace {TEAM} is at most {CAP}" in refused.err, refused.err

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "long-grace-pod"},
           "spec": {"terminationGracePeriodSeconds": 3600,
                    "containers": [{"name": "c", "image": "registry.example/x:1"}]}}
    api = client.CoreV1Api(config.new_client_from_config(str(who.kubeconfig)))
    with pytest.raises(ApiException) as caught:
        api.create_namespaced_pod(TEAM, pod, dry_run="All")
    assert f"is at most {CAP}" in str(caught.value.body), caught.value.body
    pod["spec"]["terminationGracePeriodSeconds"] = CAP
    api.create_namespaced_pod(TEAM, pod, dry_run="All")

    path, body = _new(deadline_fleet, "short-grace", tmp_path)
    for spec in _pod_specs(body):
        spec["terminationGracePeriodSeconds"] = CAP
    path.write_text(yaml.safe_dump(body))
    accepted = run(deadline_fleet, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert accepted.code == 0, accepted.err

    explained = run(deadline_fleet, "explain", "team", "ml-research").out
    assert f"a reclaim takes at most {CAP} s plus Kueue's and the scheduler's reaction" in explained, explained


def test_a_kubectl_jobset_past_the_teams_max_execution_time_is_deactivated_and_status_says_so(
        twin: tuple[Stack, Fleet, Twin], deadline_fleet: Path, tmp_path: Path) -> None:
    """Intent: no batch job of the team runs past the team's maxExecutionTime, whoever made it. A
    JobSet a member creates without Kueue's max-exec-time label (as kubectl would, its pods running
    for 10 minutes) is labelled on creation; Kueue deactivates its Workload after 8 s admitted
    (Evicted: DeactivatedDueToMaximumExecutionTimeExceeded), and `fleetgen job status` says so
    rather than sending the member to a platform engineer."""
    stack, fleet, _ = twin
    who = _member(stack, fleet)
    path, body = _new(deadline_fleet, "runs-on", tmp_path)
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in body["metadata"].get("labels", {})
    for replicated in body["spec"]["replicatedJobs"]:
        meta = replicated["template"]["spec"]["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {}).update({"pod-complete.stage.kwok.x-k8s.io/delay": "600s",
                                                   "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "600s"})
    path.write_text(yaml.safe_dump(body))
    submitted = run(deadline_fleet, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert submitted.code == 0, submitted.err

    def deactivated() -> dict[str, Any] | None:
        workload = workload_of(stack, TEAM, "runs-on")
        evicted = condition(workload, "Evicted")
        return workload if evicted.get("reason") == "DeactivatedDueToMaximumExecutionTimeExceeded" else None

    workload = wait_for(deactivated, 90)
    assert workload is not None, f"not deactivated: {workload_of(stack, TEAM, 'runs-on')}"
    assert workload["spec"].get("maximumExecutionTimeSeconds") == MAX_EXEC
    assert workload["spec"].get("active") is False

    status = run(deadline_fleet, "job", "status", "runs-on", "--namespace", TEAM,
                 "--kubeconfig", str(who.kubeconfig))
    assert status.code == 0, status.err
    assert "Kueue deactivated it: it ran its maximum execution time" in status.out, status.out
    assert "platform engineer" not in status.out, status.out

    explained = run(deadline_fleet, "explain", "team", TEAM).out
    assert f"in dev: batch jobs run at most {MAX_EXEC}s once admitted (every batch job created in its " \
        "namespaces): Kueue then evicts and deactivates the job" in explained, explained
