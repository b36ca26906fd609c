"""Nodes as the reconciler sees them, and its decisions carried out through the official client.

Every write is a JSON merge patch carrying the resourceVersion it was computed from: if the Node
changed in between (409 Conflict), the Node is read again, the action is re-checked against
what is there now (still ours? still schedulable?), and retried. One audit line per write.

Each node is on its own: an error on one node (gone, refused, throttled, timed out) is retried
as `RETRY` says and otherwise given up for this loop with an audit line, and the loop carries on
with the next node. Nodes are listed in pages of raw JSON, turned into NodeState page by page,
so 10k Node objects of 14 KB are never all in memory at once.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from generator.compile.health import EVENTS_NAMESPACE
from generator.connection import ClusterError, Connection, timeout
from generator.reconciler.model import (
    ANNOTATION_BOOT,
    ANNOTATION_DRAINED,
    ANNOTATION_EVIDENCE,
    ANNOTATION_HEALTHY,
    ANNOTATION_HISTORY,
    ANNOTATION_HUMAN,
    ANNOTATION_OWNED,
    ANNOTATION_REASON,
    ANNOTATION_SINCE,
    CONDITION_TYPE,
    LABEL_REPAIR,
    TAINT_KEY,
    ClearHumanRelease,
    Cordon,
    Decision,
    Drain,
    Event,
    Evidence,
    NodeAction,
    NodeCondition,
    NodeState,
    NoteHumanRelease,
    Release,
    SetCondition,
    SetHealthyChecks,
    condition,
)

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
GPU_RESOURCE = "nvidia.com/gpu"
RETRIES = 3
PAGE = 250
"""Nodes per list page: 250 x 14 KB is about 3.5 MB of JSON at a time."""
LIST_MAX_NODES = 50_000
"""Most Nodes one list may carry: ten times the 5,000 Nodes Kubernetes supports in one cluster."""
LIST_MAX_PAGES = 2 * LIST_MAX_NODES // PAGE
"""Most pages one list may take (twice what the Nodes need, for pages a server answers short)."""
LIST_MAX_PAGE_BYTES = 64 << 20
"""Most bytes one page may hold: 250 Nodes of 256 KiB each (the kubelet reports at most 50 images,
so a Node is some 14 KB), the same bound as a Prometheus or Loki answer; a server sending more is
cut off before the reconciler's memory is (512 MiB in its pod)."""
LIST_DEADLINE_SECONDS = 120.0
"""Longest one list may take, all pages together (10,000 Nodes: about 1 s; see Benchmarks)."""
MAX_WAIT_SECONDS = 10.0
"""Longest wait before a retry, whatever a Retry-After header asks (the loop must go on)."""
RETRY: dict[int, str] = {
    409: "reread",    # the Node changed under us: read it again and re-check the action
    429: "wait",      # throttled (API priority and fairness): wait as long as Retry-After says
    500: "backoff", 502: "backoff", 503: "backoff", 504: "backoff",
}
"""HTTP status -> how to retry. Anything else (404 gone, 403, 422 invalid) is not retried."""
MIRROR_POD = "kubernetes.io/config.mirror"
EVICTIONS_PER_LOOP = 50
"""Most evictions one loop asks for, all nodes together (the rest wait for the next loop)."""
LABEL_VALUE_INVALID = re.compile(r"[^A-Za-z0-9_.-]")
audit = logging.getLogger("fleetgen.health.audit")


@dataclass(frozen=True)
class PoolSelector:
    """A node pool: its nodes carry all of these labels."""

    name: str
    labels: dict[str, str]


def _floats(text: str | None) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in json.loads(text or "[]"))
    except (ValueError, TypeError, RecursionError):  # RecursionError: "[[[[..." as deep as 256 KiB allows
        return ()


def _number(text: object, kind: type[float] | type[int]) -> Any:
    """An annotation's number, or None when it is not one (anyone who may patch the Node may write
    it: a bad value must not fail the whole node list)."""
    try:
        value = kind(text) if isinstance(text, str) and len(text) <= 32 else None
    except ValueError:
        return None
    return value if value is None or math.isfinite(value) else None


class Unreadable(Exception):
    """A Node whose JSON has a field of the wrong type (only a misbehaving API server or proxy sends
    one: the real one validates Nodes): that node is skipped and counted, its health unknown."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"Node {name or '(no name)'}: {why}")
        self.name = name
        self.why = why


_SHAPE: tuple[tuple[tuple[str, ...], type], ...] = (
    (("metadata", "annotations"), dict), (("spec",), dict), (("status",), dict),
    (("status", "capacity"), dict), (("status", "nodeInfo"), dict), (("status", "conditions"), list))
"""The containers `node_state` reads below `metadata.labels`, parents first; absent, null or empty
is as good as empty (as the reader takes it)."""
_ANNOTATIONS_READ = (ANNOTATION_OWNED, ANNOTATION_REASON, ANNOTATION_SINCE, ANNOTATION_HEALTHY, ANNOTATION_HISTORY,
                     ANNOTATION_HUMAN, ANNOTATION_BOOT, ANNOTATION_DRAINED)
_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
               float: "a number", type(None): "null"}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _wrong_field(node: dict[str, Any]) -> str | None:
    """The first field `node_state` reads that has the wrong type, as `path is X, not Y`."""
    for path, kind in _SHAPE:
        value: Any = node
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value and not isinstance(value, kind):
            return f"{'.'.join(path)} is {_json_type(value)}, not {_JSON_TYPES[kind]}"
    for index, item in enumerate((node.get("status") or {}).get("conditions") or []):
        if not isinstance(item, dict):
            return f"status.conditions[{index}] is {_json_type(item)}, not an object"
    notes = node["metadata"].get("annotations") or {}
    for key in _ANNOTATIONS_READ:
        if key in notes and not isinstance(notes[key], str):
            return f"metadata.annotations[{key}] is {_json_type(notes[key])}, not a string"
    return None


def node_state(node: object, pools: list[PoolSelector]) -> NodeState | None:
    """The reconciler's view of a Node (None when it is in no GPU pool). Any JSON value may come in:
    a Node whose name, labels or fields it reads have the wrong type raises Unreadable (a Node in no
    GPU pool is not read further, so only GPU nodes and nodes whose pool cannot be told count)."""
    meta = node.get("metadata") if isinstance(node, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(node, dict) or not isinstance(meta, dict) or not isinstance(name, str) or not name:
        raise Unreadable("", "no metadata.name: not a Node")
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        raise Unreadable(name, f"metadata.labels is {_json_type(labels)}, not an object")
    pool = next((p.name for p in pools if all(labels.get(k) == v for k, v in p.labels.items())), None)
    if pool is None:
        return None
    wrong = _wrong_field(node)
    if wrong is not None:
        raise Unreadable(name, wrong)
    notes = meta.get("annotations") or {}
    return NodeState(
        name=name, pool=pool, unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        owned=notes.get(ANNOTATION_OWNED) == "true", reason=notes.get(ANNOTATION_REASON, ""),
        since=_number(notes.get(ANNOTATION_SINCE), float),
        healthy_checks=_number(notes.get(ANNOTATION_HEALTHY), int) or 0,
        history=_floats(notes.get(ANNOTATION_HISTORY)), human_released=notes.get(ANNOTATION_HUMAN, ""),
        needs_repair=labels.get(LABEL_REPAIR) == "true", gpus=_gpus(node), boot_id=_boot_id(node),
        cordon_boot_id=notes.get(ANNOTATION_BOOT, ""), condition=_gpu_condition(node),
        drained=notes.get(ANNOTATION_DRAINED) == "true")


def _gpu_condition(node: dict[str, Any]) -> NodeCondition | None:
    """Our GPUHealthy condition as the Node carries it (None: never written)."""
    for item in (node.get("status") or {}).get("conditions") or []:
        if item.get("type") == CONDITION_TYPE:
            status = item.get("status")
            if status in ("True", "False", "Unknown"):
                return condition(status, str(item.get("reason") or ""), str(item.get("message") or ""))
    return None


def _gpus(node: dict[str, Any]) -> int:
    try:
        return int(str(((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE, "0")))
    except ValueError:
        return 0


def _boot_id(node: dict[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


def taint_value(reason: str) -> str:
    """The reason as a valid label value (a taint's value must be one): at most 63 characters,
    only letters, digits, '-', '_', '.', starting and ending alphanumeric. Cutting
    `ecc_dbe,...,xid-79` at 63 used to end in '-' and the API server answered 422."""
    return LABEL_VALUE_INVALID.sub(".", reason)[:63].strip("-_.")


def _taints_without_ours(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_KEY]


_DROP_OWNERSHIP: dict[str, None] = dict.fromkeys(
    (ANNOTATION_OWNED, ANNOTATION_REASON, ANNOTATION_SINCE, ANNOTATION_HEALTHY, ANNOTATION_BOOT, ANNOTATION_DRAINED))
"""Merge-patch nulls for the annotations that make a cordon ours (released, or lifted by a human)."""


MAX_EVIDENCE_ITEMS = 32
MAX_EVIDENCE_BYTES = 8 << 10
"""The evidence annotation stays far below the API server's 256 KiB for all of a Node's annotations:
a cordon carrying evidence for thousands of series was refused (422) and never retried."""


def evidence_annotation(evidence: tuple[Evidence, ...]) -> str:
    """The signals behind a cordon as JSON, cordon-class first, each field shortened, capped in count
    and size; a last entry says how many were left out."""
    ordered = sorted(evidence, key=lambda e: (e.action != "cordon", e.signal, e.gpu))
    items = [{"signal": e.signal[:64], "gpu": e.gpu[:16], "detail": e.detail[:160]}
             for e in ordered[:MAX_EVIDENCE_ITEMS]]

    def text(kept: list[dict[str, str]]) -> str:
        left = len(evidence) - len(kept)
        more = [{"signal": "more", "gpu": "", "detail": f"{left} more signals not recorded"}] if left else []
        return json.dumps(kept + more, sort_keys=True)

    while len(text(items)) > MAX_EVIDENCE_BYTES:
        items.pop()
    return text(items)


def _patch_for(action: NodeAction, node: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The merge patch for `action` on the Node as it is now, or None if it no longer applies."""
    spec = node.get("spec") or {}
    notes = (node.get("metadata") or {}).get("annotations") or {}
    owned = notes.get(ANNOTATION_OWNED) == "true"
    if isinstance(action, Cordon):
        if spec.get("unschedulable") or owned:
            return None  # someone cordoned it meanwhile, or we already did
        taint = {"key": TAINT_KEY, "value": taint_value(action.reason), "effect": "NoSchedule"}
        patch: dict[str, Any] = {
            "spec": {"unschedulable": True, "taints": [*_taints_without_ours(node), taint]},
            "metadata": {"annotations": {
                ANNOTATION_OWNED: "true", ANNOTATION_REASON: action.reason, ANNOTATION_SINCE: repr(now),
                ANNOTATION_HEALTHY: "0", ANNOTATION_HISTORY: json.dumps(list(action.history)),
                ANNOTATION_EVIDENCE: evidence_annotation(action.evidence),
                ANNOTATION_BOOT: _boot_id(node) or None, ANNOTATION_HUMAN: None}}}
        if action.repair:
            patch["metadata"]["labels"] = {LABEL_REPAIR: "true"}
        return patch
    if isinstance(action, Release):
        if not owned:
            return None  # only our own cordons are lifted
        return {"spec": {"unschedulable": None, "taints": _taints_without_ours(node)},
                "metadata": {"annotations": {**_DROP_OWNERSHIP, ANNOTATION_EVIDENCE: None}}}
    if isinstance(action, SetHealthyChecks):
        return {"metadata": {"annotations": {ANNOTATION_HEALTHY: str(action.count)}}} if owned else None
    if isinstance(action, NoteHumanRelease):
        if not owned or spec.get("unschedulable"):
            return None
        return {"spec": {"taints": _taints_without_ours(node)},
                "metadata": {"annotations": {**_DROP_OWNERSHIP, ANNOTATION_HUMAN: action.reason}}}
    if isinstance(action, ClearHumanRelease):
        return {"metadata": {"annotations": {ANNOTATION_HUMAN: None}}} if ANNOTATION_HUMAN in notes else None
    if isinstance(action, Drain):  # the drain is complete: note it, so no more pod lists for this node
        return {"metadata": {"annotations": {ANNOTATION_DRAINED: "true"}}} if owned and spec.get("unschedulable") \
            else None
    return None


def _stays(pod: dict[str, Any]) -> bool:
    """Pods a drain leaves alone, as `kubectl drain` does: DaemonSet pods (their controller would
    put them straight back; they tolerate our taint), mirror pods (the kubelet's static pods: the
    API cannot evict them), pods that finished and pods already being deleted."""
    meta = pod.get("metadata") or {}
    return (any(ref.get("kind") == "DaemonSet" and ref.get("controller") for ref in meta.get("ownerReferences") or [])
            or MIRROR_POD in (meta.get("annotations") or {})
            or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            or bool(meta.get("deletionTimestamp")))


class NodeList(NamedTuple):
    """One paginated list of Nodes."""

    states: dict[str, NodeState]
    """Every GPU node's state, by name."""
    uids: dict[str, str]
    """Every Node's uid, by name."""
    version: str
    """The list's resourceVersion (where a watch starts)."""
    unreadable: dict[str, str]
    """Nodes skipped because a field had the wrong type, by name: why (see `Unreadable`)."""


class ListFailed(ClusterError):
    """The API server's node list broke a bound (pages, Nodes, time) or was not a list: no state
    can be taken from it. The message says which (a `fleetgen health` command prints it as is)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"error: node list failed: {why}")


def list_nodes(api: Connection, pools: list[PoolSelector], monotonic: Callable[[], float] = time.monotonic) -> NodeList:
    """Every GPU node's state, every Node's uid by name, the list's resourceVersion and the Nodes
    that could not be read, from one paginated list: all pages are one snapshot of the same
    version. A `continue` token that never ends, more Nodes than any cluster has or a list slower
    than `LIST_DEADLINE_SECONDS` end in ListFailed, after at most one more page or read timeout."""
    from kubernetes import client

    out = NodeList({}, {}, "", {})
    token: str | None = None
    core: Any = client.CoreV1Api(api.client)  # raw pages (_preload_content=False): no models
    connect, read = timeout(api)
    deadline = monotonic() + LIST_DEADLINE_SECONDS
    pages = items = 0
    while True:
        left = deadline - monotonic()
        if left <= 0:
            raise ListFailed(f"it took more than {LIST_DEADLINE_SECONDS:.0f} s ({pages} pages, "
                             f"{items} Nodes): the API server answers too slowly")
        if pages >= LIST_MAX_PAGES:
            raise ListFailed(f"it did not end after {pages} pages of at most {PAGE} ({items} Nodes): "
                             "the API server keeps answering with a continue token")
        page = core.list_node(limit=PAGE, _continue=token, _preload_content=False,
                              _request_timeout=(connect, min(read, left)))
        try:
            body = json.loads(_body(page, deadline, monotonic))
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
            raise ListFailed("the API server answered something that is not JSON") from None
        pages += 1
        found = (body.get("items") if isinstance(body, dict) else None) or []
        if not isinstance(body, dict) or not isinstance(found, list):
            raise ListFailed("the API server answered something that is not a NodeList")
        _take(found, items, pools, out)
        items += len(found)
        if items > LIST_MAX_NODES:
            raise ListFailed(f"it passed {LIST_MAX_NODES} Nodes after {pages} pages, more than any "
                             "cluster has: the API server keeps answering with Nodes")
        body.pop("items", None)  # free the page before the next one
        del found
        meta: Any = body.get("metadata")
        version, token = (meta.get("resourceVersion"), meta.get("continue")) if isinstance(meta, dict) else ("", "")
        out = out._replace(version=version if isinstance(version, str) else "")
        if not token:
            return out
        if not isinstance(token, str):
            raise ListFailed(f"its continue token is {_json_type(token)}, not a string")


def _take(found: list[Any], first: int, pools: list[PoolSelector], into: NodeList) -> None:
    """One page's Nodes (the list's from `first` on) into the list: a Node that cannot be read is
    counted, never the list's end."""
    for index, node in enumerate(found, start=first):
        try:
            state = node_state(node, pools)
        except Unreadable as exc:
            into.unreadable[exc.name or f"(item {index} of the list)"] = exc.why
            state = None
        if state is not None:
            into.states[state.name] = state
        meta = node.get("metadata") if isinstance(node, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            into.uids[meta["name"]] = str(meta.get("uid") or "")


def _body(page: Any, deadline: float, monotonic: Callable[[], float]) -> bytes:
    """A page's bytes, read a piece at a time so that a server dripping its answer is cut off at the
    deadline (a read timeout alone counts per piece, not per answer), and one sending too much at
    `LIST_MAX_PAGE_BYTES`."""
    parts: list[bytes] = []
    size = 0
    try:
        while chunk := page.read1(1 << 20):
            parts.append(chunk)
            size += len(chunk)
            if size > LIST_MAX_PAGE_BYTES:
                raise ListFailed(f"a page was larger than {LIST_MAX_PAGE_BYTES >> 20} MiB, more than {PAGE} "
                                 "Nodes take: the API server answers something that is not a Node list")
            if monotonic() > deadline:
                raise ListFailed(f"it took more than {LIST_DEADLINE_SECONDS:.0f} s: the API server "
                                 "answers too slowly")
    except BaseException:
        page.close()  # the rest of the answer is unread: the connection cannot be used again
        raise
    finally:
        page.release_conn()
    return b"".join(parts)


class Executor:
    """Carries out decisions on one cluster (or only logs them, in dry run)."""

    def __init__(self, api: Connection, dry_run: bool = False, clock: Callable[[], float] | None = None,
                 namespace: str = EVENTS_NAMESPACE, sleep: Callable[[float], None] = time.sleep,
                 evictions_per_loop: int = EVICTIONS_PER_LOOP, grace_seconds: int | None = None) -> None:
        self.api = api
        self.evictions_per_loop = evictions_per_loop
        self.grace_seconds = grace_seconds
        """deleteOptions.gracePeriodSeconds of each eviction (None: each pod's own)."""
        self._evictions = 0
        self.dry_run = dry_run
        self.clock = clock or time.time
        self.namespace = namespace
        """Where Events go: `default`, the only namespace that takes Events about Nodes."""
        self.sleep = sleep
        self.failures = 0
        """Actions given up in the last apply() (after retries)."""
        self._uids: dict[str, str] = {}
        """Node name -> uid from the last read: Events name their Node by uid too, which is how
        `kubectl describe node` finds them (it selects involvedObject.uid)."""
        self.unreadable: dict[str, str] = {}
        """Nodes the last list skipped (a field of the wrong type), by name: why."""
        self._events: dict[tuple[str, str, str, str], tuple[str, int]] = {}
        """(node, uid, reason, message) -> (Event name, count): a repeat updates the Event's count
        and lastTimestamp, as client-go's event correlator does, instead of a new Event per loop."""

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api.client)

    def read(self, pools: list[PoolSelector]) -> dict[str, NodeState]:
        """Every GPU node's state, from one paginated list (a 410 for an expired continue token
        starts the list over, as the API server asks)."""
        from kubernetes.client.exceptions import ApiException

        for _attempt in range(RETRIES):
            try:
                return self._read(pools)
            except ApiException as exc:
                if exc.status != 410:
                    raise
        raise RuntimeError(f"node list restarted {RETRIES} times: continue token kept expiring")

    def _read(self, pools: list[PoolSelector]) -> dict[str, NodeState]:
        listed = list_nodes(self.api, pools)
        self._uids = listed.uids
        self.unreadable = listed.unreadable
        return listed.states

    def remember(self, uids: dict[str, str]) -> None:
        """Node uids as a watch keeps them (Events name their Node by uid), when no list was made."""
        self._uids = uids

    def apply(self, decision: Decision, may_write: Callable[[], bool] = lambda: True) -> list[str]:
        """Carry out the decision's actions; returns one line per write (or planned write in dry run).

        `may_write` is asked before every write (the leader's Lease check): the first no stops the
        rest. A node whose action was given up gets nothing more this loop (no Event claiming a
        cordon that did not happen); the other nodes carry on.
        """
        done: list[str] = []
        given_up: set[str] = set()
        self.failures = 0
        self._evictions = 0
        for index, action in enumerate(decision.actions):
            if not self.dry_run and not may_write():
                audit.warning(json.dumps({"stopped": "lost the lease", "unapplied": len(decision.actions) - index}))
                break
            if action.node in given_up:
                continue
            try:
                if isinstance(action, Event):
                    line = self._event(action)
                elif isinstance(action, Drain):
                    line = self._drain(action, may_write)
                elif isinstance(action, SetCondition):
                    line = self._condition(action, may_write)
                else:
                    line = self._node(action, may_write)
            except GaveUp as exc:
                self.failures += 1
                given_up.add(action.node)
                audit.warning(json.dumps({"action": type(action).__name__, "node": action.node,
                                          "gaveUp": str(exc)}, sort_keys=True))
                continue
            if line:
                done.append(line)
        return done

    def _call(self, attempt: int, call: Callable[[], Any]) -> Any:
        """One API call; GaveUp when it must not be retried, Retry (after waiting) when it may."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call()
        except ApiException as exc:
            how = RETRY.get(exc.status or 0)
            if how is None or attempt + 1 >= RETRIES:
                raise GaveUp(f"{exc.status} {exc.reason}: {_detail(exc)}", exc.status) from None
            if how == "wait":
                self.sleep(_retry_after(exc, attempt))
            elif how == "backoff":
                self.sleep(_backoff(attempt))
            raise Retry from None
        except (HTTPError, OSError) as exc:  # timeouts, refused or reset connections
            if attempt + 1 >= RETRIES:
                raise GaveUp(f"no answer: {exc}") from None
            self.sleep(_backoff(attempt))
            raise Retry from None

    def _node(self, action: NodeAction, may_write: Callable[[], bool] = lambda: True) -> str | None:
        core = self._core()
        for attempt in range(RETRIES):
            try:
                node = self.api.client.sanitize_for_serialization(self._call(attempt, lambda: core.read_node(
                    action.node, _request_timeout=timeout(self.api))))
            except Retry:
                continue
            patch = _patch_for(action, node, self.clock())
            if patch is None:
                return None
            patch.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
            line = json.dumps({"action": type(action).__name__, "node": action.node, "patch": patch,
                               "dryRun": self.dry_run}, sort_keys=True)
            if self.dry_run:
                audit.info(line)
                return line
            if attempt and not may_write():  # a retry after waiting: still the leader?
                raise GaveUp("lost the lease while retrying")
            try:
                self._call(attempt, functools.partial(core.patch_node, action.node, patch, _content_type=MERGE,
                                                      _request_timeout=timeout(self.api)))
            except Retry:
                continue
            audit.info(line)
            return line
        raise GaveUp(f"{RETRIES} attempts")

    def _drain(self, action: Drain, may_write: Callable[[], bool]) -> str | None:
        """Evict what still runs on the node; once nothing evictable is left, mark it drained.
        A PodDisruptionBudget that forbids an eviction (429) leaves that pod for a later loop,
        with a Warning Event; it is not an error."""
        from kubernetes import client

        core = self._core()
        found = self._call(RETRIES - 1, lambda: core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={action.node}", _preload_content=False, _request_timeout=timeout(self.api)))
        pods = [p for p in json.loads(found.data).get("items") or [] if not _stays(p)]
        pods.sort(key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        if not pods:
            line = self._node(action, may_write)
            if line and not self.dry_run:
                self._event(Event(action.node, "Normal", "GPUHealthDrained", "every pod evicted; drain complete"))
            return line
        evicted, blocked = [], []
        for pod in pods:
            if self.dry_run or self._evictions >= self.evictions_per_loop or not may_write():
                break
            meta = pod["metadata"]
            body = client.V1Eviction(metadata=client.V1ObjectMeta(name=meta["name"], namespace=meta["namespace"]),
                                     delete_options=None if self.grace_seconds is None else
                                     client.V1DeleteOptions(grace_period_seconds=self.grace_seconds))
            self._evictions += 1
            try:
                self._call(RETRIES - 1, functools.partial(core.create_namespaced_pod_eviction, meta["name"],
                                                          meta["namespace"], body, _request_timeout=timeout(self.api)))
            except GaveUp as exc:
                if exc.status == 429:  # a disruption budget says not now
                    blocked.append(f"{meta['namespace']}/{meta['name']}")
                elif exc.status != 404:  # 404: gone already
                    raise
                continue
            evicted.append(f"{meta['namespace']}/{meta['name']}")
        line = json.dumps({"action": "Drain", "node": action.node, "evicted": evicted, "blocked": blocked,
                           "left": len(pods) - len(evicted) - len(blocked), "dryRun": self.dry_run}, sort_keys=True)
        audit.info(line)
        if blocked and not self.dry_run:
            self._event(Event(action.node, "Warning", "GPUHealthDrainBlocked",
                              f"{len(blocked)} pod(s) kept by a PodDisruptionBudget; retried every loop"))
        return line

    def _condition(self, action: SetCondition, may_write: Callable[[], bool]) -> str | None:
        """Our condition on the Node's status: a strategic merge patch, which merges `conditions`
        by type (the kubelet's and node-problem-detector's conditions stay as they are)."""
        core = self._core()
        stamp = self._stamp().isoformat()
        want = action.condition
        condition = {"type": CONDITION_TYPE, "status": want.status, "reason": want.reason,
                     "message": want.message[:1024], "lastHeartbeatTime": stamp}
        if action.transition:  # otherwise the merge keeps the time the status last changed
            condition["lastTransitionTime"] = stamp
        body = {"status": {"conditions": [condition]}}
        line = json.dumps({"action": "SetCondition", "node": action.node, "status": want.status,
                           "reason": want.reason, "dryRun": self.dry_run}, sort_keys=True)
        if self.dry_run:
            audit.info(line)
            return line
        for attempt in range(RETRIES):
            if attempt and not may_write():
                raise GaveUp("lost the lease while retrying")
            try:
                self._call(attempt, lambda: core.patch_node_status(
                    action.node, body, _content_type=STRATEGIC, _request_timeout=timeout(self.api)))
            except Retry:
                continue
            audit.info(line)
            return line
        raise GaveUp(f"{RETRIES} attempts")

    def _event(self, event: Event) -> str | None:
        from kubernetes import client

        line = json.dumps({"action": "Event", "node": event.node, "reason": event.reason, "dryRun": self.dry_run})
        if self.dry_run:
            return None
        stamp = self._stamp()
        uid = self._uids.get(event.node, "")
        message = event.message[:1024]
        key = (event.node, uid, event.reason, message)
        if key in self._events:
            name, count = self._events[key]
            try:
                self._call(RETRIES - 1, lambda: self._core().patch_namespaced_event(
                    name, self.namespace, {"count": count + 1, "lastTimestamp": stamp.isoformat()},
                    _request_timeout=timeout(self.api)))
                self._events[key] = (name, count + 1)
                return line
            except GaveUp as exc:
                if exc.status != 404:  # expired (Events live an hour): a new one below
                    raise
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{event.node}.", namespace=self.namespace),
            involved_object=client.V1ObjectReference(kind="Node", name=event.node, api_version="v1", uid=uid or None),
            type=event.kind, reason=event.reason, message=message, first_timestamp=stamp,
            last_timestamp=stamp, count=1, source=client.V1EventSource(component="fleetgen-health"))
        created = self._call(RETRIES - 1, lambda: self._core().create_namespaced_event(
            self.namespace, body, _request_timeout=timeout(self.api)))
        self._events[key] = (str(created.metadata.name), 1)
        return line

    def _stamp(self) -> Any:
        import datetime

        return datetime.datetime.fromtimestamp(self.clock(), tz=datetime.UTC)


class GaveUp(Exception):
    """An action on one node was given up for this loop (the message says why)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The API server's HTTP status, when it answered."""


class Retry(Exception):
    """The call failed in a way worth another attempt (already waited for)."""


def _backoff(attempt: int) -> float:
    """Seconds before retry `attempt + 1`: 0.5, 1, 2 ..., capped."""
    return min(MAX_WAIT_SECONDS, 0.5 * 2 ** attempt)


def _retry_after(exc: Any, attempt: int) -> float:
    """Seconds a 429 asks us to wait (Retry-After, in seconds), capped; backoff when absent."""
    try:
        return max(0.0, min(MAX_WAIT_SECONDS, float((exc.headers or {}).get("Retry-After") or "")))
    except (TypeError, ValueError):
        return _backoff(attempt)


def _detail(exc: Any) -> str:
    """The API server's one-line message from an error body (Status.message), else its reason."""
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)[:300]
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)
