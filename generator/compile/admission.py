"""Admission policies of a team: what the API server changes or refuses in the team's namespaces.

- The priority classes the team's jobs may use (`allowedPriorities`). Kueue has no per-queue
  restriction on priorities, so a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA
  since Kubernetes 1.30) enforces it in the team's namespaces only.
- The team's `defaultPriority` for every workload that names no class. Kueue's own defaulting
  (feature WorkloadPriorityClassDefaulting, alpha in v0.19) is one class for the whole cluster, so a
  MutatingAdmissionPolicy (GA in Kubernetes 1.36) labels the team's jobs as they are created.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import frameworks_of

ADMISSION = "admissionregistration.k8s.io/v1"


def in_namespaces(names: Iterable[str]) -> dict[str, Any]:
    """A binding's matchResources for exactly `names`: kubernetes.io/metadata.name is set by the API
    server, so no other namespace can match."""
    return {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(names)}]}}


def labelling_policy(name: str, meta_labels: dict[str, str], kinds: Iterable[tuple[str, str]],
                     conditions: list[dict[str, str]], label: str, value: str) -> dict[str, Any]:
    """A MutatingAdmissionPolicy setting `label` to the CEL expression `value` on every object of `kinds`
    (group, resource) created where `conditions` hold: how fleetgen defaults a label Kueue reads."""
    rules: dict[str, set[str]] = {}
    for group, resource in kinds:
        rules.setdefault(group, set()).add(resource)
    return {
        "apiVersion": ADMISSION, "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": meta_labels},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE"], "resources": sorted(found)}
                for group, found in sorted(rules.items())]},
            "matchConditions": conditions,
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": f"Object{{metadata: Object.metadata{{labels: {{'{label}': {value}}}}}}}"}}],
        },
    }


def policy_binding(name: str, meta_labels: dict[str, str], match: dict[str, Any], *,
                   mutating: bool = False) -> dict[str, Any]:
    """The binding of admission policy `name` to the objects `match` selects; a validating one denies."""
    actions = {} if mutating else {"validationActions": ["Deny"]}
    return {"apiVersion": ADMISSION, "kind": f"{'Mutating' if mutating else 'Validating'}AdmissionPolicyBinding",
            "metadata": {"name": name, "labels": meta_labels},
            "spec": {"policyName": name, **actions, "matchResources": match}}
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue adds it to a Workload's priority (feature PriorityBoost; kueue v0.19.2 pkg/util/priority/priority.go:48).
BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
_CEL_SAFE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _cel_string(value: str) -> str:
    """A CEL string literal of a DNS name (the models allow nothing that needs escaping)."""
    if not _CEL_SAFE.fullmatch(value):
        raise ValueError(f"not a DNS name: {value!r}")
    return f"'{value}'"


def _variables(allowed: list[str]) -> list[dict[str, str]]:
    """Named CEL values the validations share: the class label now and before, and a Workload's
    effective priority (its `spec.priority` plus Kueue's priority-boost annotation) now and before."""

    def label(obj: str) -> str:
        return (f"{obj} != null && has({obj}.metadata.labels) && '{PRIORITY_LABEL}' in {obj}.metadata.labels "
                f"? {obj}.metadata.labels['{PRIORITY_LABEL}'] : ''")

    def priority(obj: str) -> str:
        boost = (f"has({obj}.metadata.annotations) && '{BOOST_ANNOTATION}' in {obj}.metadata.annotations "
                 f"? int({obj}.metadata.annotations['{BOOST_ANNOTATION}']) : 0")
        return (f"{obj} != null && variables.workload ? (has({obj}.spec.priority) ? {obj}.spec.priority : 0) "
                f"+ ({boost}) : 0")

    return [
        {"name": "workload", "expression": "request.resource.group == 'kueue.x-k8s.io' && "
                                           "request.resource.resource == 'workloads'"},
        {"name": "label", "expression": label("object")},
        {"name": "oldLabel", "expression": label("oldObject")},
        {"name": "priority", "expression": priority("object")},
        {"name": "oldPriority", "expression": priority("oldObject")},
    ]


def priority_policy(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """The team's allowed priority classes as a policy and its binding to the team's namespaces.

    Two checks. A job naming another class in its label is refused when submitted, with a message
    the submitter can act on. And because Kueue also takes a priority from a pod template's
    `priorityClassName` when the label is absent (kueue v0.19.2 pkg/util/priority/priority.go:91),
    the Workload Kueue creates for any job is refused when its effective priority is above the
    team's highest allowed class in this cluster: no path leads to a higher priority. An update that
    keeps what the object already had passes, so objects from before the policy can still finish."""
    cfg, tcfg = cluster.config, team.config
    if tcfg.allowed_priorities is None:
        return []
    name = f"fleetgen-priorities-{tcfg.name}"
    allowed = sorted(set(tcfg.allowed_priorities))
    values = {p.name: p.value for p in cfg.priorities}
    known = [p for p in allowed if p in values]
    if not known:  # refused by the checks; reached only when loading a base fleet unchecked
        return []
    top = max(known, key=lambda p: (values[p], p))
    ceiling = values[top]
    listed = ", ".join(_cel_string(p) for p in allowed)
    policy = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels(cfg.name, tcfg.name)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                                   "resources": ["*"]}],
            },
            # Only objects naming a class, and Kueue's Workloads: everything else in the namespace is
            # never evaluated, so the policy cannot get in its way.
            "matchConditions": [{"name": "names-a-priority", "expression": (
                "(has(object.metadata.labels) && '" + PRIORITY_LABEL + "' in object.metadata.labels) || "
                "(request.resource.group == 'kueue.x-k8s.io' && request.resource.resource == 'workloads')")}],
            "variables": _variables(allowed),
            "validations": [
                {"expression": f"variables.label == '' || variables.label == variables.oldLabel || "
                               f"variables.label in [{listed}]",
                 "messageExpression": (f"'team {tcfg.name} may use priority classes {', '.join(allowed)}, not ' + "
                                       "variables.label"),
                 "reason": "Forbidden"},
                {"expression": f"variables.priority <= {ceiling} || "
                               "(oldObject != null && variables.priority <= variables.oldPriority)",
                 "messageExpression": (f"'team {tcfg.name} may run workloads up to priority {ceiling} "
                                       f"({top}), not ' + string(variables.priority) + ' (remove priorityClassName "
                                       f"from the pod template, or label the job with one of: {', '.join(allowed)})'"),
                 "reason": "Forbidden"},
            ],
        },
    }
    binding = policy_binding(name, labels(cfg.name, tcfg.name), in_namespaces(tcfg.namespace_names))
    where = team.at("allowedPriorities")
    # Beside the member ClusterRole in teams/, not in the team's folder: cluster-scoped, and owned by the
    # platform team (CODEOWNERS), so widening a team's classes needs the platform's approval.
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]



# Every Kueue integration's kind, and where it keeps pod templates ("[]": each item of a list, "{}":
# each value of a map). Kueue takes a job's priority from its `kueue.x-k8s.io/priority-class` label,
# else from the first pod template naming a priorityClassName (kueue v0.19.2
# pkg/controller/jobframework/reconciler.go:1716-1733): a job naming either keeps its class. An
# AppWrapper's templates are its components' embedded objects (pods, jobs, JobSets, PyTorchJobs and Ray
# clusters are looked into). A TrainJob's are in its training runtime, which a policy cannot read:
# it is always labelled, and a class set only in the runtime gives way to the team's default.
# Deployments' pods take the label from their template, where Kueue's webhook copies it (kueue v0.19.2
# pkg/controller/jobs/deployment/deployment_webhook.go:103-105).
_REPLICAS = ("template", "spec")
INTEGRATION_KINDS: dict[str, tuple[str, str, tuple[tuple[str, ...], ...]]] = {
    "batch/job": ("batch", "jobs", (("spec", "template", "spec"),)),
    "pod": ("", "pods", (("spec",),)),
    "deployment": ("apps", "deployments", (("spec", "template", "spec"),)),
    "statefulset": ("apps", "statefulsets", (("spec", "template", "spec"),)),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets",
                               (("spec", "replicatedJobs", "[]", "template", "spec", "template", "spec"),)),
    "leaderworkerset.x-k8s.io/leaderworkerset": (
        "leaderworkerset.x-k8s.io", "leaderworkersets",
        (("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
         ("spec", "leaderWorkerTemplate", "workerTemplate", "spec"))),
    "ray.io/raycluster": ("ray.io", "rayclusters", (("spec", "headGroupSpec", *_REPLICAS),
                                                    ("spec", "workerGroupSpecs", "[]", *_REPLICAS))),
    "ray.io/rayjob": ("ray.io", "rayjobs", (("spec", "rayClusterSpec", "headGroupSpec", *_REPLICAS),
                                            ("spec", "rayClusterSpec", "workerGroupSpecs", "[]", *_REPLICAS))),
    "ray.io/rayservice": ("ray.io", "rayservices",
                          (("spec", "rayClusterConfig", "headGroupSpec", *_REPLICAS),
                           ("spec", "rayClusterConfig", "workerGroupSpecs", "[]", *_REPLICAS))),
    "kubeflow.org/mpijob": ("kubeflow.org", "mpijobs", (("spec", "mpiReplicaSpecs", "{}", *_REPLICAS),)),
    "kubeflow.org/pytorchjob": ("kubeflow.org", "pytorchjobs", (("spec", "pytorchReplicaSpecs", "{}", *_REPLICAS),)),
    "kubeflow.org/tfjob": ("kubeflow.org", "tfjobs", (("spec", "tfReplicaSpecs", "{}", *_REPLICAS),)),
    "kubeflow.org/xgboostjob": ("kubeflow.org", "xgboostjobs", (("spec", "xgbReplicaSpecs", "{}", *_REPLICAS),)),
    "kubeflow.org/paddlejob": ("kubeflow.org", "paddlejobs", (("spec", "paddleReplicaSpecs", "{}", *_REPLICAS),)),
    "kubeflow.org/jaxjob": ("kubeflow.org", "jaxjobs", (("spec", "jaxReplicaSpecs", "{}", *_REPLICAS),)),
    "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs", ()),
    "workload.codeflare.dev/appwrapper": ("workload.codeflare.dev", "appwrappers", tuple(
        ("spec", "components", "[]", "template", *inner) for inner in (
            ("spec",), ("spec", "template", "spec"), ("spec", "replicatedJobs", "[]", "template", "spec", *_REPLICAS),
            ("spec", "pytorchReplicaSpecs", "{}", *_REPLICAS), ("spec", "headGroupSpec", *_REPLICAS),
            ("spec", "workerGroupSpecs", "[]", *_REPLICAS)))),
}


def _names_class(expr: str, steps: tuple[str, ...], depth: int = 0) -> str:
    """CEL: whether the pod spec(s) at `steps` under `expr` name a priorityClassName."""
    if not steps:
        return f"has({expr}.priorityClassName)"
    step, rest = steps[0], steps[1:]
    if step == "[]":
        var = f"i{depth}"
        return f"{expr}.exists({var}, {_names_class(var, rest, depth + 1)})"
    if step == "{}":
        var = f"k{depth}"
        return f"{expr}.exists({var}, {_names_class(f'{expr}[{var}]', rest, depth + 1)})"
    return f"has({expr}.{step}) && {_names_class(f'{expr}.{step}', rest, depth)}"


def _unclassed(group: str, resource: str, paths: tuple[tuple[str, ...], ...]) -> str:
    """CEL: the request is for this kind and the object's pod templates name no class. A pod that
    something owns is left alone: its owner is the workload (or it is not Kueue's)."""
    parts = [f"request.resource.group == '{group}'", f"request.resource.resource == '{resource}'"]
    parts += [f"!({_names_class('object', path)})" for path in paths]
    if resource == "pods" and group == "":
        parts.append("!has(object.metadata.ownerReferences)")
    return "(" + " && ".join(parts) + ")"


def integration_kinds(cfg: ClusterConfig) -> list[str]:
    """The cluster's Kueue integrations whose kinds the default-priority policy knows, in order."""
    return [f for f in frameworks_of(cfg) if f in INTEGRATION_KINDS]


def default_priority_policy(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """The team's defaultPriority on every workload created in its namespaces that names no class,
    as the `kueue.x-k8s.io/priority-class` label, so Kueue orders and preempts it as the team file
    says instead of at priority 0. Only on creation: a class is the submitter's to change after that
    (Kueue's webhooks check the label's updates). Mutating policies run before webhooks (kubernetes
    v1.36.3 pkg/kubeapiserver/options/plugins.go:114-115), so Kueue's webhooks see the label, and
    the team's ValidatingAdmissionPolicy checks it like any other."""
    cfg, tcfg = cluster.config, team.config
    if tcfg.default_priority is None or not cfg.mutating_policies:
        return []
    kinds = [INTEGRATION_KINDS[f] for f in integration_kinds(cfg)]
    if not kinds:
        return []
    name = f"fleetgen-default-priority-{tcfg.name}"
    policy = labelling_policy(name, labels(cfg.name, tcfg.name), [(group, resource) for group, resource, _ in kinds], [
        {"name": "names-no-class", "expression": (
            f"!(has(object.metadata.labels) && '{PRIORITY_LABEL}' in object.metadata.labels)")},
        {"name": "pod-templates-name-no-class", "expression": " || ".join(
            _unclassed(group, resource, paths) for group, resource, paths in kinds)},
    ], PRIORITY_LABEL, _cel_string(tcfg.default_priority))
    binding = policy_binding(name, labels(cfg.name, tcfg.name), in_namespaces(tcfg.namespace_names), mutating=True)
    where = team.at("defaultPriority")
    # Beside the priority policy, not in the team's folder: a cluster-scoped policy that rewrites objects
    # is the platform team's to own (CODEOWNERS), and tenancy allows a team's folder no such kind.
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]


def compile_admission(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every team's admission policies in the cluster."""
    return [m for team in teams for m in [*priority_policy(cluster, team), *default_priority_policy(cluster, team)]]
