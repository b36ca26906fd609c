"""The node cache on the real API server: one list, then a watch that keeps every change, resumes
where it ended, and lists again only when the API server says its version is gone (410)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import generator.reconciler.informer as informer
from generator.jobs import connect
from generator.reconciler.informer import Expired, NodeCache
from generator.reconciler.model import ANNOTATION_OWNED, ANNOTATION_REASON
from generator.reconciler.nodes import list_nodes
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_for
from tests.upstream.reconciler_env import Pool, credential_id, reconciler_identity

CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@pytest.fixture
def pool(kube_stack: Stack) -> Pool:
    return Pool(kube_stack)


def _same_as_a_list(cache: NodeCache, api: Any, pool: Pool) -> bool:
    view = cache.view()
    if view is None:
        return False
    listed = list_nodes(api, pool.selector)
    return view == (listed.states, listed.uids)


def test_the_watch_keeps_every_change_and_resumes_without_a_list(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cordon, annotate, move out of the pool, delete, add: after each the cache equals a fresh list of
    the real API server, though watches end every second (resumed from the last resourceVersion) and
    only the first list was made. The ServiceAccount's rendered RBAC allows the watch."""
    from kubernetes import client

    monkeypatch.setattr(informer, "WATCH_SECONDS", 1)
    pool.add(4)
    who = reconciler_identity(pool.stack)
    api = connect(kubeconfig=str(who.kubeconfig))
    cache = NodeCache(api, pool.selector)
    stop = threading.Event()
    thread = cache.start(stop)
    admin = client.CoreV1Api(pool.stack.client())
    try:
        assert wait_for(lambda: _same_as_a_list(cache, api, pool), 20), "the first list never arrived"
        changes = [
            lambda: admin.patch_node(pool.name(0), {"spec": {"unschedulable": True}}),
            lambda: admin.patch_node(pool.name(1), {"metadata": {"annotations": {
                ANNOTATION_OWNED: "true", ANNOTATION_REASON: "xid-79"}}}),
            lambda: admin.patch_node(pool.name(2), {"metadata": {"labels": {"fleetgen.test/pool": "elsewhere"}}}),
            lambda: admin.delete_node(pool.name(3)),
            lambda: pool.add(2, first=4),
        ]
        for change in changes:
            change()
            time.sleep(1.5)  # at least one watch ends and is resumed between changes
            assert wait_for(lambda: _same_as_a_list(cache, api, pool), 20), f"the cache missed {change}"
        view = cache.view()
        assert view is not None
        states, _ = view
        mine = {name: s for name, s in states.items() if name.startswith(f"gpu-{pool.tag}-")}
        assert sorted(mine) == [pool.name(i) for i in (0, 1, 4, 5)]
        assert mine[pool.name(0)].unschedulable and mine[pool.name(1)].owned
        assert cache.lists == 1 and cache.events >= 5
    finally:
        stop.set()
        thread.join(10)
    audit = [e for e in pool.stack.audit() if (e.get("objectRef") or {}).get("resource") == "nodes"
             and credential_id(who) in ((e.get("user") or {}).get("extra") or {}).get(CREDENTIAL_ID, [])]
    watches = [e for e in audit if e.get("verb") == "watch" and e.get("stage") == "ResponseComplete"]
    assert len([e for e in audit if e.get("verb") == "list"]) >= 1 and len(watches) >= 5
    assert all((e.get("responseStatus") or {}).get("code") == 200 for e in watches)


def _watch_from(cache: NodeCache, version: str) -> None:
    """One short watch from `version` (Expired when the API server no longer has it)."""
    cache.version = version
    informer_seconds = informer.WATCH_SECONDS
    informer.WATCH_SECONDS = 1
    try:
        cache.watch()
    finally:
        informer.WATCH_SECONDS = informer_seconds


@pytest.mark.slow
def test_a_version_the_api_server_no_longer_has_means_a_new_list(pool: Pool) -> None:
    """The API server keeps node events in its watch cache for 75 s (more while they keep coming:
    k8s.io/apiserver v0.36.3 pkg/storage/cacher/watch_cache.go:374, storagebackend/config.go:40);
    past that, a burst of changes pushes old ones out, and a watch from a version before them is
    answered 410 Gone (watch_cache.go:916). The cache says Expired, and `run` lists again and
    carries on watching."""
    from kubernetes import client

    pool.add(2)
    api = connect(kubeconfig=str(reconciler_identity(pool.stack).kubeconfig))
    admin = client.CoreV1Api(pool.stack.client())
    cache = NodeCache(api, pool.selector)
    cache.relist()
    old = cache.version
    admin.patch_node(pool.name(0), {"metadata": {"annotations": {"fleetgen.test/burst": "start"}}})
    time.sleep(80)  # the event after `old` is older than the watch cache must keep
    expired = False
    for burst in range(40):
        for i in range(100):
            admin.patch_node(pool.name(1), {"metadata": {"annotations": {"fleetgen.test/burst": f"{burst}-{i}"}}})
        try:
            _watch_from(cache, old)
        except Expired:
            expired = True
            break
    assert expired, "the API server never let the version go"
    cache.version = old
    cache._must_list = False  # noqa: SLF001 - as if it had been watching since `old`
    stop = threading.Event()
    thread = cache.start(stop)
    try:
        assert wait_for(lambda: cache.lists == 2, 20), "the cache never listed again"
        pool.add(1, first=2)
        assert wait_for(lambda: _same_as_a_list(cache, api, pool), 20)
    finally:
        stop.set()
        thread.join(10)
