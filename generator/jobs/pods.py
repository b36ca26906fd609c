"""What a job's pods say once Kueue has admitted it: running, or why not (the scheduler's message,
an image that cannot be pulled). A job is not running while all its pods wait."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from generator.connection import Connection, timeout

RUNNING = frozenset({"Running", "Succeeded"})
"""Pods whose containers have started (a finished pod of a running job ran)."""
SHOWN = 3
"""Distinct reasons a summary names; the rest are counted."""


def state(pod: Any) -> str:
    """`Running`, `Succeeded`, `Failed`, or `Pending` with why: unschedulable, gated, or a container waiting."""
    status = pod.status
    phase = str(getattr(status, "phase", None) or "Pending")
    if phase != "Pending":
        return phase
    unscheduled = next((c for c in getattr(status, "conditions", None) or []
                        if c.type == "PodScheduled" and c.status == "False"), None)
    if unscheduled is not None:
        return f"Pending: {unscheduled.message or unscheduled.reason}"
    gates = [g.name for g in getattr(pod.spec, "scheduling_gates", None) or []]
    if gates:
        return f"Pending: waiting for scheduling gates {', '.join(gates)}"
    for container in getattr(status, "container_statuses", None) or []:
        waiting = getattr(container.state, "waiting", None) if container.state else None
        if waiting is not None and waiting.reason not in (None, "ContainerCreating", "PodInitializing"):
            return f"Pending: {container.name}: {waiting.reason}" + (f" ({waiting.message})" if waiting.message else "")
    return "Pending"


def states(api: Connection, namespace: str, selector: str) -> dict[str, str]:
    """Each matching pod's state, by name."""
    from kubernetes import client

    found = client.CoreV1Api(api.client).list_namespaced_pod(namespace, label_selector=selector,
                                                             _request_timeout=timeout(api)).items
    return dict(sorted((str(p.metadata.name), state(p)) for p in found if p.metadata is not None and p.status))


def summary(by_pod: dict[str, str]) -> str:
    """`3 of 4 pods running; 1 Pending: 0/32 nodes are available: ...`, reasons most common first."""
    started = sum(1 for s in by_pod.values() if s in RUNNING)
    counts = Counter(s for s in by_pod.values() if s not in RUNNING)
    parts = [f"{n} {s}" for s, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:SHOWN]]
    rest = sum(counts.values()) - sum(n for _, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))[:SHOWN])
    if rest:
        parts.append(f"{rest} more waiting")
    return "; ".join([f"{started} of {len(by_pod)} pods running", *parts])


def log_lines(api: Connection, namespace: str, pod: str, container: str, follow: bool = False) -> Iterator[str]:
    """The container's log, line by line as it arrives (through the API server, from the node's kubelet)."""
    from kubernetes import client

    response: Any = client.CoreV1Api(api.client).read_namespaced_pod_log(
        pod, namespace, container=container, follow=follow, _preload_content=False, _request_timeout=timeout(api))
    pending = b""
    for chunk in response.stream(4096):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")
