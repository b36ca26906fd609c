"""GPU nodes kept current by a watch, as client-go's informers keep them, so a loop costs what changed.

One paginated list gives every Node and the list's resourceVersion; a watch from that version then
delivers each change (ADDED, MODIFIED, DELETED) as it happens, and bookmarks move the version on
while nothing changes. A watch that ends (its server-side timeout, a dropped connection) resumes
from the last version seen, so nothing is missed and nothing is listed again. Only when the API
server says that version is gone (410 Gone: compacted, or older than its watch cache) does the
cache list again. The loop reads a copy of the cache, and only while the cache is current: after
`STALE_SECONDS` without a working watch it lists Nodes itself, as it did before this cache.

Every answer is hostile until checked: an event that is not a watch event of a Node (no type, no
object, no name) cannot be applied, and the cache cannot know what it missed, so it lists again. A
Node event whose fields have the wrong type applies as that one Node unknown (`Unreadable`,
counted), never the watch's end. Every list after the first, and every watch retried after a
failure, waits a step of client-go's backoff (`backoff.py`), so a server that answers every watch
with 410 or garbage gets a few lists a minute. The cache counts as current again only once a list
succeeded or an event applied: a watch that connects and then delivers nothing usable leaves the
staleness clock running.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from generator.connection import Connection, timeout
from generator.reconciler.backoff import Backoff
from generator.reconciler.model import NodeState
from generator.reconciler.nodes import PoolSelector, Unreadable, list_nodes, node_state

WATCH_SECONDS = 290
"""Server-side timeout of one watch request (client-go picks 5 to 10 minutes); the next watch
resumes from the last resourceVersion seen."""
SILENT_SECONDS = 150.0
"""A watch that sends nothing for this long is taken for dead. The API server sends a bookmark
roughly every minute even while nothing changes (k8s.io/apiserver v0.36.3
pkg/storage/cacher/cache_watcher.go:228, cacher.go:77 defaultBookmarkFrequency)."""
STALE_SECONDS = 60.0
"""How long the cache may go without a working watch before loops stop trusting it."""
SHORT_SECONDS = 1.0
"""A watch that ends sooner than this without one event counts as failed and is retried after a
backoff, as client-go's reflector does (v0.36.3 tools/cache/reflector.go:1096-1099)."""
WATCH_MAX_LINE_BYTES = 16 << 20
"""Longest watch line (one event): a Node is at most what etcd stores in one value (1.5 MiB by
default), so a line far past that is a server that will not end it, cut off before it fills memory."""
log = logging.getLogger("fleetgen.health")


class Expired(Exception):
    """The watch's resourceVersion is gone (410): only a new list can say what the Nodes are now."""


class Broken(Exception):
    """The watch sent something that is not a Node's watch event: what it missed is unknown."""


class Short(Exception):
    """The watch ended at once with nothing in it: resumed from the same version, after a backoff."""


class NodeCache:
    """Every GPU node's state, kept by one list and then a watch (`run` in a thread of its own)."""

    def __init__(self, api: Connection, pools: list[PoolSelector], monotonic: Callable[[], float] = time.monotonic,
                 stale_seconds: float = STALE_SECONDS, backoff: Backoff | None = None) -> None:
        self.api = api
        self.pools = pools
        self.monotonic = monotonic
        self.stale_seconds = stale_seconds
        self.backoff = backoff or Backoff(monotonic)
        """The wait before a list after the first, and before a watch retried after a failure."""
        self._lock = threading.Lock()
        self._states: dict[str, NodeState] = {}
        self._uids: dict[str, str] = {}
        self._unreadable: dict[str, str] = {}
        self.version = ""
        """The resourceVersion the cache is current at ("" until the first list)."""
        self._broken_at: float | None = None
        """Since when the cache has not been known current: set when the watch fails, cleared only
        when a list succeeds or an event applies (a watch that merely connects proves nothing)."""
        self._must_list = True
        """No version to resume from (never listed, expired, or a broken stream): list first. The
        last view stays readable meanwhile: it is as current as the last event applied."""
        self.lists = 0
        """Lists made (the first, and one per expired version or broken watch)."""
        self.events = 0
        """Watch events applied (bookmarks included)."""
        self._moved: set[str] | None = None
        """Nodes an event changed since the last `view_changes` (None: since a list, or a view the
        cache could not give: any node may have)."""

    # ------------------------------------------------------------------------------------ read side

    def view(self) -> tuple[dict[str, NodeState], dict[str, str]] | None:
        """A copy of the GPU nodes' states and every Node's uid, or None when the cache is not to be
        trusted (never listed, or no working watch for `stale_seconds`)."""
        with self._lock:
            if not self._trusted():
                return None
            return dict(self._states), dict(self._uids)

    def view_changes(self) -> tuple[dict[str, NodeState], dict[str, str], set[str] | None] | None:
        """`view`, and the nodes whose state may differ from the last `view_changes` (None: any
        may, after a list or when the last could not be given). The loop's one read."""
        with self._lock:
            moved, self._moved = self._moved, set()
            if not self._trusted():
                self._moved = None  # the loop lists for itself: the next view is compared with that
                return None
            return dict(self._states), dict(self._uids), moved

    def unreadable(self) -> dict[str, str]:
        """The Nodes skipped because a field has the wrong type, by name: why (their health is unknown)."""
        with self._lock:
            return dict(self._unreadable)

    def _trusted(self) -> bool:
        """Listed, and the watch works or stopped less than `stale_seconds` ago (under the lock)."""
        broken = self._broken_at is not None and self.monotonic() - self._broken_at > self.stale_seconds
        return bool(self.version) and not broken

    # ----------------------------------------------------------------------------------- write side

    def relist(self) -> None:
        """Replace the cache with one paginated list (its resourceVersion is where the watch starts)."""
        listed = list_nodes(self.api, self.pools, self.monotonic)
        with self._lock:
            self._states, self._uids, self.version = listed.states, listed.uids, listed.version
            self._unreadable = listed.unreadable
            self._broken_at = None
            self._moved = None
        self._must_list = False
        self.lists += 1

    def watch(self, stop: threading.Event | None = None) -> None:
        """One watch request from the cache's version, applying its events until the server ends it
        (or `stop` is set). Expired when the version is gone, Broken on an event that is not one,
        Short when it ends within `SHORT_SECONDS` with no event at all."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        connect, _ = timeout(self.api)
        started, events = self.monotonic(), self.events  # before the request, as client-go (reflector.go:583)
        try:
            core: Any = client.CoreV1Api(self.api.client)  # raw pages: the models' parsing is not wanted here
            response = core.list_node(
                watch=True, resource_version=self.version, allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS, _preload_content=False,
                _request_timeout=(connect, SILENT_SECONDS))
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(f"resourceVersion {self.version} is gone") from None
            raise
        try:
            for line in _lines(response):
                if line:
                    self.apply(line)
                if stop is not None and stop.is_set():
                    return
        finally:
            response.close()
            response.release_conn()
        if self.events == events and self.monotonic() - started < SHORT_SECONDS:
            raise Short(f"the watch ended within {SHORT_SECONDS:.0f} s without an event")

    def apply(self, line: str | bytes) -> None:
        """One line of a watch stream."""
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise Broken("a watch line that is not JSON") from None
        kind = event.get("type") if isinstance(event, dict) else None
        obj: Any = event.get("object") if isinstance(event, dict) else None
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            if code == 410:
                raise Expired(str(obj.get("message") or "410 Gone"))
            raise Broken(f"the watch ended in an error: {str(obj)[:300]}")
        if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") or not isinstance(meta, dict):
            raise Broken(f"a watch event that is not a Node's: type {str(kind)[:40]!r}")
        version = meta.get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise Broken("a watch event without a resourceVersion")
        if kind == "BOOKMARK":
            with self._lock:
                self.version = version
                self._broken_at = None
            self.events += 1
            return
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise Broken("a Node without a name")
        why = None
        try:
            state = node_state(obj, self.pools) if kind != "DELETED" else None
        except Unreadable as exc:  # that Node's health is unknown; the watch goes on
            state, why = None, exc.why
        with self._lock:
            self._states.pop(name, None)  # DELETED, or MODIFIED out of every pool: gone from the view
            self._unreadable.pop(name, None)
            if kind == "DELETED":
                self._uids.pop(name, None)
            else:
                self._uids[name] = str(meta.get("uid") or "")
            if state is not None:
                self._states[name] = state
            if why is not None:
                self._unreadable[name] = why
            if self._moved is not None:
                self._moved.add(name)
            self.version = version
            self._broken_at = None
        self.events += 1

    def run(self, stop: threading.Event) -> None:
        """List, then watch and resume until `stop` is set. A watch the server ends as watches end
        is resumed at once; any failure waits a backoff step first (`Backoff`, client-go's), then
        lists again (an expired version, a broken stream, a failed list) or watches again from the
        same version (an unreachable server, a watch that ended at once)."""
        while not stop.is_set():
            try:
                if self._must_list:
                    self.relist()
                self.watch(stop)
                continue
            except Expired as exc:
                log.info(json.dumps({"nodeWatch": "expired", "relist": True, "why": str(exc)[:300]}))
                self._must_list = True
            except Broken as exc:
                log.warning(json.dumps({"nodeWatch": "broken", "relist": True, "why": str(exc)[:300]}))
                self._must_list = True
            except Exception as exc:  # noqa: BLE001 - an unreachable API server or a refused list: retry
                log.warning(json.dumps({"nodeWatch": "failed", "relist": self._must_list,
                                        "why": f"{type(exc).__name__}: {exc}"[:300]}))
            self._broke()
            stop.wait(self.backoff.next())

    def _broke(self) -> None:
        """The watch stopped delivering: from now on the view ages (see `view`)."""
        with self._lock:
            if self._broken_at is None:
                self._broken_at = self.monotonic()

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run in a daemon thread (the reconciler's loop reads `view()`)."""
        thread = threading.Thread(target=self.run, args=(stop,), name="node-watch", daemon=True)
        thread.start()
        return thread


def _lines(response: Any) -> Iterator[bytes]:
    """A watch stream's lines as they come, in time linear in its bytes (the client's own
    `iter_resp_lines` copies what is left of its buffer at every line), and Broken at a line longer
    than `WATCH_MAX_LINE_BYTES`."""
    buffer = bytearray()
    while chunk := response.read1(1 << 20):  # what has come, at most 1 MiB (stream() may wait for more)
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) != -1:
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if len(buffer) > WATCH_MAX_LINE_BYTES:
            raise Broken(f"a watch line longer than {WATCH_MAX_LINE_BYTES >> 20} MiB, more than any Node")
    # a line the stream ended in the middle of is not an event (the connection dropped): the next
    # watch resumes from the last version applied, as with the client's own reader
