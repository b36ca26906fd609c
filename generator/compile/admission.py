"""Admission policies of a team: what the API server refuses in the team's namespaces.

Today one: the priority classes the team's jobs may use (`allowedPriorities`). Kueue has no
per-queue restriction on priorities, so a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
GA since Kubernetes 1.30) enforces it in the team's namespaces only.
"""

from __future__ import annotations

import re
from typing import Any

from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig

ADMISSION = "admissionregistration.k8s.io/v1"
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
    binding: dict[str, Any] = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels(cfg.name, tcfg.name)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            # kubernetes.io/metadata.name is set by the API server: no other namespace can match.
            "matchResources": {"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(tcfg.namespace_names)}]}},
        },
    }
    where = team.at("allowedPriorities")
    # Beside the member ClusterRole in teams/, not in the team's folder: cluster-scoped, and owned by the
    # platform team (CODEOWNERS), so widening a team's classes needs the platform's approval.
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]


def compile_admission(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every team's admission policies in the cluster."""
    return [m for team in teams for m in priority_policy(cluster, team)]
