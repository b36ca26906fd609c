"""Deadlines in team namespaces, enforced by the API server: how long a reclaim may take, and how long
a team's batch jobs may run.

- `fleetgen-reclaim-deadline` (one per cluster): no pod in a team namespace, nor any pod template of
  a kind that makes pods, may have a `terminationGracePeriodSeconds` above the cap
  (`kueue.maxTerminationGracePeriodSeconds`, or a team's lower `policy` value in its namespaces).
  Kueue stops a preempted job at once and releases its quota once the job reports no active pods
  (kueue v0.19.2 pkg/controller/jobframework/reconciler.go:580-616), but its pods hold their nodes'
  GPUs until they have stopped: the cap bounds how long a lender waits for what it lent. Pods are
  checked whoever creates them (a controller's pods of a kind not listed here are refused too); the
  kinds' templates are checked so that a member's `kubectl apply` is refused at once, with a
  message, rather than its controller failing to make pods.
- `fleetgen-max-exec-<team>`: the team's `maxExecutionTime` as Kueue's
  `kueue.x-k8s.io/max-exec-time-seconds` label, which Kueue copies into the Workload's
  `maximumExecutionTimeSeconds` (kueue v0.19.2 pkg/controller/jobframework/utils.go:192-200,
  workload built at :279) and enforces by deactivating the Workload once it has run that long
  admitted (pkg/controller/core/workload_controller.go:905-943). A MutatingAdmissionPolicy
  (Kubernetes 1.36 on) gives the label to every batch job created without it or with a longer one;
  a ValidatingAdmissionPolicy refuses a longer one, and its removal, everywhere. Kueue itself keeps
  the label fixed while the job runs (pkg/controller/jobframework/validation.go:249-257).
"""

from __future__ import annotations

from typing import Any

from generator.compile.admission import ADMISSION, INTEGRATION_KINDS, in_namespaces, labelling_policy, policy_binding
from generator.compile.manifest import Manifest, labels
from generator.compile.namespace_policies import TEAM_NAMESPACES
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import frameworks_of

GRACE_POLICY = "fleetgen-reclaim-deadline"
KUBERNETES_GRACE_SECONDS = 30
"""A pod's terminationGracePeriodSeconds when it sets none (kubernetes v1.36.3
pkg/apis/core/v1/defaults.go sets DefaultTerminationGracePeriodSeconds, 30)."""
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

_TEMPLATE = ("spec", "template", "spec")
BUILTIN_POD_KINDS: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    ("batch", "cronjobs", (("spec", "jobTemplate", "spec", "template", "spec"),)),
    ("apps", "daemonsets", (_TEMPLATE,)),
    ("apps", "replicasets", (_TEMPLATE,)),
    ("", "replicationcontrollers", (_TEMPLATE,)),
    ("", "podtemplates", (("template", "spec"),)),
)
"""Kinds beyond Kueue's integrations that `edit` lets a member create and that carry pod templates
(kubernetes v1.36.3 plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go:160-186)."""
GRACE_KINDS = tuple(sorted({(g, r, p) for g, r, p in INTEGRATION_KINDS.values() if p} | set(BUILTIN_POD_KINDS)))
"""Every kind whose pod templates the reclaim deadline checks: (group, resource, pod spec paths)."""

BATCH_FRAMEWORKS = ("batch/job", "pod", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster",
                    "kubeflow.org/mpijob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob",
                    "kubeflow.org/paddlejob", "kubeflow.org/jaxjob", "trainer.kubeflow.org/trainjob",
                    "workload.codeflare.dev/appwrapper")
"""Kueue's integrations that run to an end (or, a RayCluster, hold quota until deleted): a team's
maxExecutionTime applies to them. Servers (Deployment, StatefulSet, LeaderWorkerSet, RayService)
are meant to run on."""


def _all_specs(expr: str, steps: tuple[str, ...], depth: int = 0) -> str:
    """CEL: every pod spec at `steps` under `expr` has a grace period within `variables.cap`."""
    if not steps:
        return f"{expr}.?terminationGracePeriodSeconds.orValue({KUBERNETES_GRACE_SECONDS}) <= variables.cap"
    step, rest = steps[0], steps[1:]
    if step == "[]":
        var = f"i{depth}"
        return f"{expr}.all({var}, {_all_specs(var, rest, depth + 1)})"
    if step == "{}":
        var = f"k{depth}"
        return f"{expr}.all({var}, {_all_specs(f'{expr}[{var}]', rest, depth + 1)})"
    return f"(!has({expr}.{step}) || {_all_specs(f'{expr}.{step}', rest, depth)})"


def _within(obj: str) -> str:
    """CEL: `obj` (the request's object, of whichever listed kind) keeps every grace within the cap."""
    chain = [f"request.resource.group == '{g}' && request.resource.resource == '{r}' ? "
             f"({' && '.join(_all_specs(obj, path) for path in paths)}) : " for g, r, paths in GRACE_KINDS]
    return f"{obj} != null && (" + "".join(chain) + "true)"


def _rules(kinds: list[tuple[str, str]], operations: list[str]) -> list[dict[str, Any]]:
    by_group: dict[str, set[str]] = {}
    for group, resource in kinds:
        by_group.setdefault(group, set()).add(resource)
    return [{"apiGroups": [g], "apiVersions": ["*"], "operations": operations, "resources": sorted(r)}
            for g, r in sorted(by_group.items())]


def grace_policy(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The reclaim deadline and its binding to every team namespace. An update that leaves an object
    over the cap passes only when it was over before (objects from before the policy can finish)."""
    cfg = cluster.config
    cap = cfg.kueue.max_termination_grace_period_seconds
    own = {ns: t.config.grace_cap_in(cfg) for t in teams for ns in t.config.namespace_names
           if t.config.grace_cap_in(cfg) != cap}
    caps = "{" + ", ".join(f"'{ns}': {value}" for ns, value in sorted(own.items())) + "}"
    policy = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": GRACE_POLICY, "labels": labels(cfg.name)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules([(g, r) for g, r, _ in GRACE_KINDS], ["CREATE", "UPDATE"])},
            "variables": [{"name": "cap", "expression": f"request.namespace in {caps} ? {caps}[request.namespace] "
                                                        f": {cap}" if own else str(cap)}],
            "validations": [{
                "expression": f"{_within('object')} || (oldObject != null && !({_within('oldObject')}))",
                "messageExpression": (
                    "'terminationGracePeriodSeconds in namespace ' + request.namespace + ' is at most ' + "
                    "string(variables.cap) + ' (a pod that sets none has 30): when a team reclaims GPUs it lent, "
                    "Kueue waits for the borrowing pods to stop, and the cluster bounds that wait "
                    "(kueue.maxTerminationGracePeriodSeconds); lower it in every pod template of this ' + "
                    "request.kind.kind"),
                "reason": "Forbidden"}],
        },
    }
    binding = policy_binding(GRACE_POLICY, labels(cfg.name), TEAM_NAMESPACES)
    where = cluster.at("kueue", "maxTerminationGracePeriodSeconds")
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]


def batch_kinds(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """(group, resource) of the cluster's Kueue integrations a team's maxExecutionTime limits."""
    return [INTEGRATION_KINDS[f][:2] for f in frameworks_of(cfg) if f in BATCH_FRAMEWORKS and f in INTEGRATION_KINDS]


def _label(obj: str) -> str:
    return f"{obj} != null ? {obj}.metadata.?labels[?'{MAX_EXEC_LABEL}'].orValue('') : ''"


def max_exec_policies(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """The team's maxExecutionTime on its batch jobs: labelled on creation (1.36 on), and no longer
    label accepted, on creation or update."""
    cfg, tcfg = cluster.config, team.config
    limit = tcfg.max_execution_seconds
    kinds = batch_kinds(cfg)
    if limit is None or not kinds:
        return []
    name = f"fleetgen-max-exec-{tcfg.name}"

    def meta() -> dict[str, Any]:
        return {"name": name, "labels": labels(cfg.name, tcfg.name)}

    longer = f"!variables.label.matches('^[0-9]{{1,10}}$') || int(variables.label) > {limit}"
    validating = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy", "metadata": meta(),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules(kinds, ["CREATE", "UPDATE"])},
            "matchConditions": [{"name": "has-or-had-the-label",
                                 "expression": f"({_label('object')}) != '' || ({_label('oldObject')}) != ''"}],
            "variables": [{"name": "label", "expression": _label("object")},
                          {"name": "oldLabel", "expression": _label("oldObject")}],
            "validations": [{
                "expression": f"(variables.label != '' && !({longer})) || variables.label == variables.oldLabel",
                "messageExpression": (f"'team {tcfg.name} runs batch jobs for at most {limit} s (maxExecutionTime "
                                      f"{tcfg.max_execution_time} in its team file): label {MAX_EXEC_LABEL} must be "
                                      f"a number of seconds up to {limit}, not \"' + variables.label + '\"'"),
                "reason": "Forbidden"}],
        },
    }
    out = [validating, policy_binding(name, labels(cfg.name, tcfg.name), in_namespaces(tcfg.namespace_names))]
    if cfg.mutating_policies:
        # A pod something owns is part of its owner's job (or not Kueue's): left alone.
        out += [labelling_policy(name, labels(cfg.name, tcfg.name), kinds, [
            {"name": "standalone", "expression": (
                "!(request.resource.resource == 'pods' && has(object.metadata.ownerReferences))")},
            {"name": "no-label-or-a-longer-one", "expression": longer.replace("variables.label",
                                                                              f"({_label('object')})")},
        ], MAX_EXEC_LABEL, f"'{limit}'"),
            policy_binding(name, labels(cfg.name, tcfg.name), in_namespaces(tcfg.namespace_names), mutating=True)]
    where = team.at("maxExecutionTime")
    # Beside the other admission policies in teams/: cluster-scoped, the platform team's (CODEOWNERS).
    return [Manifest(("teams",), body, where) for body in out]


def compile_deadlines(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The cluster's reclaim deadline and every team's maximum execution time."""
    return [*grace_policy(cluster, teams), *(m for team in teams for m in max_exec_policies(cluster, team))]
