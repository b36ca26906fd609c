"""The rendered SkyPilot tasks and configs as SkyPilot 0.14.1 itself reads them.

SkyPilot runs in its own environment (tests/upstream/pyenvs.py): its Task parser and schemas, its
config resolution (which queue and namespace a launch would use) and its GPU naming from the
nodes' nvidia.com/gpu.product labels, against what fleetgen renders.
"""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator import quantity
from generator.checks import load_fleet
from generator.kinds import kind_of
from generator.kinds.jobset import jobset
from generator.kinds.podspec import PODSET_GROUP
from generator.kinds.skypilot import REMOTE_IDENTITY, skypilot_accelerator
from tests.conftest import REPO
from tests.upstream import pyenvs

pytestmark = pytest.mark.upstream

PROBE = '''
import json, os, sys
import sky
from sky import skypilot_config
from sky.provision.kubernetes.utils import GFDLabelFormatter
from sky.server import plugins
from sky.utils import common_utils, schemas

# Validate as the API server does: strict once its plugins (none here) are loaded
# (sky/utils/schemas.py:64-76); a client lets unknown task config keys through to the server.
plugins.load_plugins(None)
request = json.load(sys.stdin)
out = {"tasks": {}, "configs": {}, "gpus": {}, "refused": {}}
for path in request["tasks"]:
    task = sky.Task.from_yaml(path)
    [resources] = list(task.resources)
    overrides = resources.cluster_config_overrides
    out["tasks"][path] = {
        "nodes": task.num_nodes, "accelerators": resources.accelerators, "cloud": str(resources.cloud),
        "queue": skypilot_config.get_effective_queue_name(cloud="kubernetes", region=None,
                                                          override_configs=overrides),
        "pod_config": overrides["kubernetes"].get("pod_config"), "run": task.run,
        "cpus": resources.cpus, "memory": resources.memory}
for path in request["configs"]:
    with open(path) as f:
        import yaml
        config = yaml.safe_load(f)
    common_utils.validate_schema(config, schemas.get_config_schema(), "Invalid config YAML: ")
    with skypilot_config.override_skypilot_config(config):
        out["configs"][path] = {
            "namespace": skypilot_config.get_effective_namespace(cloud="kubernetes", region=None),
            "remote_identity": skypilot_config.get_effective_workspace_region_config(
                cloud="kubernetes", region=None, keys=("remote_identity",),
                default_value=schemas.get_default_remote_identity("kubernetes"))}
for product in request["products"]:
    out["gpus"][product] = GFDLabelFormatter.get_accelerator_from_label_value(product)
for name, text in request["refuse"].items():
    try:
        sky.Task.from_yaml_config(yaml.safe_load(text))
    except Exception as exc:
        out["refused"][name] = str(exc)
json.dump(out, sys.stdout)
'''
PRODUCTS = ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe", "NVIDIA-H100-NVL", "NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e",
            "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB", "NVIDIA-A100-80GB-PCIe",
            "NVIDIA-L4", "NVIDIA-L40S", "NVIDIA-L40", "NVIDIA-B200", "NVIDIA-GB200", "NVIDIA-A10G", "Tesla-T4",
            "Tesla-V100-SXM2-16GB", "Tesla-V100-SXM2-32GB", "NVIDIA-RTX-A6000", "NVIDIA-GeForce-RTX-4090",
            "NVIDIA-RTX-6000-Ada-Generation"]
"""GPU Feature Discovery's product labels seen on real nodes, beyond the example fleet's pools."""


@pytest.fixture(scope="module")
def sky_python() -> Path:
    return pyenvs.required("skypilot", "SkyPilot")


def probe(python: Path, tmp_path: Path, request: dict[str, Any]) -> dict[str, Any]:
    # An empty HOME: no user's ~/.sky/config.yaml takes part.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
           "IS_SKYPILOT_SERVER": "1"}
    result = subprocess.run([str(python), "-c", PROBE], input=json.dumps(request), capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


@pytest.fixture(scope="module")
def seen(sky_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet = load_fleet(REPO)
    products = sorted({p.gpu.product for c in fleet.clusters.values() for p in c.config.node_pools} | set(PRODUCTS))
    task_in_config = yaml.safe_dump({"name": "x", "run": "true", "config": {"kubernetes": {"namespace": "other"}}})
    return probe(sky_python, tmp_path_factory.mktemp("sky"), {
        "tasks": [str(p) for p in sorted((REPO / "rendered").glob("*/templates/*/*.sky.yaml"))],
        "configs": [str(p) for p in sorted((REPO / "rendered").glob("*/templates/*/skypilot-config.yaml"))],
        "products": products, "refuse": {"namespace-in-task": task_in_config}})


def test_every_task_parses_and_launches_into_its_team_queue_as_one_gang(seen: dict[str, Any]) -> None:
    fleet = load_fleet(REPO)
    profiles = sum(kind_of(p.kind).skypilot for t in fleet.teams.values() for p in t.config.job_profiles)
    assert profiles >= 4 and len(seen["tasks"]) == profiles  # one task per profile of a batch program, none missed
    for path, task in seen["tasks"].items():
        team, profile = Path(path).parent.name, Path(path).name.removesuffix(".sky.yaml")
        found = next(p for p in fleet.teams[team].config.job_profiles if p.name == profile)
        pool = fleet.clusters[found.cluster].config.pool(found.pool)
        assert pool is not None
        assert task["nodes"] == found.nodes and task["cloud"] == "Kubernetes"
        # The queue in SkyPilot's config is what makes it label the pods as one Kueue pod group.
        assert task["queue"] == team
        assert task["accelerators"] == {skypilot_accelerator(pool.gpu.product): found.gpus_per_node or
                                        pool.gpu.per_node}
        assert task["pod_config"]["spec"]["nodeSelector"] == pool.node_labels
        assert "--no-python" in task["run"]
        # The pod the JobSet kind renders for the same profile: its topology annotations and CPU and memory
        # go into SkyPilot's container and pod; SkyPilot's own sizing is the same, to its 0.1 precision.
        fleet_team, cluster = fleet.teams[team].config, fleet.clusters[found.cluster].config
        pod = jobset(fleet_team, cluster, found)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        expected = dict((pod.get("metadata") or {}).get("annotations", {}))
        expected.pop(PODSET_GROUP, None)  # a JobSet's leader and workers are two pod sets; SkyPilot's pods one
        assert (task["pod_config"].get("metadata") or {}).get("annotations", {}) == expected
        (container,) = task["pod_config"]["spec"]["containers"]
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert container["name"] == "ray-node" and container["resources"]["requests"] == {
            "cpu": requests["cpu"], "memory": requests["memory"]}
        assert 0 <= quantity.value_of(requests["cpu"]) - Decimal(str(task["cpus"])) < Decimal("0.1")
        assert 0 <= quantity.value_of(requests["memory"]) / 10**9 - Decimal(str(task["memory"])) < Decimal("0.1")


def test_team_configs_set_the_namespace_no_task_can_and_a_service_account(seen: dict[str, Any]) -> None:
    assert len(seen["configs"]) == 4
    for path, config in seen["configs"].items():
        team = Path(path).parent.name
        assert config == {"namespace": load_fleet(REPO).teams[team].config.namespace_names[0],
                          "remote_identity": REMOTE_IDENTITY}  # no SkyPilot-made Role (test_client_skypilot)
    # Why a separate file: SkyPilot's API server refuses a namespace in a task's config.
    assert "unsupported field 'namespace'" in seen["refused"]["namespace-in-task"]


def test_accelerator_names_match_skypilots_own(seen: dict[str, Any]) -> None:
    mismatched = {product: (skypilot_accelerator(product), theirs) for product, theirs in seen["gpus"].items()
                  if skypilot_accelerator(product) != theirs}
    assert mismatched == {}, "(ours, SkyPilot's): " + json.dumps(mismatched)
