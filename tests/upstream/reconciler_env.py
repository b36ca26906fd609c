"""The reconciler's surroundings on the real stack: its rendered namespace, ServiceAccount and RBAC,
a token of that ServiceAccount, GPU nodes of a pool of its own per test, and what the audit log
says it wrote."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from generator.jobs import Connection, connect
from generator.reconciler.informer import NodeCache
from generator.reconciler.model import Evidence, Observation
from generator.reconciler.nodes import PoolSelector
from tests.conftest import REPO
from tests.upstream.cluster import Identity, Stack
from tests.upstream.fleet import apply, kustomize_build

NAMESPACE = "fleetgen-system"
SERVICE_ACCOUNT = "fleetgen-health"
HEALTH_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
WRITES = ("create", "update", "patch", "delete")


def install_health_rbac(stack: Stack, cluster: str = "prod-east") -> None:
    """A cluster's rendered reconciler namespace, ServiceAccount and RBAC (idempotent: server-side
    apply). prod-east's unless asked: prod-west's also allows drains (pods, evictions)."""
    for obj in kustomize_build(REPO / f"rendered/{cluster}/health"):
        if obj["kind"] in HEALTH_KINDS:
            apply(stack, obj)


@dataclass
class Pool:
    """GPU nodes of a pool only this test uses, and the reconciler's view of it."""

    stack: Stack
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def labels(self) -> dict[str, str]:
        return {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "fleetgen.test/pool": self.tag}

    @property
    def selector(self) -> list[PoolSelector]:
        return [PoolSelector("h100", self.labels)]

    def name(self, i: int) -> str:
        return f"gpu-{self.tag}-{i}"

    def add(self, count: int, cpu_node: bool = False, first: int = 0) -> None:
        """Ready nodes `first` .. `first + count - 1` with the GPU taint (see fleet.create_nodes for the
        not-ready taint they lose)."""
        from tests.upstream.fleet import create_nodes

        ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}]}
        nodes = [{"metadata": {"name": self.name(i), "labels": dict(self.labels)},
                  "spec": {"taints": [dict(GPU_TAINT)]}, "status": ready} for i in range(first, first + count)]
        if cpu_node:
            nodes.append({"metadata": {"name": f"cpu-{self.tag}", "labels": {"fleetgen.test/pool": self.tag}},
                          "spec": {"taints": []}, "status": ready})
        create_nodes(self.stack, nodes)

    def get(self, name: str) -> dict[str, Any]:
        from kubernetes import client

        api = self.stack.client()
        return dict(api.sanitize_for_serialization(client.CoreV1Api(api).read_node(name)))

    def update(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Read, change and write back a Node as another client (kubectl edit), guarded by resourceVersion."""
        from kubernetes import client

        node = self.get(name)
        change(node)
        client.CoreV1Api(self.stack.client()).replace_node(name, node)

    def events(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        from kubernetes import client

        api = self.stack.client()
        found = client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        return [api.sanitize_for_serialization(e) for e in found.items]

    def cordoned(self, owned_by_us: str) -> set[str]:
        from kubernetes import client

        api = self.stack.client()
        nodes = client.CoreV1Api(api).list_node(label_selector=f"fleetgen.test/pool={self.tag}").items
        return {n.metadata.name for n in nodes
                if n.spec.unschedulable and (n.metadata.annotations or {}).get(owned_by_us)}


def reconciler_identity(stack: Stack, cluster: str = "prod-east") -> Identity:
    """A kubeconfig with a fresh token of the rendered ServiceAccount (each call: a new credential)."""
    install_health_rbac(stack, cluster)
    return stack.token_identity(NAMESPACE, SERVICE_ACCOUNT)


def reconciler_api(stack: Stack, cluster: str = "prod-east") -> Connection:
    return connect(kubeconfig=str(reconciler_identity(stack, cluster).kubeconfig))


def token_of(identity: Identity) -> str:
    """The bearer token in a token identity's kubeconfig."""
    import yaml

    return str(yaml.safe_load(identity.kubeconfig.read_text())["users"][0]["user"]["token"])


def credential_id(identity: Identity) -> str:
    """The credential id the audit log records for a ServiceAccount token: its JWT id."""
    import base64
    import json

    payload = token_of(identity).split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"JTI={claims['jti']}"


def writers(stack: Stack, credentials: set[str], resources: tuple[str, ...] = ("nodes", "events")) -> set[str]:
    """Which of `credentials` wrote to `resources` (successfully), per the audit log."""
    found = set()
    for event in stack.audit():
        ids = set(((event.get("user") or {}).get("extra") or {}).get("authentication.kubernetes.io/credential-id", []))
        if ids & credentials and event.get("verb") in WRITES and (event.get("objectRef") or {}).get(
                "resource") in resources and (event.get("responseStatus") or {}).get("code", 0) < 300:
            found |= ids & credentials
    return found


def reset_leadership(stack: Stack) -> None:
    """No Lease and no breaker state: a reconciler starting afresh in fleetgen-system."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from generator.reconciler.lease import BREAKER, LEASE

    api = stack.client()
    for delete in (lambda: client.CoordinationV1Api(api).delete_namespaced_lease(LEASE, NAMESPACE),
                   lambda: client.CoreV1Api(api).delete_namespaced_config_map(BREAKER, NAMESPACE)):
        try:
            delete()
        except ApiException as exc:
            if exc.status != 404:
                raise


def audit_writes(stack: Stack, user: str, resources: tuple[str, ...] = ("nodes", "events")) -> list[dict[str, Any]]:
    """Writes by `user` to `resources`, as the API server's audit log recorded them."""
    return [e for e in stack.audit() if e.get("user", {}).get("username") == user and e.get("verb") in WRITES
            and (e.get("objectRef") or {}).get("resource") in resources]


@contextmanager
def interference(before_patch: Callable[[str], None]) -> Iterator[list[str]]:
    """Run `before_patch(node)` ahead of the next reconciler PATCH of a Node: a real concurrent write."""
    from kubernetes import client

    original = client.CoreV1Api.patch_node
    seen: list[str] = []

    def patched(self: Any, name: str, body: Any, **kwargs: Any) -> Any:
        seen.append(name)
        before_patch(name)
        return original(self, name, body, **kwargs)

    client.CoreV1Api.patch_node = patched  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        client.CoreV1Api.patch_node = original  # type: ignore[method-assign]


class Faulty:
    """An XID on some of the pool's nodes, from a source that answers at once."""

    def __init__(self, *nodes: str) -> None:
        self.nodes = set(nodes)

    def observe(self, names: list[str]) -> dict[str, Observation]:
        return {n: Observation(n, (Evidence("xid-79", "cordon", gpu="0"),) if n in self.nodes else ())
                for n in names}


def watch_for(cache: NodeCache, seconds: float) -> NodeCache:
    """`cache` listing and watching in its thread for `seconds`, then stopped (and ended)."""
    stop = threading.Event()
    thread = cache.start(stop)
    time.sleep(seconds)
    stop.set()
    thread.join(10)
    assert not thread.is_alive(), "the node watch did not stop"
    return cache


def misshapen(name: str) -> Callable[[bytes], bytes]:
    """An edit (tests/faultproxy.py) of the real server's NodeList: `name`'s status.conditions becomes
    a string, a Node the real API server would never store (a misbehaving server or proxy's)."""

    def edit(body: bytes) -> bytes:
        listed = json.loads(body)
        for item in listed.get("items") or []:
            if item["metadata"]["name"] == name:
                item["status"]["conditions"] = "GPUHealthy"
        return json.dumps(listed).encode()
    return edit
