"""A rendered cluster on a real Stack: its objects (through kustomize), nodes that match its
pools, its Kueue configuration, and CRDs for the platform kinds this stack has no operator for.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from tests.upstream import tools
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_until

FIELD_MANAGER = "fleetgen-e2e"
APPLY_ORDER = ("CustomResourceDefinition", "Namespace", "ClusterRole", "ServiceAccount", "Role",
               "ResourceFlavor", "Topology", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue")
"""Kinds that others refer to come first; every other kind after them, in file order."""
OWN_GROUPS = {"kueue.x-k8s.io", "jobset.x-k8s.io"}
"""Groups whose CRDs (and webhooks) the stack installs from upstream."""
TOPOLOGY_BLOCK = 16
"""Nodes per topology domain on the fake nodes (the example's largest profile packs 16 nodes into one block)."""


KUEUE, JOBSET = "kueue.x-k8s.io", "jobset.x-k8s.io"


class ApplyError(Exception):
    """The API server (or a webhook) refused an object; the message is the server's."""


def kustomize_build(folder: Path) -> list[dict[str, Any]]:
    """`kustomize build folder` with the pinned kustomize; the objects it prints."""
    proc = subprocess.run([str(tools.binary("kustomize")), "build", str(folder)], capture_output=True, text=True,
                          check=False, timeout=120)
    if proc.returncode != 0:
        raise ApplyError(f"kustomize build {folder} failed: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def kustomization_folders(root: Path) -> list[Path]:
    """Every folder under `root` (itself included) that has a kustomization.yaml."""
    return sorted(p.parent for p in root.rglob("kustomization.yaml"))


def group_of(obj: dict[str, Any]) -> str:
    api = str(obj["apiVersion"])
    return api.split("/")[0] if "/" in api else ""


def ordered(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    rank = {kind: i for i, kind in enumerate(APPLY_ORDER)}
    return sorted(objects, key=lambda o: rank.get(o["kind"], len(APPLY_ORDER)))


def _status_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("message"))
    except (TypeError, ValueError):
        return str(exc)


def apply(stack: Stack, obj: dict[str, Any], *, dry_run: bool = False, api: Any = None) -> dict[str, Any]:
    """Server-side apply with strict field validation, as Argo CD (ServerSideApply=true) and Flux do."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

    client = stack.dynamic(api)
    try:
        resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    except ResourceNotFoundError as exc:
        raise ApplyError(f"{obj['apiVersion']} {obj['kind']} is not served: {exc}") from None
    extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    try:
        out = client.server_side_apply(resource, body=obj, namespace=obj["metadata"].get("namespace"),
                                       field_manager=FIELD_MANAGER, force_conflicts=True,
                                       query_params=[("fieldValidation", "Strict")], **extra)
    except (ApiException, DynamicApiError) as exc:
        raise ApplyError(f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}: "
                         f"{_status_message(exc)}") from None
    return dict(out.to_dict())


def apply_team_namespace(stack: Stack, teams: Path, team: str, namespace: str) -> None:
    """A rendered cluster's team policies (its `teams/` folder) and one team namespace with what fleetgen
    puts in it, as the GitOps engine applies them; not its LocalQueues (this stack may have no Kueue)."""
    for path in [teams / "clusterrole-fleetgen-team-member.yaml",
                 *sorted(teams.glob("validatingadmissionpolicy*-fleetgen-team-*.yaml"))]:
        apply(stack, yaml.safe_load(path.read_text()))
    folder = teams / team / namespace
    apply(stack, yaml.safe_load((folder / f"namespace-{namespace}.yaml").read_text()))
    for path in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") not in ("Namespace", "Kustomization", "LocalQueue"):
            apply(stack, doc)


def apply_all(stack: Stack, objects: list[dict[str, Any]], *, dry_run: bool = False) -> list[str]:
    """Apply every object in dependency order; the refusals, one line each."""
    errors = []
    for obj in ordered(objects):
        try:
            apply(stack, obj, dry_run=dry_run)
        except ApplyError as exc:
            errors.append(str(exc))
        if obj["kind"] == "CustomResourceDefinition" and not dry_run:
            stack._wait_established([obj["metadata"]["name"]])
    return errors


# ----------------------------------------------------------------------------- platform CRDs


def _structural(schema: Any) -> Any:
    """A JSON schema of kubeconform's catalog made structural: no `additionalProperties: false`
    beside `properties` (a CRD may not have both), no draft keywords the API server rejects."""
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _structural(v) for k, v in schema.items() if k not in ("$schema", "id", "$id")}
    if "properties" in out and out.get("additionalProperties") is False:
        del out["additionalProperties"]
    if out.get("additionalProperties") is False:
        out.pop("additionalProperties")
    if isinstance(out.get("type"), list):  # ["string", "null"] -> string, nullable
        kinds = [t for t in out["type"] if t != "null"]
        out["type"] = kinds[0] if len(kinds) == 1 else None
        if out["type"] is None:
            out.pop("type")
            out["x-kubernetes-int-or-string"] = True
        out["nullable"] = True
    return out


def crd_from_schema(group: str, kind: str, version: str, schema: dict[str, Any], namespaced: bool) -> dict[str, Any]:
    """A CRD serving `group/version kind` with the catalog schema (a stand-in for the operator's own CRD)."""
    plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
    root = _structural(schema)
    root.pop("required", None)
    props = root.setdefault("properties", {})
    for meta in ("apiVersion", "kind"):
        props[meta] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    root["type"] = "object"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": root}}]}}


def platform_crds(objects: list[dict[str, Any]], schemas: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """CRDs for every foreign kind among `objects` that ../shared/schemas has; and the kinds it lacks."""
    crds, lacking, seen = [], [], set()
    for obj in objects:
        group = group_of(obj)
        if not group or "." not in group or group in OWN_GROUPS or group.endswith(".k8s.io"):
            continue
        version = obj["apiVersion"].split("/")[1]
        key = (group, obj["kind"], version)
        if key in seen:
            continue
        seen.add(key)
        path = schemas / group / f"{obj['kind'].lower()}_{version}.json"
        if not path.is_file():
            lacking.append(f"{obj['apiVersion']} {obj['kind']}")
            continue
        crds.append(crd_from_schema(group, obj["kind"], version, json.loads(path.read_text()),
                                    namespaced="namespace" in obj["metadata"]))
    return crds, lacking


# ---------------------------------------------------------------------------------- nodes


def deploy(stack: Stack, cluster: ClusterConfig, objects: list[dict[str, Any]],
           schemas: Path) -> tuple[list[str], list[str]]:
    """Apply a rendered cluster (its tree and GitOps wiring) as its GitOps engine would, after what
    installing Argo CD or Flux brings: its namespace and CRDs (from the shared schemas). Returns
    (what the server refused, the kinds no CRD is known for)."""
    stack.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.gitops.controller_namespace}})
    crds, lacking = (platform_crds(objects, schemas) if schemas.is_dir()
                     else ([], ["every platform kind (../shared/schemas is absent)"]))
    served = [o for o in objects if f"{o['apiVersion']} {o['kind']}" not in lacking]
    refused = apply_all(stack, crds) + apply_all(stack, served)
    admission_loaded(stack, {o["kind"] for o in served})
    return refused, sorted(set(lacking))


ADMISSION = "admissionregistration.k8s.io/v1"
PROBE = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twin-admission-probe", "namespace": "default"}}
_PROBE_RULES = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                   "resources": ["configmaps"]}]}
_IS_PROBE = "object.metadata.name == 'twin-admission-probe'"
PROBES: dict[str, tuple[dict[str, Any], Callable[[Stack], bool]]] = {
    "ValidatingAdmissionPolicy": (
        {"failurePolicy": "Fail", "matchConstraints": _PROBE_RULES,
         "validations": [{"expression": f"!({_IS_PROBE})", "message": "twin admission probe"}]},
        lambda stack: _refused(lambda: stack.create(PROBE, dry_run=True))),
    "MutatingAdmissionPolicy": (
        {"failurePolicy": "Fail", "matchConstraints": _PROBE_RULES, "reinvocationPolicy": "Never",
         "matchConditions": [{"name": "probe", "expression": _IS_PROBE}],
         "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
             "expression": "Object{metadata: Object.metadata{labels: {'twin-probe': 'seen'}}}"}}]},
        lambda stack: (stack.create(PROBE, dry_run=True).get("metadata") or {}).get("labels") == {
            "twin-probe": "seen"}),
}
"""Per kind of admission policy: a probe policy (bound everywhere, acting only on PROBE) and how to see it
act. The API server loads policies from an informer and compiles them asynchronously (k8s.io/apiserver
v0.36.3 pkg/admission/plugin/policy/generic/policy_source.go:47: a refresh every second of what the
informer holds); an informer delivers objects in the order they were written, so once
the probe, written last, acts, every policy and binding written before it does too."""


def _refused(call: Callable[[], Any]) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        return exc.status in (400, 403, 422) and "twin admission probe" in str(exc.body)
    return False


def admission_loaded(stack: Stack, kinds: set[str]) -> None:
    """Wait until the API server enforces every admission policy of `kinds` applied so far: a test that
    counts on a refusal (or a mutation) right after deploying would otherwise race the server's load."""
    for kind, (spec, acting) in PROBES.items():
        if kind not in kinds:
            continue
        name = {"name": "twin-admission-probe"}
        stack.create({"apiVersion": ADMISSION, "kind": kind, "metadata": name, "spec": spec})
        stack.create({"apiVersion": ADMISSION, "kind": f"{kind}Binding", "metadata": name,
                      "spec": {"policyName": name["name"],
                               **({"validationActions": ["Deny"]} if kind.startswith("Validating") else {})}})
        wait_until(stack.processes["kube-apiserver"], lambda acting=acting: acting(stack), 60,
                   f"enforcing the {kind}s applied")
        for each in (f"{kind}Binding", kind):
            resource = stack.dynamic().resources.get(api_version=ADMISSION, kind=each)
            resource.delete(name=name["name"])


KUBELET_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
"""What every kubelet labels its Node with (charts' DaemonSets select `kubernetes.io/os: linux`)."""


def fake_nodes(cluster: ClusterConfig) -> list[dict[str, Any]]:
    """Node objects for every pool: its labels, taints and allocatable, topology labels in blocks.

    No kubelet runs: they are what Kueue's topology-aware scheduling reads (labels, allocatable,
    Ready) and the bootID every kubelet reports (the health reconciler waits for it to change after a
    reset-class fault), nothing more.
    """
    out = []
    discovered = cluster.monitoring.gpu_node_selector  # what GPU feature discovery labels a GPU node with
    for pool in cluster.node_pools:
        for i in range(pool.nodes):
            name = f"{cluster.name}-{pool.name}-{i}"
            labels = {**KUBELET_LABELS, **discovered, **pool.node_labels, "kubernetes.io/hostname": name,
                      "node.fleetgen.io/test-pool": pool.name}
            levels = [lv for lv in pool.topology_levels or [] if lv != "kubernetes.io/hostname"]
            for depth, level in enumerate(levels):  # one domain above the narrowest, blocks of 16 there
                labels[level] = f"{pool.name}-{depth}-{i // TOPOLOGY_BLOCK if depth == len(levels) - 1 else 0}"
            capacity = {"cpu": str(pool.cpu_per_node), "memory": str(pool.memory_per_node),
                        pool.gpu.resource: str(pool.gpu.per_node), "pods": "110"}
            out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                        "spec": {"taints": [{k: v for k, v in (("key", t.key), ("value", t.value),
                                                               ("effect", t.effect)) if v}
                                            for t in pool.taints]},
                        "status": {"capacity": capacity, "allocatable": capacity,
                                   "nodeInfo": {"bootID": f"{name}-boot-0"},
                                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                   "message": "fake node for tests"}]}})
    cpu = cluster.cpu_pool
    for i in range(cpu.nodes if cpu else 0):  # where CPU-only pods go (the charts' controllers among them)
        assert cpu is not None
        name = f"{cluster.name}-{cpu.name}-{i}"
        capacity = {"cpu": str(cpu.cpu_per_node), "memory": str(cpu.memory_per_node), "pods": "110"}
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {**KUBELET_LABELS, **cpu.node_labels,
                                                          "kubernetes.io/hostname": name,
                                                          "node.fleetgen.io/test-pool": cpu.name}},
                    "spec": {"taints": [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect))
                                         if v} for t in cpu.taints]},
                    "status": {"capacity": capacity, "allocatable": capacity,
                               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                               "message": "fake node for tests"}]}})
    return out


STACK_NODES = 2
STACK_NODE = {"cpu": "32", "memory": "128Gi", "pods": "110"}


def stack_nodes(cluster: ClusterConfig) -> list[dict[str, Any]]:
    """The nodes a cluster file's `monitoring.stackNodeSelector` names, which no pool of the file describes
    (a platform team's system nodes): two, each roomy enough for the monitoring stack's largest pod."""
    selector = cluster.monitoring.stack_node_selector if cluster.monitoring.enabled else {}
    out = []
    for i in range(STACK_NODES if selector else 0):
        name = f"{cluster.name}-stack-{i}"
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {**KUBELET_LABELS, **selector, "kubernetes.io/hostname": name,
                                                          "node.fleetgen.io/test-pool": "stack"}},
                    "spec": {"taints": []},
                    "status": {"capacity": STACK_NODE, "allocatable": STACK_NODE,
                               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                               "message": "fake node for tests"}]}})
    return out


def volumes(cluster: ClusterConfig) -> list[dict[str, Any]]:
    """What a cluster's storage offers the monitoring stack's claims: each StorageClass its file names
    (or a default one where it names none), statically provisioned, and two PersistentVolumes of each
    claimed size there (the claims bind to them at once; no CSI driver runs in the twin)."""
    mon = cluster.monitoring
    if not mon.enabled:
        return []
    claims = [(s.storage_class, s.size) for s in (mon.prometheus.storage, mon.loki.storage)]
    out: list[dict[str, Any]] = []
    for klass in sorted({c or "twin-default" for c, _ in claims}):
        default = {"storageclass.kubernetes.io/is-default-class": "true"} if klass == "twin-default" else {}
        out.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": klass, "annotations": default},
                    "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"})
    for n, (klass, size) in enumerate(claims):
        for copy in range(2):
            out.append({"apiVersion": "v1", "kind": "PersistentVolume",
                        "metadata": {"name": f"twin-volume-{n}-{copy}"},
                        "spec": {"capacity": {"storage": str(size)}, "accessModes": ["ReadWriteOnce"],
                                 "storageClassName": klass or "twin-default",
                                 "persistentVolumeReclaimPolicy": "Retain",
                                 "hostPath": {"path": f"/var/lib/twin-volume-{n}-{copy}"}}})
    return out


def create_nodes(stack: Stack, nodes: list[dict[str, Any]]) -> None:
    """Create the Nodes, set their status as a kubelet would, and drop the not-ready taint the API
    server's TaintNodesByCondition admission adds (the node lifecycle controller's job once Ready)."""
    from kubernetes import client

    core = client.CoreV1Api(stack.client())
    for node in nodes:
        name = node["metadata"]["name"]
        core.create_node({k: v for k, v in node.items() if k != "status"})
        core.patch_node_status(name, {"status": node["status"]})
        core.patch_node(name, {"spec": {"taints": node["spec"]["taints"] or None}})


# ----------------------------------------------------------------------------------- kueue


def topology_domains(workload: dict[str, Any] | None, level: str) -> dict[str, set[str]]:
    """Per pod set, the values of topology `level` Kueue placed its pods in (v1beta2 slices encoding:
    apis/kueue/v1beta2/workload_types.go:457-530 at v0.19.2)."""
    out: dict[str, set[str]] = {}
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    for ps in admission.get("podSetAssignments") or []:
        assignment = ps.get("topologyAssignment") or {}
        if level not in (assignment.get("levels") or []):
            continue
        at = assignment["levels"].index(level)
        for piece in assignment.get("slices") or []:
            values = piece["valuesPerLevel"][at]
            if "universal" in values:
                found = {values["universal"]}
            else:
                ind = values["individual"]
                found = {f"{ind.get('prefix') or ''}{root}{ind.get('suffix') or ''}" for root in ind["roots"]}
            out.setdefault(ps["name"], set()).update(found)
    return out


def hosts_of(workload: dict[str, Any] | None) -> set[str]:
    """The hosts Kueue's topology-aware scheduling placed a Workload's pods on."""
    return {h for hosts in topology_domains(workload, "kubernetes.io/hostname").values() for h in hosts}


def brief_workload(workload: dict[str, Any] | None) -> str:
    """A Workload's conditions, unhealthy nodes and hosts, as YAML for an assertion's message."""
    status = (workload or {}).get("status") or {}
    return yaml.safe_dump({"conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                                          for c in status.get("conditions") or []],
                           "unhealthyNodes": status.get("unhealthyNodes"),
                           "hosts": sorted(hosts_of(workload))})


def rendered_kueue_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The Kueue Configuration of the cluster, as its rendered chart values carry it."""
    for obj in objects:
        spec = obj.get("spec") or {}
        values = spec.get("values") or ((spec.get("source") or {}).get("helm") or {}).get("valuesObject")
        text = ((values or {}).get("managerConfig") or {}).get("controllerManagerConfigYaml")
        if text and obj["metadata"]["name"].endswith("kueue"):
            return dict(yaml.safe_load(text))
    raise AssertionError("no rendered Kueue Configuration (managerConfig.controllerManagerConfigYaml) found")


def gpu_jobs_fitting(limit: int, per_node: int) -> int:
    """Nodes of `per_node` GPUs that fit in `limit` GPUs."""
    return math.floor(limit / per_node)


# ------------------------------------------------------------------ jobs and their Workloads


def custom(stack: Stack, api: Any = None) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api or stack.client())


JOB_KINDS = {"JobSet": (JOBSET, "v1alpha2", "jobsets", "jobset.sigs.k8s.io/jobset-name"),
             "Job": ("batch", "v1", "jobs", "batch.kubernetes.io/job-name"),
             "RayJob": ("ray.io", "v1", "rayjobs", "ray.io/originated-from-cr-name"),
             "RayCluster": ("ray.io", "v1", "rayclusters", "ray.io/cluster"),
             "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "jobset.sigs.k8s.io/jobset-name")}
"""(group, version, plural, the label naming the job on its pods) of each kind of job a profile renders."""


def job_object(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> dict[str, Any]:
    group, version, plural, _ = JOB_KINDS[kind]
    found: dict[str, Any] = custom(stack).get_namespaced_custom_object(group, version, namespace, plural, name)
    return found


def workload_of(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> dict[str, Any] | None:
    uid = job_object(stack, namespace, name, kind)["metadata"]["uid"]
    found = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace, "workloads",
                                                        label_selector=f"kueue.x-k8s.io/job-uid={uid}")
    return found["items"][0] if found["items"] else None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The condition `kind` of an object's status, or {}."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}


def flavors(workload: dict[str, Any] | None) -> set[str]:
    """The ResourceFlavors (pools) Kueue admitted a Workload's pod sets to."""
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    return {flavor for ps in admission.get("podSetAssignments") or [] for flavor in (ps.get("flavors") or {}).values()}


def gpu_jobset(team: TeamConfig, name: str, pods: int, gpus: int) -> dict[str, Any]:
    """A JobSet on the team's queue, pinned to no pool: `pods` pods of `gpus` GPUs each."""
    container = {"name": "c", "image": "registry.example/e2e:1",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": f"{JOBSET}/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": team.namespace_names[0],
                         "labels": {"kueue.x-k8s.io/queue-name": team.name}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": pods, "completions": pods, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [container]}}}}}]}}
