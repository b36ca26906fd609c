"""Assemble a Reconciler from the policy document the rendered ConfigMap carries."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path
from typing import (
    Any,
    NotRequired,  # pydantic reads typing.TypedDict only from Python 3.12
)

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from generator.config.yamlsource import MAX_FILE_BYTES, parse_json
from generator.connection import Connection
from generator.errors import InputError, UsageError
from generator.reconciler.informer import NodeCache
from generator.reconciler.lease import BreakerStore, LeaderLease
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import Policy
from generator.reconciler.nodes import Executor, PoolSelector
from generator.reconciler.sources import LokiSource, PrometheusSource
from generator.repofiles import read_named

RECONCILER_TIMEOUT = (5.0, 10.0)
"""(connect, read) seconds per API call of the reconciler, unless --request-timeout says otherwise."""


def load_policy(path: str | None, root: Path, cluster: str | None) -> dict[str, Any]:
    """The policy document: a file (in the pod), or compiled from the fleet's cluster file."""
    if path:
        try:
            raw = read_named(path, MAX_FILE_BYTES)
            document = parse_json(raw.decode("utf-8"), path)
        except OSError as exc:
            raise UsageError(f"cannot read health policy {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"cannot read health policy {path}: not UTF-8 text") from None
        except InputError as exc:
            raise UsageError(f"cannot read health policy {exc}") from None
        return checked_policy(document, path)
    if not cluster:
        raise UsageError("give --config FILE (in the cluster) or --cluster NAME (from this fleet repository)")
    from generator.checks import load_fleet
    from generator.compile.health import policy_document

    fleet = load_fleet(root)
    if cluster not in fleet.clusters:
        raise UsageError(f"unknown cluster {cluster!r}; known: {', '.join(sorted(fleet.clusters))}")
    return checked_policy(policy_document(fleet.clusters[cluster].config), cluster)


class _Rules(TypedDict):
    healthyChecksToRelease: int
    cooldownSeconds: float
    flapCount: int
    flapWindowSeconds: float
    maxUnhealthyPercent: float
    cordonsPerLoop: NotRequired[int]


class _Drain(TypedDict, total=False):
    enabled: bool
    maxPercent: float
    evictionsPerLoop: int
    gracePeriodSeconds: int | None


class _Pool(TypedDict):
    name: str
    labels: dict[str, str]


class PolicyDocument(TypedDict):
    """What `build` reads of the policy document (compile/health.py `policy_document` writes it)."""
    namespace: str
    prometheusUrl: str
    policy: _Rules
    pools: list[_Pool]
    lokiUrl: NotRequired[str | None]
    lokiTenant: NotRequired[str | None]
    dryRun: NotRequired[bool]
    periodSeconds: NotRequired[float]
    drain: NotRequired[_Drain | None]


_POLICY = TypeAdapter(PolicyDocument)


def checked_policy(document: object, shown: str) -> dict[str, Any]:
    """The policy document if it has every field `build` reads, of its type; UsageError naming the
    first field that is not (the file may come from a ConfigMap anyone with access edited)."""
    try:
        return dict(_POLICY.validate_python(document))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the document)"
        raise UsageError(f"health policy {shown}: {where}: {first['msg']}; render the cluster's policy with "
                         "fleetgen (ConfigMap fleetgen-health, key policy.json) or pass --cluster NAME") from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleetgen")
    except PackageNotFoundError:
        return "dev"


def build(document: dict[str, Any], api: Connection, prometheus: str | None = None, dry_run: bool = False,
          identity: str | None = None) -> Reconciler:
    """A Reconciler wired to the cluster (api), Prometheus and the policy."""
    p = document["policy"]
    drain = document.get("drain") or {}  # absent in a policy rendered before drain existed: off
    policy = Policy(healthy_checks_to_release=int(p["healthyChecksToRelease"]),
                    cooldown_seconds=float(p["cooldownSeconds"]), flap_count=int(p["flapCount"]),
                    flap_window_seconds=float(p["flapWindowSeconds"]),
                    max_unhealthy_percent=float(p["maxUnhealthyPercent"]),
                    cordons_per_loop=int(p.get("cordonsPerLoop", 5)),  # absent in a policy rendered before it
                    dry_run=dry_run or bool(document.get("dryRun")),
                    drain=bool(drain.get("enabled")), drain_max_percent=float(drain.get("maxPercent", 10.0)))
    pools = [PoolSelector(pool["name"], dict(pool["labels"])) for pool in document["pools"]]
    namespace = document["namespace"]
    identity = identity or socket.gethostname()
    # Audit logs and API server metrics then say which replica made a request.
    api.client.user_agent = f"fleetgen-health/{_version()} ({identity})"
    # A hung API call costs one loop, not the reconciler: calls give up well inside a Lease duration.
    api = replace(api, timeout=api.timeout or RECONCILER_TIMEOUT)
    sources: list[Any] = [PrometheusSource(prometheus or document["prometheusUrl"])]
    if document.get("lokiUrl"):
        sources.append(LokiSource(document["lokiUrl"], tenant=document.get("lokiTenant") or ""))
    # A dry run writes nothing at all, the Lease included: it neither takes leadership from the
    # running replicas nor waits for it, so `health once --dry-run` is safe beside a live Deployment.
    lease = None if policy.dry_run else LeaderLease(api, namespace, identity)
    executor = Executor(api, dry_run=policy.dry_run, evictions_per_loop=int(drain.get("evictionsPerLoop", 50)),
                        grace_seconds=drain.get("gracePeriodSeconds"))
    # The cache is started by `run` only: one loop (`health once`, `status`) lists Nodes once.
    return Reconciler(executor, sources, pools, policy, BreakerStore(api, namespace), lease,
                      period=float(document.get("periodSeconds", 30)), cache=NodeCache(api, pools))
