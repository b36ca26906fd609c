"""NetworkPolicy rules for the platform's own pods (the health reconciler, the kernel-log collector).

Each pod gets one policy that denies by default both ways, then lets in only what scrapes it and lets
out only what it is configured to talk to: the cluster DNS, the API server, and the in-cluster
Services named by its URLs. A Service's port is translated to its pods' port by the time a CNI
matches an egress rule, so a rule names the pods' port, which only the chart that runs them knows;
a URL fleetgen did not choose (a cluster-file override) opens its namespace, or its port anywhere
when it is outside the cluster. Enforced by the cluster's CNI (one that implements NetworkPolicy).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

DNS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
       "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
ANYWHERE = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]
API_SERVER_PORTS = [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
"""The API server's own ports (managed clusters serve on 443, kubeadm on 6443). Its address is not in the
cluster file and it is no pod a selector could name, so these ports are open to any address."""


def in_namespace(namespace: str, pods: dict[str, str] | None = None) -> dict[str, Any]:
    """A peer: the pods labelled `pods` (every pod, if None) of `namespace`."""
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    if pods is not None:
        peer["podSelector"] = {"matchLabels": dict(pods)}
    return peer


def tcp(port: int | str) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port}]


def dns_rule() -> dict[str, Any]:
    return {"to": [DNS], "ports": DNS_PORTS}


def api_server_rule() -> dict[str, Any]:
    return {"to": ANYWHERE, "ports": API_SERVER_PORTS}


def url_rule(url: str) -> dict[str, Any]:
    """Egress to a URL fleetgen did not choose: `<service>.<namespace>.svc...` opens that namespace
    (the Service's pod port is unknown); any other host opens the URL's port to any address."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    labels = host.split(".")
    if len(labels) >= 3 and labels[2] == "svc":
        return {"to": [in_namespace(labels[1])]}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"to": ANYWHERE, "ports": tcp(port)}


def policy(name: str, namespace: str, meta: dict[str, Any], pods: dict[str, str],
           ingress: list[dict[str, Any]], egress: list[dict[str, Any]]) -> dict[str, Any]:
    """A NetworkPolicy on `pods` that allows only `ingress` in and `egress` out. No rules of a type
    means nothing of it: the key is then left out, as the API server returns it (an empty list would
    read back as absent, a difference GitOps would keep syncing)."""
    rules = {key: value for key, value in (("ingress", ingress), ("egress", egress)) if value}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": {"podSelector": {"matchLabels": dict(pods)}, "policyTypes": ["Ingress", "Egress"], **rules}}
