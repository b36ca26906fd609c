"""Nodes as the reconciler sees them, and its decisions carried out through the official client.

Every write is a JSON merge patch carrying the resourceVersion it was computed from: if the Node
changed in between (409 Conflict), the Node is read again, the action is re-checked against
what is there now (still ours? still schedulable?), and retried. One audit line per write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.jobs.connection import timeout
from generator.reconciler.model import (
    ANNOTATION_EVIDENCE,
    ANNOTATION_HEALTHY,
    ANNOTATION_HISTORY,
    ANNOTATION_HUMAN,
    ANNOTATION_OWNED,
    ANNOTATION_REASON,
    ANNOTATION_SINCE,
    LABEL_REPAIR,
    TAINT_KEY,
    ClearHumanRelease,
    Cordon,
    Decision,
    Event,
    NodeAction,
    NodeState,
    NoteHumanRelease,
    Release,
    SetHealthyChecks,
)

MERGE = "application/merge-patch+json"
RETRIES = 3
audit = logging.getLogger("fleetgen.health.audit")


@dataclass(frozen=True)
class PoolSelector:
    """A node pool: its nodes carry all of these labels."""

    name: str
    labels: dict[str, str]


def _floats(text: str | None) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in json.loads(text or "[]"))
    except (ValueError, TypeError):
        return ()


def node_state(node: dict[str, Any], pools: list[PoolSelector]) -> NodeState | None:
    """The reconciler's view of a Node (None when it is in no GPU pool)."""
    meta = node.get("metadata") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    pool = next((p.name for p in pools if all(labels.get(k) == v for k, v in p.labels.items())), None)
    if pool is None:
        return None
    since = notes.get(ANNOTATION_SINCE)
    return NodeState(
        name=meta["name"], pool=pool, unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        owned=notes.get(ANNOTATION_OWNED) == "true", reason=notes.get(ANNOTATION_REASON, ""),
        since=float(since) if since else None, healthy_checks=int(notes.get(ANNOTATION_HEALTHY) or 0),
        history=_floats(notes.get(ANNOTATION_HISTORY)), human_released=notes.get(ANNOTATION_HUMAN, ""),
        needs_repair=labels.get(LABEL_REPAIR) == "true")


def _taints_without_ours(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_KEY]


def _patch_for(action: NodeAction, node: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The merge patch for `action` on the Node as it is now, or None if it no longer applies."""
    spec = node.get("spec") or {}
    notes = (node.get("metadata") or {}).get("annotations") or {}
    owned = notes.get(ANNOTATION_OWNED) == "true"
    if isinstance(action, Cordon):
        if spec.get("unschedulable") or owned:
            return None  # someone cordoned it meanwhile, or we already did
        taint = {"key": TAINT_KEY, "value": action.reason.replace(",", ".")[:63], "effect": "NoSchedule"}
        patch: dict[str, Any] = {
            "spec": {"unschedulable": True, "taints": [*_taints_without_ours(node), taint]},
            "metadata": {"annotations": {
                ANNOTATION_OWNED: "true", ANNOTATION_REASON: action.reason, ANNOTATION_SINCE: repr(now),
                ANNOTATION_HEALTHY: "0", ANNOTATION_HISTORY: json.dumps(list(action.history)),
                ANNOTATION_EVIDENCE: json.dumps([{"signal": e.signal, "gpu": e.gpu, "detail": e.detail}
                                                 for e in action.evidence], sort_keys=True),
                ANNOTATION_HUMAN: None}}}
        if action.repair:
            patch["metadata"]["labels"] = {LABEL_REPAIR: "true"}
        return patch
    if isinstance(action, Release):
        if not owned:
            return None  # only our own cordons are lifted
        return {"spec": {"unschedulable": None, "taints": _taints_without_ours(node)},
                "metadata": {"annotations": {ANNOTATION_OWNED: None, ANNOTATION_REASON: None, ANNOTATION_SINCE: None,
                                             ANNOTATION_HEALTHY: None, ANNOTATION_EVIDENCE: None}}}
    if isinstance(action, SetHealthyChecks):
        return {"metadata": {"annotations": {ANNOTATION_HEALTHY: str(action.count)}}} if owned else None
    if isinstance(action, NoteHumanRelease):
        if not owned or spec.get("unschedulable"):
            return None
        return {"spec": {"taints": _taints_without_ours(node)},
                "metadata": {"annotations": {ANNOTATION_OWNED: None, ANNOTATION_REASON: None, ANNOTATION_SINCE: None,
                                             ANNOTATION_HEALTHY: None, ANNOTATION_HUMAN: action.reason}}}
    if isinstance(action, ClearHumanRelease):
        return {"metadata": {"annotations": {ANNOTATION_HUMAN: None}}} if ANNOTATION_HUMAN in notes else None
    return None


class Executor:
    """Carries out decisions on one cluster (or only logs them, in dry run)."""

    def __init__(self, api: Any, dry_run: bool = False, clock: Callable[[], float] | None = None,
                 namespace: str = "default") -> None:
        import time

        self.api = api
        self.dry_run = dry_run
        self.clock = clock or time.time
        self.namespace = namespace
        self._uids: dict[str, str] = {}
        """Node name -> uid from the last read: Events name their Node by uid too, which is how
        `kubectl describe node` finds them (it selects involvedObject.uid)."""
        self._events: dict[tuple[str, str, str, str], tuple[str, int]] = {}
        """(node, uid, reason, message) -> (Event name, count): a repeat updates the Event's count
        and lastTimestamp, as client-go's event correlator does, instead of a new Event per loop."""

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def read(self, pools: list[PoolSelector]) -> dict[str, NodeState]:
        """Every GPU node's state."""
        found = self.api.sanitize_for_serialization(self._core().list_node(_request_timeout=timeout(self.api)).items)
        self._uids = {n["metadata"]["name"]: str(n["metadata"].get("uid") or "") for n in found}
        states = (node_state(n, pools) for n in found)
        return {s.name: s for s in states if s is not None}

    def apply(self, decision: Decision, may_write: Callable[[], bool] = lambda: True) -> list[str]:
        """Carry out the decision's actions; returns one line per write (or planned write in dry run).

        `may_write` is asked before every write (the leader's Lease check): the first no stops the rest.
        """
        done = []
        for index, action in enumerate(decision.actions):
            if not self.dry_run and not may_write():
                audit.warning(json.dumps({"stopped": "lost the lease", "unapplied": len(decision.actions) - index}))
                break
            line = self._event(action) if isinstance(action, Event) else self._node(action)
            if line:
                done.append(line)
        return done

    def _node(self, action: NodeAction) -> str | None:
        from kubernetes.client.exceptions import ApiException

        core = self._core()
        for _attempt in range(RETRIES):
            node = self.api.sanitize_for_serialization(core.read_node(action.node, _request_timeout=timeout(self.api)))
            patch = _patch_for(action, node, self.clock())
            if patch is None:
                return None
            patch.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
            line = json.dumps({"action": type(action).__name__, "node": action.node, "patch": patch,
                               "dryRun": self.dry_run}, sort_keys=True)
            if self.dry_run:
                audit.info(line)
                return line
            try:
                core.patch_node(action.node, patch, _content_type=MERGE, _request_timeout=timeout(self.api))
            except ApiException as exc:
                if exc.status == 409:
                    continue  # changed under us: read again and re-check
                raise
            audit.info(line)
            return line
        audit.warning(json.dumps({"action": type(action).__name__, "node": action.node,
                                  "gaveUp": f"{RETRIES} conflicts"}))
        return None

    def _event(self, event: Event) -> str | None:
        from kubernetes import client

        line = json.dumps({"action": "Event", "node": event.node, "reason": event.reason, "dryRun": self.dry_run})
        if self.dry_run:
            return None
        from kubernetes.client.exceptions import ApiException

        stamp = self._stamp()
        uid = self._uids.get(event.node, "")
        message = event.message[:1024]
        key = (event.node, uid, event.reason, message)
        if key in self._events:
            name, count = self._events[key]
            try:
                self._core().patch_namespaced_event(
                    name, self.namespace, {"count": count + 1, "lastTimestamp": stamp.isoformat()},
                    _request_timeout=timeout(self.api))
                self._events[key] = (name, count + 1)
                return line
            except ApiException as exc:
                if exc.status != 404:  # expired (Events live an hour): a new one below
                    raise
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{event.node}.", namespace=self.namespace),
            involved_object=client.V1ObjectReference(kind="Node", name=event.node, api_version="v1", uid=uid or None),
            type=event.kind, reason=event.reason, message=message, first_timestamp=stamp,
            last_timestamp=stamp, count=1, source=client.V1EventSource(component="fleetgen-health"))
        created = self._core().create_namespaced_event(self.namespace, body, _request_timeout=timeout(self.api))
        self._events[key] = (str(created.metadata.name), 1)
        return line

    def _stamp(self) -> Any:
        import datetime

        return datetime.datetime.fromtimestamp(self.clock(), tz=datetime.timezone.utc)
