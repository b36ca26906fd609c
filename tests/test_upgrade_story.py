"""Issue 57: a Kueue upgrade on the fleet twin, as docs/operations/upgrade-the-platform.md says to do it.

dev runs Kueue v0.15.2 (v1beta1 storage). Its file moves to v0.19.2 and is rendered; the cluster gets
the new release as an engine's sync does (its install manifests over the old, the manager restarted with
the rendered Configuration, then the rendered objects, now kueue.x-k8s.io/v1beta2, applied). What was
admitted stays admitted, what waited still waits, every queue stays active, nothing is orphaned, and
the upgraded Kueue admits new work on the same quota.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import edit, run

CLUSTER, TEAM = "dev", "ml-research"


def test_a_kueue_upgrade_keeps_admitted_and_waiting_work_and_every_queue(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    from kubernetes import client

    from tests.upgrade_checks import State, assert_work_kept, job_state, storage
    from tests.upstream.fleet import (
        JOBSET,
        apply_all,
        condition,
        gpu_jobset,
        kustomize_build,
        rendered_kueue_config,
        workload_of,
    )
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import running_twin

    assert run(fleet_root, "render", "--cluster", CLUSTER).code == 0
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp("upgrade"), root=fleet_root, kubelets=False,
                      kueue_tool="kueue-v0.15.2") as (stack, fleet, _):
        team = fleet.teams[TEAM].config
        ns, tag = team.namespace_names[0], uuid.uuid4().hex[:5]
        jobs = client.CustomObjectsApi(stack.client())

        def submit(name: str, pods: int) -> None:
            jobs.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, name, pods, 4))

        def state(name: str) -> State:
            return job_state(stack, ns, name)

        running, waiting = f"running-{tag}", f"waiting-{tag}"
        submit(running, 1)  # 4 GPUs: the team's quota on dev's l4
        assert wait_for(lambda: state(running)[1] == "True", 60), workload_of(stack, ns, running)
        submit(waiting, 4)  # 16 GPUs: more than the whole pool's quotas, so it waits
        assert wait_for(lambda: state(waiting)[0], 60)
        assert wait_for(lambda: condition(workload_of(stack, ns, waiting), "QuotaReserved").get("status") == "False",
                        60), workload_of(stack, ns, waiting)
        before = {name: state(name) for name in (running, waiting)}
        assert stack.processes["kueue"].popen.args[0].endswith("kueue-v0.15.2")
        assert storage(stack) == "v1beta1"

        # the upgrade, as the page says: the pin, a render, the sync
        edit(fleet_root, f"clusters/{CLUSTER}.yaml", "  version: v0.15.2", "  version: v0.19.2")
        assert run(fleet_root, "render", "--cluster", CLUSTER).code == 0
        objects = kustomize_build(fleet_root / "rendered" / CLUSTER)
        stack.upgrade_kueue("kueue", rendered_kueue_config(objects))
        assert not apply_all(stack, objects)

        assert storage(stack) == "v1beta2"  # the v0.16 change the table's notes name
        assert_work_kept(stack, ns, before, running, waiting)

        # the upgraded Kueue admits on the same quota once the running job ends
        jobs.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", running)
        submit(f"next-{tag}", 1)
        assert wait_for(lambda: state(f"next-{tag}")[1] == "True", 60), workload_of(stack, ns, f"next-{tag}")
        assert stack.processes["kueue"].popen.args[0].endswith("/kueue")


def test_a_trainer_upgrade_keeps_trainjobs_and_kueue_admits_on_the_new_release(
        upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """prod-east with `versions.kubeflow-trainer: 2.3.0`, as the upgrade page says to do it, on the real programs:
    Trainer v2.2.1's controller (its chart at the pin) runs a TrainJob of ml-research's `finetune`, admitted by
    Kueue v0.19.2; then v2.3.0's chart is applied over it (its CRDs, now chart templates, and its runtimes, which
    its hook Job applies) and its controller replaces the old one. The admitted TrainJob keeps its Workload and its
    JobSet; a new one is admitted on the same quota, and v2.3.0's controller makes its JobSet, bound to H100."""
    from kubernetes import client

    from tests.conftest import REPO
    from tests.upstream.fleet import condition, custom, fake_nodes, workload_of
    from tests.upstream.operators import TRAINER, TRAINER_VERSION, start_trainer, trainer_crds
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import MANAGED, pods, running_twin

    cluster, profile = "prod-east", "finetune"
    work = tmp_path_factory.mktemp("trainer-upgrade")
    # bound, never run: the first TrainJob stays admitted, its pods on their nodes, through the upgrade
    with running_twin(cluster, upstream_etcd, work, crds=trainer_crds(), kubelets=False) as (stack, fleet, _):
        team = fleet.teams[TEAM].config
        ns = team.namespace_names[0]
        member = custom(stack, stack.client(f"trainer@{TEAM}.test", (team.members.groups[0],)))
        rendered = yaml.safe_load((REPO / "rendered" / cluster / "templates" / TEAM / f"{profile}.trainjob.yaml")
                                  .read_text())

        def submit(name: str) -> None:
            member.create_namespaced_custom_object(TRAINER, TRAINER_VERSION, ns, "trainjobs",
                                                   {**rendered, "metadata": {**rendered["metadata"], "name": name}})

        def admitted(name: str) -> dict[str, Any]:
            found = workload_of(stack, ns, name, "TrainJob") or {}
            return found if condition(found, "Admitted").get("status") == "True" else {}

        def jobset_uid(name: str) -> str:
            try:
                found = custom(stack).get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
            except client.ApiException:
                return ""
            return str(found["metadata"]["uid"])

        tag = uuid.uuid4().hex[:5]
        first, second = f"before-{tag}", f"after-{tag}"
        for release in ("v2.2.1", "v2.3.0"):
            (work / release).mkdir()
        old = start_trainer(stack, work / "v2.2.1")
        try:
            submit(first)
            assert wait_for(lambda: admitted(first) and jobset_uid(first), 90), \
                workload_of(stack, ns, first, "TrainJob")
            before = (admitted(first)["metadata"]["uid"], jobset_uid(first))
        finally:
            old.stop()
        crds = client.ApiextensionsV1Api(stack.client())
        generation = crds.read_custom_resource_definition(f"trainjobs.{TRAINER}").metadata.generation
        new = start_trainer(stack, work / "v2.3.0", version="2.3.0", tool="kubeflow-trainer-v2.3.0")
        try:
            assert new.popen.args[0].endswith("kubeflow-trainer-v2.3.0")
            # v2.3.0's CRDs (chart templates now) replaced v2.2.1's
            assert crds.read_custom_resource_definition(f"trainjobs.{TRAINER}").metadata.generation > generation
            assert (admitted(first).get("metadata", {}).get("uid"), jobset_uid(first)) == before
            submit(second)
            assert wait_for(lambda: admitted(second) and jobset_uid(second), 90), \
                workload_of(stack, ns, second, "TrainJob")
            pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED]
                       for n in fake_nodes(fleet.clusters[cluster].config)}

            def bound() -> list[str]:
                found = [p.spec.node_name for p in pods(stack, ns, f"jobset.sigs.k8s.io/jobset-name={second}")
                         if p.spec.node_name]
                return found if len(found) == 2 else []
            assert sorted(pool_of[n] for n in wait_for(bound, 90) or []) == ["h100", "h100"], bound()
            # still the one admitted before the upgrade, untouched
            assert (admitted(first).get("metadata", {}).get("uid"), jobset_uid(first)) == before
        finally:
            new.stop()
