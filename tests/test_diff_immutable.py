"""The diff's immutable-field risks against the real API server with Kueue's CRDs (issue 15):
every update the table flags is refused by the server, and the same update without the
condition (a flavor with no topologyName) is accepted and not flagged."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from generator.diff.objects import Change, Obj, field_changes
from generator.diff.risks import IMMUTABLE, risks
from tests.conftest import REPO
from tests.upstream.fleet import ApplyError, apply

RENDERED = REPO / "rendered" / "prod-east"


def _load(rel: str, name: str) -> dict[str, Any]:
    body = dict(yaml.safe_load((RENDERED / rel).read_text()))
    body["metadata"] = {"name": name, **({"namespace": body["metadata"]["namespace"]}
                                          if "namespace" in body["metadata"] else {})}
    return body


def _set(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node = out
    *parents, last = dotted.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return out


def _flagged(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    key = ("prod-east", old["apiVersion"].rpartition("/")[0], old["kind"], old["metadata"].get("namespace", ""),
           old["metadata"]["name"])
    change = Change("change", Obj(key, "x", old, ""), Obj(key, "x", new, ""), field_changes(old, new, []))
    return [r.message for r in risks([change], []) if r.rule == "immutable-field"]


# (rule's kind and field, the object, a new value for the field)
CASES = [
    ("ResourceFlavor", "spec.nodeLabels", "kueue/resourceflavor-h100.yaml",
     {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "node.acme.io/tier": "gold"}),
    ("ResourceFlavor", "spec.tolerations", "kueue/resourceflavor-h100.yaml",
     [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    ("ResourceFlavor", "spec.topologyName", "kueue/resourceflavor-h100.yaml", "other-topology"),
    ("Topology", "spec.levels", "kueue/topology-h100.yaml", [{"nodeLabel": "kubernetes.io/hostname"}]),
]


def test_every_immutable_rule_has_a_case() -> None:
    assert {(r.kind, r.field) for r in IMMUTABLE} - {(k, f) for k, f, *_ in CASES} == {
        ("LocalQueue", "spec.clusterQueue"), ("AdmissionCheck", "spec.controllerName")}


@pytest.mark.parametrize(("kind", "field", "rel", "value"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_what_the_diff_flags_the_api_server_refuses(kube_stack: Any, kind: str, field: str, rel: str,
                                                    value: Any) -> None:
    name = f"immutable-{kind.lower()}-{field.rsplit('.', 1)[1].lower()}"
    old = _load(rel, name)
    new = _set(old, field, value)
    assert any(field in m for m in _flagged(old, new)), kind
    apply(kube_stack, old)
    with pytest.raises(ApplyError, match="immutable"):
        apply(kube_stack, new)


def test_a_local_queues_cluster_queue_is_refused_and_flagged(kube_stack: Any) -> None:
    apply(kube_stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "immutable-lq"}})
    old = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "q", "namespace": "immutable-lq"}, "spec": {"clusterQueue": "a"}}
    new = _set(old, "spec.clusterQueue", "b")
    assert _flagged(old, new)
    apply(kube_stack, old)
    with pytest.raises(ApplyError, match="immutable"):
        apply(kube_stack, new)


def test_a_flavor_without_topology_takes_new_node_labels_unflagged(kube_stack: Any) -> None:
    old = _load("kueue/resourceflavor-h100.yaml", "plain-flavor")
    del old["spec"]["topologyName"]
    new = _set(old, "spec.nodeLabels", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "tier": "gold"})
    assert _flagged(old, new) == []
    apply(kube_stack, old)
    assert apply(kube_stack, new)["spec"]["nodeLabels"]["tier"] == "gold"


def test_an_admission_checks_controller_is_refused_and_flagged(kube_stack: Any) -> None:
    """kueue v0.19.2 apis/kueue/v1beta2/admissioncheck_types.go:52; the body as fleetgen compiles it."""
    from generator.checks import load_fleet
    from generator.compile.kueue import admission_checks
    from generator.config.cluster import AdmissionCheck
    from generator.config.fleet import Loaded

    loaded = load_fleet(REPO).clusters["prod-east"]
    check = AdmissionCheck(name="immutable-check", controller_name="acme.example/budget-approval")
    cluster = Loaded(loaded.config.model_copy(update={"admission_checks": [check]}), loaded.source)
    old = admission_checks(cluster)[0].body
    new = _set(old, "spec.controllerName", "acme.example/other")
    assert _flagged(old, new)
    apply(kube_stack, old)
    with pytest.raises(ApplyError, match="immutable"):
        apply(kube_stack, new)
