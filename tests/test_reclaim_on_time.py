"""Issue 53: a reclaim completes within the reclaim deadline, and a team's own shorter deadline holds in
its namespaces only; judged by the real API server, Kueue v0.19.2, kube-scheduler and kwok (the twin).

The fleet is the example one with dev made exact (8 L4 GPUs, 8 held: the example over-commits dev,
where a reclaim would not free what the lender asks for): speech holds 4 and lends them all, ml-research
holds 4 and may borrow, nobody else is in dev. Dev caps grace periods at CAP s; speech caps its own at
SPEECH_CAP s (`policy.maxTerminationGracePeriodSeconds`), so its profiles' pods stop within that.

The borrower's pods ignore SIGTERM (twin.IGNORES_SIGTERM): kwok ends them only when their grace period
ends, as a kubelet kills such a program, and kube-scheduler counts a pod's GPUs until it is terminal
(kubernetes v1.36.3 pkg/scheduler/scheduler.go:657-660 watches non-terminal pods only). Without that
annotation kwok ends a deleted pod at a random point within its grace period, and a reclaim would look
quicker than a real borrower can make it."""

from __future__ import annotations

import shutil
import time
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
from tests.upstream.twin import IGNORES_SIGTERM, Twin, bound_pods, pods

pytestmark = pytest.mark.upstream

CAP, SPEECH_CAP = 30, 10
LENDER, BORROWER = "speech", "ml-research"
REACTION = 20
"""Seconds a reclaim may take beyond the borrower's grace period: Kueue preempting and re-admitting
(a few seconds on the twin) and kube-scheduler retrying the lender's pods that found the GPUs still
held, after at most its podMaxBackoffSeconds, 10 (kubernetes v1.36.3
pkg/scheduler/apis/config/v1/defaults.go:164-165)."""

BORROWER_PROFILE = f"""jobProfiles:
  # Both dev L4 nodes: 4 GPUs of its own and the 4 speech lends. Its program ignores SIGTERM.
  - name: l4-borrow
    cluster: dev
    pool: l4
    nodes: 2
    gpusPerNode: 4
    image: ghcr.io/acme/llm-train:2026.11.1
    command: [python, train.py]
    terminationGracePeriodSeconds: {CAP}
"""


@pytest.fixture(scope="module")
def reclaim_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reclaim-fleet")
    for name in ("teams", "clusters", "rendered"):
        shutil.copytree(REPO / name, root / name)
    edit(root, "clusters/dev.yaml", "kueue:\n  version: v0.15.2\n",
         f"kueue:\n  version: v0.15.2\n  maxTerminationGracePeriodSeconds: {CAP}\n")
    edit(root, "clusters/dev.yaml", "overcommit: 2\n", "")
    edit(root, "teams/speech.yaml", "l4: {gpus: 6, lendingLimit: 2}", "l4: {gpus: 4}")
    edit(root, "teams/speech.yaml", "defaultPriority: standard\n",
         f"defaultPriority: standard\npolicy: {{maxTerminationGracePeriodSeconds: {SPEECH_CAP}}}\n")
    for memory in ("16Gi", "8Gi"):
        edit(root, "teams/speech.yaml", f"    sharedMemory: {memory}\n",
             f"    sharedMemory: {memory}\n    terminationGracePeriodSeconds: {SPEECH_CAP}\n")
    edit(root, "teams/ml-research.yaml", "jobProfiles:\n", BORROWER_PROFILE)
    edit(root, "teams/vision.yaml", "  dev:\n    l4: {gpus: 2}\n", "")
    edit(root, "teams/platform-ci.yaml", "  dev:\n    l4: {gpus: 2, borrowingLimit: 4}\n", "")
    rendered = run(root, "render")
    assert rendered.code == 0, rendered.err
    return root


@pytest.fixture(scope="module")
def twin(reclaim_fleet: Path, upstream_etcd: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    from tests.upstream.twin import running_twin

    with running_twin("dev", upstream_etcd, tmp_path_factory.mktemp("twin-reclaim"), root=reclaim_fleet) as running:
        yield running


def _job(root: Path, stack: Stack, fleet: Fleet, team: str, profile: str, name: str, tmp_path: Path,
         grace: int | None = None, annotations: dict[str, str] | None = None,
         dry_run: bool = False) -> tuple[Any, Any]:
    """`fleetgen job new` then `job submit` as a member of `team`; `grace` and pod `annotations` edited
    into every pod template first."""
    who = stack.identity(f"reclaim-member@{team}.test", (fleet.teams[team].config.members.groups[0],))
    path = tmp_path / f"{name}.yaml"
    made = run(root, "job", "new", team, profile, "--name", name, "-o", str(path))
    assert made.code == 0, made.err
    body = yaml.safe_load(path.read_text())
    for replicated in body["spec"]["replicatedJobs"]:
        template = replicated["template"]["spec"]["template"]
        if grace is not None:
            template["spec"]["terminationGracePeriodSeconds"] = grace
        if annotations:
            template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    path.write_text(yaml.safe_dump(body))
    return who, run(root, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig),
                    *(["--dry-run"] if dry_run else []))


def test_a_reclaim_completes_within_the_deadline_explain_states(
        twin: tuple[Stack, Fleet, Twin], reclaim_fleet: Path, tmp_path: Path) -> None:
    """Intent: a team that lends its GPUs gets them back within the deadline `explain` states, whatever
    the borrower does. ml-research's job takes all 8 GPUs, 4 of them speech's, with pods that stop
    only when killed at the end of their grace period (CAP s, the most dev allows). Speech submits a
    4-GPU job: Kueue preempts the borrower (reclamation within the cohort), and speech's pods are
    bound to nodes within CAP s plus Kueue's and kube-scheduler's reaction (REACTION s) of the
    submission, no earlier than the borrower's pods could stop; `explain team speech` says "a reclaim
    takes at most CAP s"."""
    stack, fleet, _ = twin
    long_run = {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
                "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s"}
    _, borrowed = _job(reclaim_fleet, stack, fleet, BORROWER, "l4-borrow", "borrows", tmp_path,
                       annotations={**long_run, **IGNORES_SIGTERM})
    assert borrowed.code == 0, borrowed.err
    held = bound_pods(stack, BORROWER, "borrows", 2)
    assert held, f"the borrower's pods were not bound: {workload_of(stack, BORROWER, 'borrows')}"
    assert {p.spec.termination_grace_period_seconds for p in held} == {CAP}
    assert wait_for(lambda: all(p.status.phase == "Running"
                                for p in pods(stack, BORROWER, "jobset.sigs.k8s.io/jobset-name=borrows")), 60)

    started = time.monotonic()
    _, lent = _job(reclaim_fleet, stack, fleet, LENDER, "asr-2node", "reclaims", tmp_path)
    assert lent.code == 0, lent.err
    # Kueue admits the lender at once (the borrower's job is stopped, its quota released); the wait
    # that follows is for the GPUs the borrower's pods still hold.
    assert wait_for(lambda: condition(workload_of(stack, LENDER, "reclaims"), "QuotaReserved").get("status")
                    == "True", REACTION), workload_of(stack, LENDER, "reclaims")
    bound = bound_pods(stack, LENDER, "reclaims", 2, seconds=CAP + REACTION - (time.monotonic() - started))
    took = time.monotonic() - started

    preempted = condition(workload_of(stack, BORROWER, "borrows"), "Preempted")
    assert preempted.get("status") == "True", workload_of(stack, BORROWER, "borrows")
    # dev shares by fair sharing; a preemptor within its nominal quota reclaims (kueue v0.19.2
    # pkg/scheduler/preemption/preemption.go:411-417).
    assert preempted.get("reason") == "InCohortReclamation", preempted
    assert f"preemptor path: /dev/{LENDER}" in preempted.get("message", ""), preempted
    assert bound, f"speech's pods were not bound within {CAP + REACTION} s of its submission: " \
        f"{[p.status.conditions for p in pods(stack, LENDER, 'jobset.sigs.k8s.io/jobset-name=reclaims')]}"
    # The borrower's pods held the GPUs for their whole grace period: the wait was the deadline's.
    assert took >= CAP - 2, f"bound after {took:.0f} s, before the borrower's pods could have stopped"

    explained = run(reclaim_fleet, "explain", "team", LENDER).out
    assert f"a reclaim takes at most {CAP} s plus Kueue's and the scheduler's reaction" in explained, explained


def test_a_teams_own_shorter_cap_holds_in_its_namespaces_only(
        twin: tuple[Stack, Fleet, Twin], reclaim_fleet: Path, tmp_path: Path) -> None:
    """Intent: a team may shorten the reclaim deadline for its own pods only. Speech sets 10 s: a
    member's JobSet (and a bare Pod) with a 20 s grace period, within dev's 30, is refused in speech's
    namespace with speech's cap; the same in ml-research's namespace is accepted."""
    stack, fleet, _ = twin
    speech, refused = _job(reclaim_fleet, stack, fleet, LENDER, "asr-2node", "twenty", tmp_path, grace=20)
    assert refused.code != 0, "the API server accepted a 20 s grace period in speech's namespace"
    assert f"terminationGracePeriodSeconds in namespace {LENDER} is at most {SPEECH_CAP}" in refused.err, refused.err
    _, accepted = _job(reclaim_fleet, stack, fleet, BORROWER, "l4-borrow", "twenty", tmp_path, grace=20,
                       dry_run=True)
    assert accepted.code == 0, accepted.err

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    research = stack.identity(f"reclaim-member@{BORROWER}.test", (fleet.teams[BORROWER].config.members.groups[0],))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "twenty"},
           "spec": {"terminationGracePeriodSeconds": 20,
                    "containers": [{"name": "c", "image": "registry.example/x:1"}]}}
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(config.new_client_from_config(str(speech.kubeconfig))).create_namespaced_pod(
            LENDER, pod, dry_run="All")
    assert f"is at most {SPEECH_CAP}" in str(caught.value.body), caught.value.body
    client.CoreV1Api(config.new_client_from_config(str(research.kubeconfig))).create_namespaced_pod(
        BORROWER, pod, dry_run="All")

    explained = run(reclaim_fleet, "explain", "team", LENDER).out
    assert f"its own pods get at most {SPEECH_CAP} s" in explained, explained
