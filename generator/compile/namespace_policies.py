"""Admission policies on every team namespace: what a member cannot step around with `edit`.

`edit` lets a member create and update pods and write NetworkPolicies in the team's namespaces
(kubernetes v1.36.3 plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go:160-186). Three
ValidatingAdmissionPolicies, enforced by the API server and bound by the label fleetgen puts on
every team Namespace (which members cannot change: Namespaces are cluster-scoped), close what
that leaves open:

- `fleetgen-team-pod-placement`: a pod may not tolerate the health taint, a cordon or every taint,
  on creation nor by adding tolerations later (a pod update may add tolerations), and may not name
  `spec.nodeName` (a pod created bound skips the scheduler, and with it every taint and cordon).
  Binding an existing pod (`pods/binding`) is the scheduler's right, which `edit` lacks.
- `fleetgen-team-egress`: NetworkPolicies are allow-lists that add up, so a member's own policy
  could reopen what fleetgen's leaves out. Every egress peer of any NetworkPolicy in a team
  namespace must be one fleetgen's own policy allows: the namespace's pods, the cluster DNS, or an
  ipBlock inside `egress.allow` that carves out every `egress.deny` range it overlaps (before
  Kubernetes 1.31, whose policies cannot call cidr(), one of fleetgen's own ipBlocks as written).
- `fleetgen-team-objects`: fleetgen's own NetworkPolicies, ResourceQuotas and LimitRanges in team
  namespaces change only through the fleet repository: people (users whose name does not start
  with `system:`), the namespace's own ServiceAccounts (which members can impersonate) and the
  cluster's `allowedSystemSubjects` may not create, change or delete them.
- `fleetgen-team-priorities`: one priority ladder per cluster, the cluster file's `priorities`. Kueue
  gives a job without a `kueue.x-k8s.io/priority-class` label the value of its pod template's
  Kubernetes PriorityClass (kueue v0.19.2 pkg/controller/jobframework/reconciler.go:1716-1733,
  pkg/util/priority/priority.go:91-102), so any PriorityClass of the cluster (`high`: 1,000,000,
  `system-cluster-critical`) would lift a member's job over every team. In every team namespace a
  pod template may name only a class of the ladder, and a pod or Kueue Workload may run only at a
  value of the ladder (or at most its lowest rung, 0 if that is below it): a PriorityClass of a
  ladder's name but another value is refused where Kueue copies it, on the Workload.
- `fleetgen-team-workloads`: members may patch their Workloads for one thing, `spec.active`, the switch
  `kueuectl stop|resume workload` flips (kueue v0.19.2 cmd/kueuectl/app/options/
  update_workload_activation_options.go:104-117). Kueue's own webhook and CRD rules leave the rest
  open while a Workload holds no quota and `spec.priority` always (pkg/webhooks/workload_webhook.go:374-395
  freezes pod sets only under a quota reservation), so a member could lift a job up the ladder, move it
  to another queue or change what it asks for. Nor may a member resume a Workload Kueue deactivated
  itself (its maximum execution time, a rejecting admission check): Kueue drops the time it has run on
  deactivation (pkg/controller/core/workload_controller.go:921-926), so resuming it would grant a whole
  new maximum execution time.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from generator.compile.admission import ADMISSION, BOOST_ANNOTATION, INTEGRATION_KINDS, policy_binding
from generator.compile.manifest import MANAGED_BY, Manifest, labels
from generator.compile.podnetwork import DNS
from generator.config.cluster import ClusterConfig, Egress
from generator.config.fleet import Loaded
from generator.signals import HEALTH_TAINT_KEY

TEAM_NAMESPACE_LABEL = "fleetgen.io/team-namespace"
"""On every team Namespace: the policies' bindings select namespaces by it."""
TEAM_NAMESPACES = {"namespaceSelector": {"matchLabels": {TEAM_NAMESPACE_LABEL: "true"}}}
"""A binding's matchResources for every team namespace."""
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
FORBIDDEN_TOLERATIONS = (HEALTH_TAINT_KEY, UNSCHEDULABLE_TAINT)
"""Taints a team pod may not tolerate: fleetgen's faulty-GPU taint and the cordon's own."""
PLACEMENT_POLICY = "fleetgen-team-pod-placement"
EGRESS_POLICY = "fleetgen-team-egress"
OBJECTS_POLICY = "fleetgen-team-objects"
ISOLATION_POLICY = "fleetgen-team-isolation"
WORKLOADS_POLICY = "fleetgen-team-workloads"
LADDER_POLICY = "fleetgen-team-priorities"
DNS_LABELS = (DNS["namespaceSelector"]["matchLabels"], DNS["podSelector"]["matchLabels"])
"""The namespace and pod labels of the cluster DNS, as fleetgen's isolation policy selects it."""
PROTECTED: tuple[tuple[str, str], ...] = (("networking.k8s.io", "networkpolicies"), ("", "resourcequotas"),
                                          ("", "limitranges"))
"""The kinds fleetgen renders into team namespaces that a member's `edit` could reach (NetworkPolicies),
or that a wider grant (`admin`) would: their fleetgen-made objects are kept out of members' hands."""


def _cel_text(value: str) -> str:
    """A CEL string literal of any text: JSON's escapes (`\\"`, `\\\\`, `\\uXXXX`) are CEL's too, and
    a subject in `allowedSystemSubjects` may hold quotes or backslashes."""
    return json.dumps(value, ensure_ascii=False)


def _cel_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(_cel_text(v) for v in values) + "]"


def _cel_map(values: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_cel_text(k)}: {_cel_text(v)}" for k, v in values.items()) + "}"


def _policy(cfg: ClusterConfig, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": labels(cfg.name)}, "spec": {"failurePolicy": "Fail", **spec}}


def _binding(cfg: ClusterConfig, name: str) -> dict[str, Any]:
    return policy_binding(name, labels(cfg.name), TEAM_NAMESPACES)


def _rules(resources: tuple[tuple[str, str], ...], operations: list[str]) -> dict[str, Any]:
    by_group: dict[str, list[str]] = {}
    for group, resource in resources:
        by_group.setdefault(group, []).append(resource)
    return {"resourceRules": [{"apiGroups": [g], "apiVersions": ["*"], "operations": operations,
                               "resources": sorted(r)} for g, r in sorted(by_group.items())]}


def placement_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """Tolerations checked on creation and on every update that adds one (tolerations a pod already
    had pass, so pods from before the policy can still be updated and finish); `spec.nodeName` on
    creation (the API server never lets an update change it)."""
    keys = _cel_list(FORBIDDEN_TOLERATIONS)
    return _policy(cfg, PLACEMENT_POLICY, {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
        "variables": [
            {"name": "before", "expression": "oldObject == null ? [] : oldObject.spec.?tolerations.orValue([])"},
        ],
        "validations": [
            {"expression": ("object.spec.?tolerations.orValue([]).all(t, t in variables.before || "
                            f"(t.?key.orValue('') != '' && !(t.key in {keys})))"),
             "message": (f"team pods may not tolerate {' or '.join(FORBIDDEN_TOLERATIONS)}, nor every taint "
                         "(a toleration without a key), when created or by an update: those nodes were cordoned "
                         "for a reason"),
             "reason": "Forbidden"},
            {"expression": "oldObject != null || object.spec.?nodeName.orValue('') == ''",
             "message": ("team pods may not set spec.nodeName: a pod created on a node skips the scheduler and "
                         "every taint and cordon; choose nodes with a nodeSelector or node affinity"),
             "reason": "Forbidden"},
        ],
    })


@functools.lru_cache(maxsize=1024)
def _within(inner: str, outer: str) -> bool:
    """Is `inner` a subnet of `outer`? (once per pair: every team's policy asks the same)"""
    import ipaddress

    a, b = ipaddress.ip_network(inner), ipaddress.ip_network(outer)
    return a.version == b.version and a.subnet_of(b)  # type: ignore[arg-type]


def egress_blocks(egress: Egress) -> list[dict[str, Any]]:
    """The ipBlock peers of fleetgen's isolation policy: each `allow` CIDR with the `deny` ranges inside
    it as `except`; none for an `allow` CIDR wholly inside a `deny` one (nothing of it is left)."""
    blocks = []
    for cidr in egress.allow:
        if any(_within(cidr, d) for d in egress.deny):
            continue
        inside = [d for d in egress.deny if _within(d, cidr)]
        blocks.append({"ipBlock": {"cidr": cidr, **({"except": inside} if inside else {})}})
    return blocks


def _peer_allowed(cfg: ClusterConfig, blocks: list[dict[str, Any]]) -> str:
    """CEL over an egress peer `p` of rule `r`: a peer fleetgen's own policy also allows (the
    namespace's pods, the DNS pods on port 53, or one of its ipBlocks `blocks`). Where the API server
    offers CEL's CIDR library, any ipBlock inside `allow` that carves out every `deny` range it
    overlaps, too (CIDRs nest or are apart, so overlapping is containing either way)."""
    namespace, pods = DNS_LABELS
    same_namespace = "(!has(p.namespaceSelector) && !has(p.ipBlock))"
    dns = (f"(p.?namespaceSelector.?matchLabels.orValue({{}}) == {_cel_map(namespace)} "
           "&& !has(p.namespaceSelector.matchExpressions) "
           f"&& p.?podSelector.?matchLabels.orValue({{}}) == {_cel_map(pods)} "
           "&& !has(p.podSelector.matchExpressions) "
           "&& r.?ports.orValue([]).size() > 0 && r.ports.all(x, x.?port.orValue(0) == 53 && !has(x.endPort)))")
    ours = [f"(p.ipBlock.cidr == {_cel_text(b['cidr'])} && p.ipBlock.?except.orValue([]) == "
            f"{_cel_list(b.get('except', []))})" for b in (block["ipBlock"] for block in blocks)]
    if cfg.cel_cidr:
        ours.append("(variables.allow.exists(a, cidr(a).containsCIDR(p.ipBlock.cidr)) && variables.deny.all(d, "
                    "!(cidr(p.ipBlock.cidr).containsCIDR(d) || cidr(d).containsCIDR(p.ipBlock.cidr)) "
                    "|| p.ipBlock.?except.orValue([]).exists(e, cidr(e).containsCIDR(d))))")
    ip_block = f"(has(p.ipBlock) && ({' || '.join(ours) or 'false'}))"
    return f"{same_namespace} || {dns} || {ip_block}"


def egress_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """Every egress rule names its peers (an empty `to` is every destination), each one fleetgen's
    isolation policy allows too: the union of a namespace's policies then allows no more egress than
    fleetgen's alone. Ingress stays the team's to open: it exposes only the team's own pods."""
    egress = cfg.tenancy.network.egress
    return _policy(cfg, EGRESS_POLICY, {
        "matchConstraints": _rules((("networking.k8s.io", "networkpolicies"),), ["CREATE", "UPDATE"]),
        **({"variables": [{"name": "allow", "expression": _cel_list(egress.allow)},
                          {"name": "deny", "expression": _cel_list(egress.deny)}]} if cfg.cel_cidr else {}),
        "validations": [{
            "expression": ("object.spec.?egress.orValue([]).all(r, r.?to.orValue([]).size() > 0 && "
                           f"r.to.all(p, {_peer_allowed(cfg, egress_blocks(egress))}))"),
            "message": ("egress in a team namespace is what the cluster file allows (tenancy.network.egress): a "
                        "NetworkPolicy here may allow only the namespace's own pods, the cluster DNS on port 53, and "
                        + (f"ipBlocks inside {', '.join(egress.allow) or 'nothing'} that carve out (except) "
                           f"{', '.join(egress.deny) or 'nothing'}" if cfg.cel_cidr else
                           f"the ipBlocks of {ISOLATION_POLICY}")
                        + "; every egress rule must list its peers in `to`"),
            "reason": "Forbidden"}],
    })


def objects_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """fleetgen's objects (its name prefix or its managed-by label, before or after the request) are
    refused to every request from a person, the namespace's own ServiceAccounts or an allowed system
    subject; the GitOps engine, Kubernetes' controllers (the namespace controller emptying a namespace
    being deleted is `system:serviceaccount:kube-system:namespace-controller`, or
    `system:kube-controller-manager` without per-controller credentials) and `system:masters` pass."""
    (label, value), = MANAGED_BY.items()
    allowed = sorted(cfg.tenancy.allowed_system_subjects)

    def fleetgens(obj: str) -> str:
        return (f"({obj} != null && ({obj}.metadata.name.startsWith('fleetgen-') || "
                f"{obj}.metadata.?labels[?{_cel_text(label)}].orValue('') == {_cel_text(value)}))")

    return _policy(cfg, OBJECTS_POLICY, {
        "matchConstraints": _rules(PROTECTED, ["CREATE", "UPDATE", "DELETE"]),
        "matchConditions": [
            {"name": "fleetgens-object", "expression": f"{fleetgens('object')} || {fleetgens('oldObject')}"},
            {"name": "not-system-masters", "expression": "!('system:masters' in request.userInfo.groups)"},
        ],
        "variables": [{"name": "user", "expression": "request.userInfo.username"}],
        "validations": [{
            "expression": " && ".join([
                "variables.user.startsWith('system:')",
                "!variables.user.startsWith('system:serviceaccount:' + request.namespace + ':')",
                *([f"!(variables.user in {_cel_list(allowed)})",
                   f"!request.userInfo.groups.exists(g, g in {_cel_list(allowed)})"] if allowed else [])]),
            "messageExpression": ("'fleetgen keeps ' + request.resource.resource + ' ' + request.name + "
                                  "' in team namespaces as the fleet repository renders them; change "
                                  "teams/ or clusters/ and let the GitOps engine apply it'"),
            "reason": "Forbidden"}],
    })


KUEUE_DEACTIVATED = "DeactivatedDueTo"
"""How the reason of a Workload's Evicted condition starts when Kueue deactivated it itself, the cause
following (kueue v0.19.2 pkg/workload/evict/evict.go:182-185, pkg/workload/patching/patching.go:302-304);
a deactivation by `spec.active` alone leaves the bare `Deactivated`."""


def _unchanged(path: str) -> str:
    """CEL: the map at `path` of the object is the old object's (absent counts as empty)."""
    return f"object.{path}.orValue({{}}) == oldObject.{path}.orValue({{}})"


def workloads_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """A member's update of a Workload changes `spec.active` and nothing else, and turns on only one
    that Kueue did not deactivate. It binds the same requests as `fleetgen-team-objects` (people, the
    namespace's ServiceAccounts, `allowedSystemSubjects`): Kueue's controllers, which write priority,
    pod sets and activation themselves, pass. Every other spec key is compared generically, so a field
    a later Kueue adds is frozen too. Kueue's own mark of its deactivations is the Evicted reason
    (evict.go:48-53, IsEvictedDueToDeactivationByKueue) or a DeactivationTarget condition still set;
    a Workload it deactivates for the requeuing limit while already evicted for PodsReadyTimeout keeps
    that reason (workload_controller.go:677-696), so that one a member can still resume."""
    allowed = sorted(cfg.tenancy.allowed_system_subjects)
    member = " || ".join([
        "!request.userInfo.username.startsWith('system:')",
        "request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')",
        *([f"request.userInfo.username in {_cel_list(allowed)}",
           f"request.userInfo.groups.exists(g, g in {_cel_list(allowed)})"] if allowed else [])])
    return _policy(cfg, WORKLOADS_POLICY, {
        "matchConstraints": _rules((("kueue.x-k8s.io", "workloads"),), ["UPDATE"]),
        "matchConditions": [
            {"name": "not-system-masters", "expression": "!('system:masters' in request.userInfo.groups)"},
            {"name": "member", "expression": member},
        ],
        "variables": [
            {"name": "spec", "expression": "object.?spec.orValue({})"},
            {"name": "oldSpec", "expression": "oldObject.?spec.orValue({})"},
            {"name": "resumed", "expression": ("variables.spec.?active.orValue(true) && "
                                               "!variables.oldSpec.?active.orValue(true)")},
            {"name": "kueueDeactivated", "expression": (
                "oldObject.?status.?conditions.orValue([]).filter(c, c.status == 'True' && "
                f"((c.type == 'Evicted' && c.?reason.orValue('').startsWith({_cel_text(KUEUE_DEACTIVATED)})) || "
                "c.type == 'DeactivationTarget')).map(c, c.?reason.orValue(c.type))")},
        ],
        "validations": [
            {"expression": ("variables.oldSpec.all(k, k == 'active' || (k in variables.spec && "
                            "variables.spec[k] == variables.oldSpec[k])) && "
                            "variables.spec.all(k, k == 'active' || k in variables.oldSpec) && "
                            + " && ".join(_unchanged(f"metadata.?{m}") for m in
                                          ("labels", "annotations")) + " && "
                            + " && ".join(f"object.metadata.?{m}.orValue([]) == oldObject.metadata.?{m}.orValue([])"
                                          for m in ("finalizers", "ownerReferences"))),
             "message": ("team members may change only spec.active of a Workload (kueuectl stop|resume workload): "
                         "its priority, queue, pod sets and metadata are what the job and Kueue made it; change "
                         "or resubmit the job instead"),
             "reason": "Forbidden"},
            {"expression": "!variables.resumed || variables.kueueDeactivated.size() == 0",
             "messageExpression": ("'Kueue deactivated this Workload itself (' + variables.kueueDeactivated.join(', ') "
                                   "+ '): a team member may not resume it; submit the job again'"),
             "reason": "Forbidden"},
        ],
    })


def _templates_on_ladder(expr: str, steps: tuple[str, ...], names: str, depth: int = 0) -> str:
    """CEL: every pod spec at `steps` under `expr` names no priorityClassName or one of `names`."""
    if not steps:
        return f"(!has({expr}.priorityClassName) || {expr}.priorityClassName in {names})"
    step, rest = steps[0], steps[1:]
    if step in ("[]", "{}"):
        var = f"{'i' if step == '[]' else 'k'}{depth}"
        inner = var if step == "[]" else f"{expr}[{var}]"
        return f"{expr}.all({var}, {_templates_on_ladder(inner, rest, names, depth + 1)})"
    return f"(!has({expr}.{step}) || {_templates_on_ladder(f'{expr}.{step}', rest, names, depth)})"


TEMPLATE_KINDS = {(group, resource): paths for group, resource, paths in INTEGRATION_KINDS.values()
                  if paths and resource != "pods"}
"""Kinds whose pod templates Kueue reads a priority from (compile/admission.py's table); pods are
judged by their resolved `spec.priority` instead, which also covers a PriorityClass made the
cluster's `globalDefault` (the API server's Priority plugin names it on every pod without one)."""


def ladder(cfg: ClusterConfig) -> tuple[list[int], int]:
    """The cluster's priority values, highest first, and the highest value below the ladder that is
    still allowed: its lowest rung, or 0 (a workload naming no class) if that is lower."""
    values = sorted({p.value for p in cfg.priorities}, reverse=True)
    return values, max([0, *values[-1:]])


def ladder_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """Pod templates name only the ladder's classes; pods (on creation: a pod's priority never
    changes) and Workloads run on the ladder or below it. Objects that broke the rule before the
    policy existed may still be updated (finalizers, scaling) but not lifted higher."""
    values, floor = ladder(cfg)
    names = sorted(p.name for p in cfg.priorities)
    on_ladder = f"(p in {json.dumps(values)} || p <= {floor})"
    table = " : ".join(
        f"(request.resource.group == {_cel_text(g)} && request.resource.resource == {_cel_text(r)}) ? "
        + " && ".join(_templates_on_ladder("o", path, "variables.names") for path in paths)
        for (g, r), paths in sorted(TEMPLATE_KINDS.items())) + " : true"

    def effective(obj: str) -> str:
        """Kueue's effective priority: spec.priority plus the priority-boost annotation (kueue v0.19.2
        pkg/util/priority/priority.go:68-77); an unparsable boost counts 0 there, and here."""
        boost = f"{obj}.metadata.?annotations[?{_cel_text(BOOST_ANNOTATION)}].orValue('0')"
        return f"{obj}.spec.?priority.orValue(0) + ({boost}.matches('^-?[0-9]{{1,10}}$') ? int({boost}) : 0)"

    ladder_words = ", ".join(f"{p.name} ({p.value})" for p in sorted(cfg.priorities, key=lambda p: -p.value))
    resources = tuple(sorted({*TEMPLATE_KINDS, ("", "pods"), ("kueue.x-k8s.io", "workloads")}))
    return _policy(cfg, LADDER_POLICY, {
        "matchConstraints": _rules(resources, ["CREATE", "UPDATE"]),
        "variables": [
            {"name": "names", "expression": _cel_list(names)},
            {"name": "workload", "expression": ("request.resource.group == 'kueue.x-k8s.io' && "
                                                "request.resource.resource == 'workloads'")},
            {"name": "pod", "expression": "request.resource.group == '' && request.resource.resource == 'pods'"},
            {"name": "templates", "expression": f"[object].all(o, {table})"},
            {"name": "oldTemplates", "expression": f"oldObject == null || [oldObject].all(o, {table})"},
            {"name": "priority", "expression": f"variables.workload ? {effective('object')} : "
                                               "variables.pod ? object.spec.?priority.orValue(0) : 0"},
            {"name": "oldPriority", "expression": f"oldObject != null && variables.workload ? "
                                                  f"{effective('oldObject')} : 0"},
        ],
        "validations": [
            {"expression": "variables.templates || !variables.oldTemplates",
             "message": (f"pod templates in team namespaces may name only the cluster's priority classes as "
                         f"priorityClassName ({', '.join(names) or 'none'}): choose a class with the label "
                         "kueue.x-k8s.io/priority-class and remove priorityClassName"),
             "reason": "Forbidden"},
            {"expression": (f"!(variables.pod || variables.workload) || (oldObject != null && (variables.pod || "
                            f"variables.priority <= variables.oldPriority)) || "
                            f"[variables.priority].all(p, {on_ladder})"),
             "messageExpression": (
                 "(variables.pod ? 'pod' : 'Workload') + ' priority ' + string(variables.priority) + "
                 "[object.spec.?priorityClassName.orValue(object.spec.?priorityClassRef.?name.orValue(''))].map(n, "
                 "n == '' ? '' : ' (class ' + n + ')')[0] + ' is off the priority ladder of this cluster: ' + "
                 + _cel_text(f"{ladder_words or 'no classes'}, or at most {floor}; label the job "
                             "kueue.x-k8s.io/priority-class with one of the classes and remove priorityClassName")),
             "reason": "Forbidden"},
        ],
    })


def namespace_policies(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """The policies and their bindings, once per cluster (the egress one with network isolation)."""
    cfg = cluster.config
    where = cluster.at("tenancy")
    policies = [placement_policy(cfg), objects_policy(cfg), workloads_policy(cfg)]
    if cfg.tenancy.network.isolate:
        policies.append(egress_policy(cfg))
    out = [Manifest(("teams",), _guard_first(cfg, body), where) for policy in policies
           for body in (policy, _binding(cfg, policy["metadata"]["name"]))]
    at = cluster.at("priorities")
    policy = ladder_policy(cfg)
    return out + [Manifest(("teams",), _guard_first(cfg, body), at) for body in (policy, _binding(cfg, LADDER_POLICY))]


GUARDS_FIRST = {"argocd.argoproj.io/sync-wave": "-1"}
"""Argo CD sync wave of the policies in the teams Application, ahead of the RoleBindings and ClusterRoles they
guard: Argo CD orders kinds it does not know (admission policies) after RBAC within a wave, which would leave
a new right (members' `patch` on Workloads) unguarded until the policy lands, or for good if its apply fails.
Flux applies a Kustomization's objects in one server-side apply."""


def _guard_first(cfg: ClusterConfig, body: dict[str, Any]) -> dict[str, Any]:
    if cfg.gitops.engine == "argocd":
        body["metadata"]["annotations"] = dict(GUARDS_FIRST)
    return body
