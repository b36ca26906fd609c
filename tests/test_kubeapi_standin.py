"""The API stand-in behaves as the API server does, seen through the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from generator.jobs import connect
from tests.kubeapi import ApiError

MERGE = "application/merge-patch+json"


def message(exc: ApiException) -> str:
    return str(json.loads(exc.body)["message"])


def _node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": {}}


def test_resource_version_conflicts_and_not_found(kube: Any) -> None:
    _, url = kube
    core = client.CoreV1Api(connect(token="admin-token", server=url))
    created = core.create_node(_node("n1"))
    rv = created.metadata.resource_version
    with pytest.raises(ApiException) as info:
        core.create_node(_node("n1"))
    assert info.value.status == 409 and "already exists" in message(info.value)
    patched = core.patch_node("n1", {"spec": {"unschedulable": True}, "metadata": {"resourceVersion": rv}},
                              _content_type=MERGE)
    assert patched.spec.unschedulable is True and int(patched.metadata.resource_version) > int(rv)
    with pytest.raises(ApiException) as info:  # stale resourceVersion
        core.patch_node("n1", {"metadata": {"resourceVersion": rv, "labels": {"x": "y"}}}, _content_type=MERGE)
    assert info.value.status == 409 and "the object has been modified" in message(info.value)
    with pytest.raises(ApiException) as info:
        core.read_node("missing")
    assert info.value.status == 404 and '"missing" not found' in message(info.value)


def test_patch_content_types_are_honoured(kube: Any) -> None:
    _, url = kube
    core = client.CoreV1Api(connect(token="admin-token", server=url))
    core.create_node(_node("n1", {"a": "1", "b": "2"}))
    merged = core.patch_node("n1", {"metadata": {"labels": {"a": None, "c": "3"}}}, _content_type=MERGE)
    assert merged.metadata.labels == {"b": "2", "c": "3"}
    jsonp = core.patch_node("n1", [{"op": "add", "path": "/metadata/labels/d", "value": "4"},
                                   {"op": "remove", "path": "/metadata/labels/b"}])
    assert jsonp.metadata.labels == {"c": "3", "d": "4"}
    # A dict declared as a JSON patch is a 400 (the client itself never sends one: it rewrites it).
    state, _ = kube
    with pytest.raises(ApiError) as err:
        state.handle("PATCH", "/api/v1/nodes/n1", {"Authorization": "Bearer admin-token",
                                                    "Content-Type": "application/json-patch+json"}, b'{"a": 1}')
    assert err.value.code == 400
    # The client sends a dict as a strategic merge patch: fine for built-in kinds ...
    assert core.patch_node("n1", {"metadata": {"labels": {"e": "5"}}}).metadata.labels["e"] == "5"
    # ... but a strategic merge patch on a custom resource is refused, as by a real API server.
    objects = client.CustomObjectsApi(core.api_client)
    objects.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ns", "jobsets",
                                            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                             "metadata": {"name": "j"}, "spec": {}})
    with pytest.raises(ApiException) as info:
        objects.patch_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ns", "jobsets", "j",
                                               {"spec": {"suspend": True}},
                                               _content_type="application/strategic-merge-patch+json")
    assert info.value.status == 415
    patched = objects.patch_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ns", "jobsets", "j",
                                                     {"spec": {"suspend": True}})  # merge patch by default
    assert patched["spec"] == {"suspend": True}


def test_label_selectors_and_auth(kube: Any) -> None:
    state, url = kube
    core = client.CoreV1Api(connect(token="admin-token", server=url))
    for name, pool in (("a", "h100"), ("b", "h100"), ("c", "a100")):
        core.create_node(_node(name, {"pool": pool}))
    assert [n.metadata.name for n in core.list_node(label_selector="pool=h100").items] == ["a", "b"]
    assert [n.metadata.name for n in core.list_node(label_selector="pool in (a100)").items] == ["c"]
    with pytest.raises(ApiException) as info:
        client.CoreV1Api(connect(token="wrong", server=url)).list_node()
    assert info.value.status == 401
    state.tokens["bob-token"] = "bob"
    state.authorize = lambda user, verb, res, ns: user == "admin" or verb in ("get", "list")
    with pytest.raises(ApiException) as info:
        client.CoreV1Api(connect(token="bob-token", server=url)).delete_node("a")
    assert info.value.status == 403
    assert 'User "bob" cannot delete resource "nodes"' in message(info.value)
