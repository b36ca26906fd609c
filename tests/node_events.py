"""Node objects and watch events as the API server sends them, and a clock the test moves: for the node
cache's tests, which feed it events one at a time without a server."""

from __future__ import annotations

import json
from typing import Any


def node(name: str, version: str, pool: str | None = "h100", **notes: str) -> dict[str, Any]:
    """A Node at `resourceVersion` `version`, labelled `pool=<pool>` (none without one), annotated `notes`."""
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version,
                         "labels": {"pool": pool} if pool else {}, "annotations": notes},
            "spec": {}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}


def event(kind: str, obj: Any) -> str:
    """One line of a watch: `kind` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) of `obj`."""
    return json.dumps({"type": kind, "object": obj})


class Clock:
    """A monotonic clock that stands still until a test moves `now`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
