"""Minimal objects of every kind Kueue integrates (generator.compile.admission.INTEGRATION_KINDS), with a
pod template at each of the kind's template paths, and where the CRD of each kind that needs one comes from:
for the tests that create every kind on the real API server to see what the rendered admission policies do
to it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from generator.compile.admission import INTEGRATION_KINDS

KIND_CRDS = {
    # Each kind's CRD as the Kueue module the tests build requires it (tests/upstream/go.mod).
    "jobset.x-k8s.io/jobset": ("sigs.k8s.io/jobset", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    "ray.io/raycluster": ("github.com/ray-project/kuberay/ray-operator", "config/crd/bases/ray.io_rayclusters.yaml"),
    "ray.io/rayjob": ("github.com/ray-project/kuberay/ray-operator", "config/crd/bases/ray.io_rayjobs.yaml"),
    "ray.io/rayservice": ("github.com/ray-project/kuberay/ray-operator", "config/crd/bases/ray.io_rayservices.yaml"),
    "leaderworkerset.x-k8s.io/leaderworkerset": (
        "sigs.k8s.io/lws", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
    "kubeflow.org/mpijob": ("github.com/kubeflow/mpi-operator", "manifests/base/kubeflow.org_mpijobs.yaml"),
    **{f"kubeflow.org/{kind}": ("github.com/kubeflow/training-operator",
                                f"manifests/base/crds/kubeflow.org_{kind}s.yaml")
       for kind in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")},
    "trainer.kubeflow.org/trainjob": ("github.com/kubeflow/trainer/v2",
                                      "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml"),
    "workload.codeflare.dev/appwrapper": (
        "github.com/project-codeflare/appwrapper", "config/crd/bases/workload.codeflare.dev_appwrappers.yaml"),
}
"""The kinds the policy names that an API server serves only with their controller's CRD."""
FIXED = {"trainer.kubeflow.org/trainjob": {"runtimeRef": {"name": "torch-distributed"}}}
"""A kind without a pod template of its own (its training runtime has them)."""
BUILT_IN = {"batch/job": ("batch/v1", "Job"), "pod": ("v1", "Pod"), "deployment": ("apps/v1", "Deployment"),
            "statefulset": ("apps/v1", "StatefulSet")}
POD: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.example/x:1"}]}
"""The plainest pod spec: one container, no resources, no priority class."""


def template_at(steps: tuple[str, ...], pod: dict[str, Any], within: str = "") -> Any:
    """The object fragment that holds `pod` at `steps` ("[]": a one-element list, "{}": a map with a
    `Worker` entry), with the keys Ray's worker groups and JobSet's replicated jobs require."""
    if not steps:
        return copy.deepcopy(pod)
    step, rest = steps[0], steps[1:]
    if step == "[]":
        item = template_at(rest, pod)
        merge(item, {"workerGroupSpecs": {"groupName": "w", "minReplicas": 0, "maxReplicas": 1},
                     "replicatedJobs": {"name": "w"},  # an embedded object is an object: kind and name
                     "components": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}},
                     }.get(within, {}))
        return [item]
    if step == "{}":
        return {"Worker": template_at(rest, pod)}
    return {step: template_at(rest, pod, step)}


def merge(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """`more` merged into `into`: maps key by key, one-element lists item into item."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):  # one element each: one item
            merge(into[key][0], value[0])
        else:
            into[key] = value
    return into


def object_of_kind(framework: str, crd: dict[str, Any] | None, pod_at: Callable[[int], dict[str, Any]],
                   metadata: dict[str, Any]) -> dict[str, Any]:
    """A minimal object of the kind with a pod template at each of its template paths, `pod_at(i)` at path
    number i; its apiVersion and kind from `crd` (the built-in kinds' without one)."""
    group, _, paths = INTEGRATION_KINDS[framework]
    body: dict[str, Any] = {"spec": copy.deepcopy(FIXED.get(framework, {}))}
    for i, path in enumerate(paths):
        merge(body, template_at(path, pod_at(i)))
    if framework == "batch/job":
        body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    if framework in ("deployment", "statefulset"):
        body["spec"]["selector"] = {"matchLabels": {"app": "a"}}
        body["spec"]["template"]["metadata"] = {"labels": {"app": "a"}}
    if crd is None:
        api_version, kind = BUILT_IN[framework]
    else:
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        api_version, kind = f"{group}/{version}", crd["spec"]["names"]["kind"]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def classed_object(framework: str, crd: dict[str, Any] | None, classed: int | None) -> dict[str, Any]:
    """A minimal object of the kind with a pod template at each of its template paths; the one at
    path number `classed` names a priority class."""
    return object_of_kind(framework, crd, lambda i: {**POD, "priorityClassName": "high"} if i == classed else POD,
                          {"generateName": "dp-"})
