"""Kueue's admission-webhook rules and cross-object references, which CRDs do not carry.

Each rule is a generator over one object (and an index of the cluster's objects) yielding
(field path, message, fix). `RULES` maps a kind to its rules; a rule for `*` runs on every kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from generator import quantity
from generator.compile.manifest import Manifest
from generator.errors import Finding
from generator.validate.findings import object_finding

Problem = tuple[str, str, str]
MAX_RESOURCE_GROUPS = 16
MAX_FLAVOR_ENTRIES = 8
MAX_TOPOLOGY_LEVELS = 16
MAX_DESCRIPTION = 2048
HOSTNAME = "kubernetes.io/hostname"
_QUANTITY_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")


@dataclass(frozen=True)
class Index:
    """Names of the cluster-scoped Kueue objects of one cluster, for reference checks."""

    names: dict[str, set[str]]

    @classmethod
    def of(cls, manifests: list[Manifest]) -> Index:
        names: dict[str, set[str]] = {}
        for m in manifests:
            names.setdefault(m.kind, set()).add(m.name)
        return cls(names)

    def has(self, kind: str, name: str) -> bool:
        return name in self.names.get(kind, set())


def _quantities(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str, Any]]:
    for g, group in enumerate(spec.get("resourceGroups") or []):
        for f, flavor in enumerate(group.get("flavors") or []):
            for r, res in enumerate(flavor.get("resources") or []):
                for key in _QUANTITY_FIELDS:
                    if key in res:
                        yield f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}].{key}", res, key, res[key]


def resource_groups(m: Manifest, index: Index) -> Iterator[Problem]:
    """Flavors list exactly the covered resources, in order; nothing appears in two groups."""
    groups = m.body.get("spec", {}).get("resourceGroups") or []
    if len(groups) > MAX_RESOURCE_GROUPS:
        yield "spec.resourceGroups", f"{len(groups)} resource groups, at most {MAX_RESOURCE_GROUPS} allowed", \
            "use fewer distinct GPU resources"
    seen_flavors: Counter[str] = Counter()
    seen_resources: Counter[str] = Counter()
    for g, group in enumerate(groups):
        covered = list(group.get("coveredResources") or [])
        seen_resources.update(covered)
        for f, flavor in enumerate(group.get("flavors") or []):
            seen_flavors[flavor.get("name")] += 1
            listed = [r.get("name") for r in flavor.get("resources") or []]
            if listed != covered:
                yield (f"spec.resourceGroups[{g}].flavors[{f}].resources",
                       f"flavor {flavor.get('name')!r} lists {listed}, but the group covers {covered} "
                       "(same resources, same order required)", "list every covered resource in order")
    for name, count in sorted(seen_flavors.items()):
        if count > 1:
            yield "spec.resourceGroups", f"flavor {name!r} appears in {count} resource groups", "keep it in one"
    for name, count in sorted(seen_resources.items()):
        if count > 1:
            yield "spec.resourceGroups", f"resource {name!r} is covered by {count} groups", "cover it in one"


def quota_values(m: Manifest, index: Index) -> Iterator[Problem]:
    """Quotas are non-negative canonical quantities; limits need a cohort; lend at most nominal."""
    spec = m.body.get("spec", {})
    cohort = spec.get("cohortName") or spec.get("cohort")
    for path, res, key, value in _quantities(spec):
        try:
            parsed, fmt = quantity.parse(value)
        except quantity.QuantityError as exc:
            yield path, str(exc), "use a Kubernetes quantity"
            continue
        if parsed < 0:
            yield path, f"{key} is negative ({value})", "quotas must be zero or more"
        if isinstance(value, str) and quantity.canonical(parsed, fmt) != value:
            yield path, f"{value!r} is not canonical; the API server stores {quantity.canonical(parsed, fmt)!r}", \
                "emit canonical quantities so GitOps does not report drift"
        if key in ("borrowingLimit", "lendingLimit") and not cohort:
            yield path, f"{key} needs the ClusterQueue to be in a cohort", "set a cohort"
        if key == "lendingLimit" and "nominalQuota" in res and parsed > quantity.value_of(res["nominalQuota"]):
            yield path, f"lendingLimit {value} is more than nominalQuota {res['nominalQuota']}", \
                "lend at most the nominal quota"


def fair_sharing_weight(m: Manifest, index: Index) -> Iterator[Problem]:
    """`fairSharing.weight` must be 0 or more than 1e-9 (Kueue rejects tiny positive weights)."""
    weight = m.body.get("spec", {}).get("fairSharing", {}).get("weight")
    if weight is None:
        return
    value = quantity.value_of(weight)
    if value < 0 or (0 < value <= Decimal("1e-9")):
        yield "spec.fairSharing.weight", f"weight {weight} (as Kubernetes stores it) must be 0 or more than 1e-9", \
            "set fairSharingWeight to 0 or a normal positive number"


def namespace_selector(m: Manifest, index: Index) -> Iterator[Problem]:
    """An omitted namespaceSelector admits nothing; `{}` admits every namespace. Be explicit and narrow."""
    spec = m.body.get("spec", {})
    if "namespaceSelector" not in spec:
        yield "spec.namespaceSelector", "omitted: no namespace can submit to this queue", "set it explicitly"
    elif spec["namespaceSelector"] == {}:
        yield "spec.namespaceSelector", "{} lets every namespace submit to this team's queue", \
            "select the team's namespaces only"


def preemption(m: Manifest, index: Index) -> Iterator[Problem]:
    """borrowWithinCohort makes no sense when the queue never reclaims within its cohort."""
    p = m.body.get("spec", {}).get("preemption") or {}
    bwc = p.get("borrowWithinCohort") or {}
    if p.get("reclaimWithinCohort", "Never") == "Never" and bwc.get("policy", "Never") != "Never":
        yield "spec.preemption.borrowWithinCohort", \
            "borrowWithinCohort.policy needs reclaimWithinCohort other than Never", \
            "set reclaimWithinCohort to LowerPriority or Any, or drop borrowWithinCohort"


def queue_references(m: Manifest, index: Index) -> Iterator[Problem]:
    """Flavors and cohorts a ClusterQueue names exist in the same cluster."""
    spec = m.body.get("spec", {})
    cohort = spec.get("cohortName") or spec.get("cohort")
    if cohort and not index.has("Cohort", cohort):
        yield "spec.cohortName", f"cohort {cohort!r} is not rendered for this cluster", "declare the cohort"
    for g, group in enumerate(spec.get("resourceGroups") or []):
        for f, flavor in enumerate(group.get("flavors") or []):
            if not index.has("ResourceFlavor", flavor.get("name", "")):
                yield f"spec.resourceGroups[{g}].flavors[{f}].name", \
                    f"ResourceFlavor {flavor.get('name')!r} does not exist in this cluster", "use a pool of the cluster"


def queue_checks(m: Manifest, index: Index) -> Iterator[Problem]:
    """Admission checks a ClusterQueue names exist, on flavors of the queue (kueue v0.19.2
    pkg/webhooks/clusterqueue_webhook.go:158-186); a missing check makes the queue inactive."""
    spec = m.body.get("spec", {})
    flavors = {f.get("name") for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or []}
    rules = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    for i, rule in enumerate(rules):
        if not index.has("AdmissionCheck", rule.get("name", "")):
            yield f"spec.admissionChecksStrategy.admissionChecks[{i}].name", \
                f"AdmissionCheck {rule.get('name')!r} does not exist in this cluster", "declare it in admissionChecks"
        for flavor in rule.get("onFlavors") or []:
            if flavor not in flavors:
                yield f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors", \
                    f"flavor {flavor!r} is not one of the queue's", "list only pools the team has quota in"


CHECK_CONFIGS = {"ProvisioningRequestConfig": "declare the check's provisioningRequest",
                 "MultiKueueConfig": "give the team quota on the manager"}
"""Kinds an AdmissionCheck's parameters name -> how the config gets one."""


def check_parameters(m: Manifest, index: Index) -> Iterator[Problem]:
    """A check's configuration (ProvisioningRequestConfig, MultiKueueConfig) exists (else Kueue
    keeps the check inactive)."""
    ref = m.body.get("spec", {}).get("parameters")
    if ref and ref.get("kind") in CHECK_CONFIGS and not index.has(ref["kind"], ref.get("name", "")):
        yield "spec.parameters.name", f"{ref['kind']} {ref.get('name')!r} does not exist", CHECK_CONFIGS[ref["kind"]]


def multikueue_clusters(m: Manifest, index: Index) -> Iterator[Problem]:
    """A MultiKueueConfig names MultiKueueClusters of the manager."""
    for i, name in enumerate(m.body.get("spec", {}).get("clusters") or []):
        if not index.has("MultiKueueCluster", name):
            yield f"spec.clusters[{i}]", f"MultiKueueCluster {name!r} does not exist", "list it in multikueue.workers"


def cohort_parent(m: Manifest, index: Index) -> Iterator[Problem]:
    """A child cohort's parent exists."""
    parent = m.body.get("spec", {}).get("parentName")
    if parent and not index.has("Cohort", parent):
        yield "spec.parentName", f"parent cohort {parent!r} does not exist", "declare the parent cohort"


def flavor_limits(m: Manifest, index: Index) -> Iterator[Problem]:
    """At most 8 node labels, taints and tolerations; a topology needs a node label and must exist."""
    spec = m.body.get("spec", {})
    for key in ("nodeLabels", "nodeTaints", "tolerations"):
        if len(spec.get(key) or ()) > MAX_FLAVOR_ENTRIES:
            yield f"spec.{key}", f"{len(spec[key])} entries, at most {MAX_FLAVOR_ENTRIES} allowed", \
                "select the pool with fewer labels or taints"
    if "topologyName" in spec:
        if not spec.get("nodeLabels"):
            yield "spec.topologyName", "topologyName needs at least one nodeLabel", "add a nodeLabel to the pool"
        if not index.has("Topology", spec["topologyName"]):
            yield "spec.topologyName", f"Topology {spec['topologyName']!r} does not exist", "declare topologyLevels"


def topology_levels(m: Manifest, index: Index) -> Iterator[Problem]:
    """1 to 16 unique levels; kubernetes.io/hostname only as the last one."""
    labels = [level.get("nodeLabel") for level in m.body.get("spec", {}).get("levels") or []]
    if not 1 <= len(labels) <= MAX_TOPOLOGY_LEVELS:
        yield "spec.levels", f"{len(labels)} levels, 1 to {MAX_TOPOLOGY_LEVELS} allowed", "adjust topologyLevels"
    for label, count in sorted(Counter(labels).items()):
        if count > 1:
            yield "spec.levels", f"level {label!r} appears {count} times", "list each level once"
    if HOSTNAME in labels[:-1]:
        yield "spec.levels", f"{HOSTNAME} may only be the last level", f"move {HOSTNAME} to the end"


def priority_class(m: Manifest, index: Index) -> Iterator[Problem]:
    """value fits in int32; description at most 2048 characters."""
    value = m.body.get("value")
    if not isinstance(value, int) or not -(2**31) <= value < 2**31:
        yield "value", f"{value!r} is not a 32-bit integer", "use a value between -2147483648 and 2147483647"
    if len(m.body.get("description") or "") > MAX_DESCRIPTION:
        yield "description", f"{len(m.body['description'])} characters, at most {MAX_DESCRIPTION}", \
            "shorten the description"


def local_queue(m: Manifest, index: Index) -> Iterator[Problem]:
    """A LocalQueue points at a ClusterQueue of the same cluster (and that is immutable later)."""
    target = m.body.get("spec", {}).get("clusterQueue")
    if not target or not index.has("ClusterQueue", target):
        yield "spec.clusterQueue", f"ClusterQueue {target!r} does not exist in this cluster", \
            "give the team a quota in this cluster"


RULES: dict[str, list[Callable[[Manifest, Index], Iterator[Problem]]]] = {
    "ClusterQueue": [resource_groups, quota_values, fair_sharing_weight, namespace_selector, preemption,
                     queue_references, queue_checks],
    "AdmissionCheck": [check_parameters],
    "MultiKueueConfig": [multikueue_clusters],
    "Cohort": [fair_sharing_weight, cohort_parent],
    "ResourceFlavor": [flavor_limits],
    "Topology": [topology_levels],
    "WorkloadPriorityClass": [priority_class],
    "LocalQueue": [local_queue],
}


def validate_kueue(manifests: list[Manifest]) -> list[Finding]:
    """Findings of every webhook rule on the Kueue objects of one cluster."""
    index = Index.of(manifests)
    return [object_finding(m, path, message, hint, "kueue-webhook")
            for m in manifests if m.api_version.startswith("kueue.x-k8s.io/")
            for rule in RULES.get(m.kind, [])
            for path, message, hint in rule(m, index)]
