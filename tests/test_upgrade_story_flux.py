"""Issue 57: the Kueue upgrade of docs/operations/upgrade-the-platform.md under a live engine.

dev, as the example has it (Kueue v0.15.2, Flux), bootstrapped from git on the fleet twin as
docs/how-to/gitops.md says, with monitoring off (not part of this story). Flux's controllers install
Kueue's and JobSet's charts from the twin's chart mirror and `Managers` runs the real manager of the
release each chart's Deployment names. A job is admitted and one waits. Then the pin moves to v0.19.2:
rendered, committed, pushed. Flux upgrades the HelmRelease (its CRDs replaced, CreateReplace), the
Deployment's new image rolls the manager to v0.19.2's build, and the fleet's Kueue objects, now
kueue.x-k8s.io/v1beta2, follow. What was admitted stays admitted, what waited still waits, every queue
is active, no Workload is orphaned, and the new release admits on the same quota.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from generator.checks import load_fleet
from tests.conftest import edit, run
from tests.gitops_fleet import CONTROLLERS, SERVICE_RANGE, _fleet_repo, _flux_names, _flux_ready, _git, mirror_for
from tests.upgrade_checks import assert_work_kept, job_state, storage
from tests.upstream import pki
from tests.upstream.cluster import Stack
from tests.upstream.fleet import (
    JOBSET,
    apply_all,
    condition,
    create_nodes,
    fake_nodes,
    gpu_jobset,
    stack_nodes,
    volumes,
    workload_of,
)
from tests.upstream.gitops import Flux, GitHost, Managers, chart_mirror, ready
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OLD, NEW = "dev", "ml-research", "v0.15.2", "v0.19.2"


def _kueue_release(flux: Flux) -> tuple[str, bool]:
    """The chart version Flux last installed for Kueue's HelmRelease, and whether it is Ready."""
    found = [r for r in flux.objects("helm.toolkit.fluxcd.io", "v2", "helmreleases")
             if r["metadata"]["name"] == "kueue"]
    if not found:
        return "", False
    history = (found[0].get("status") or {}).get("history") or [{}]
    return str(history[0].get("chartVersion", "")), ready(found[0])


def test_a_kueue_upgrade_under_flux_keeps_admitted_and_waiting_work(upstream_etcd: Any,
                                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    from kubernetes import client

    work = tmp_path_factory.mktemp("upgrade-flux")
    git = GitHost.start(work / "git", pki.ca("twin-git-ca"))
    try:
        fleet = _fleet_repo(work / "fleet", git, CLUSTER, monitoring=False)
        loaded = load_fleet(fleet)
        cluster = loaded.clusters[CLUSTER].config
        assert cluster.kueue.version == OLD
        mirror_for(git, fleet, cluster, ("gpu-operator",))
        chart_mirror(git.charts, {"kueue": NEW})  # a chart repository holds every release, the next one too
        remote = git.create("fleet")
        _git(fleet, "push", "-q", str(remote), "main")
        stack = Stack.start(work / "stack", upstream_etcd, platform=False, service_cidr=SERVICE_RANGE,
                            extra_controllers=CONTROLLERS)
        managers, twin, flux = Managers(stack), None, None
        try:
            create_nodes(stack, [*fake_nodes(cluster), *stack_nodes(cluster)])
            assert not apply_all(stack, volumes(cluster))
            twin = Twin.start(stack)
            managers.start()
            flux = Flux.start(stack, git)
            flux.kubectl("apply", "-k", str(fleet / "rendered/gitops" / CLUSTER))
            names = _flux_names(fleet, CLUSTER)
            done = _flux_ready(flux, names, 600)
            assert len(done) == len(names), f"ready: {done}\n{flux.logs()}\n{managers.logs()}"
            assert managers.rolled["kueue"] == [f"kueue-{OLD}"], managers.rolled  # v0.15.2's own manager

            team = loaded.teams[TEAM].config
            ns, tag = team.namespace_names[0], uuid.uuid4().hex[:5]
            api = client.CustomObjectsApi(stack.client())

            def submit(name: str, pods: int) -> None:
                """A JobSet of `pods` 4-GPU pods, which kwok keeps running for an hour (twin.submit's annotations)."""
                body = gpu_jobset(team, name, pods, 4)
                pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                pod["metadata"] = {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h",
                                                   "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}}
                api.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", body)

            running, waiting = f"running-{tag}", f"waiting-{tag}"
            submit(running, 1)  # 4 GPUs: the team's quota on dev's l4
            assert wait_for(lambda: job_state(stack, ns, running)[1] == "True", 90), workload_of(stack, ns, running)
            submit(waiting, 4)  # 16 GPUs: more than the pool, so it waits
            assert wait_for(lambda: condition(workload_of(stack, ns, waiting), "QuotaReserved").get("status")
                            == "False", 90), workload_of(stack, ns, waiting)
            before = {name: job_state(stack, ns, name) for name in (running, waiting)}
            assert storage(stack) == "v1beta1"

            # the upgrade, as the page says: the pin, a render, a commit, a push
            edit(fleet, f"clusters/{CLUSTER}.yaml", f"  version: {OLD}", f"  version: {NEW}")
            assert run(fleet, "render").code == 0
            _git(fleet, "commit", "-q", "-am", f"dev: Kueue {OLD} -> {NEW}")
            pushed = time.monotonic()
            _git(fleet, "push", "-q", str(remote), "main")
            flux.reconcile("source", "git", f"{CLUSTER}-fleet")
            seen: list[tuple[str, ...]] = []

            def watch() -> bool:
                """Every state the admitted job's Workload passes through while the upgrade runs."""
                found = workload_of(stack, ns, running) or {}
                now = tuple(f"{c}={condition(found, c).get('status', '')}/{condition(found, c).get('reason', '')}/"
                            f"{condition(found, c).get('message', '')}"
                            for c in ("QuotaReserved", "Admitted", "Evicted"))
                if not seen or seen[-1] != now:
                    seen.append(now)
                return _kueue_release(flux) == (NEW.removeprefix("v"), True)

            upgraded = wait_for(watch, 300)
            assert upgraded, f"{_kueue_release(flux)}\n{flux.logs()}\n{managers.logs()}"
            assert wait_for(lambda: managers.rolled["kueue"][-1:] == ["kueue"], 120), (managers.rolled,
                                                                                      managers.logs())
            for kustomization in ("kueue", "teams"):
                flux.reconcile("kustomization", f"{CLUSTER}-fleet-{kustomization}")
            again = _flux_ready(flux, names, 300)
            assert len(again) == len(names), f"ready: {again}\n{flux.logs()}\n{managers.logs()}"
            print(f"\nflux: Kueue {OLD} -> {NEW} pushed -> every Kustomization and HelmRelease Ready: "
                  f"{time.monotonic() - pushed:.0f} s")

            assert storage(stack) == "v1beta2"  # the v0.16 change the table's notes name
            wait_for(lambda: watch() and False, 60)  # and a minute of the new release's work after it
            print("admitted job's Workload during the upgrade:", *seen, sep="\n  ")
            assert len(seen) == 1, seen  # admitted throughout, never evicted
            assert_work_kept(stack, ns, before, running, waiting)

            api.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", running)
            submit(f"next-{tag}", 1)
            assert wait_for(lambda: job_state(stack, ns, f"next-{tag}")[1] == "True", 90), \
                workload_of(stack, ns, f"next-{tag}")
        finally:
            for part in (flux, managers, twin):
                if part is not None:
                    part.stop()
            stack.stop()
    finally:
        git.stop()
