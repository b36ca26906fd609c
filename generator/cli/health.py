"""`fleetgen health ...`: the GPU health reconciler's verbs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from generator.cli.common import Address, FullHelpGroup, Name, _api, _connection_options, _guard, _root, echo


@click.group(cls=FullHelpGroup)
def health() -> None:
    """The GPU health reconciler: cordon nodes with faulty GPUs, safely."""


def _health_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--config", "config_path", metavar="FILE", help="Policy document (policy.json in the pod)."),
        click.option("--cluster", metavar="NAME", type=Name("cluster"),
                     help="Or: compile the policy from this fleet's cluster file."),
        click.option("--prometheus", metavar="URL", help="Prometheus URL (default: from the policy)."),
        click.option("--in-cluster", is_flag=True, help="Use the pod's service account."),
    ]):
        fn = option(fn)
    return _connection_options(fn)


def _reconciler(ctx: click.Context, config_path: str | None, cluster: str | None, prometheus: str | None,
                in_cluster: bool, dry_run: bool = False, **conn: Any) -> Any:
    import os

    from generator.connection import connect
    from generator.reconciler.app import build, load_policy

    document = load_policy(config_path, _root(ctx), cluster)
    api = connect(in_cluster=in_cluster, flags=True, **conn) if in_cluster else _api(**conn)
    return build(document, api, prometheus, dry_run, os.environ.get("POD_NAME"))


@health.command("once")
@_health_options
@click.option("--dry-run", is_flag=True, help="Decide and print, write nothing.")
@click.pass_context
@_guard
def health_once(ctx: click.Context, **options: Any) -> None:
    """Run one reconcile loop and print what was decided."""
    from generator.reconciler.status import decision_lines, unreadable_lines

    rec = _reconciler(ctx, **options)
    # A fresh process has never seen the Lease: it watches a foreign one for a Lease duration.
    decision = rec.once() if rec.lease is None or rec.lease.acquire_patiently() else None
    if decision is None and rec.lease is not None and rec.lease.last_error is not None:
        raise rec.lease.last_error  # unreachable or refusing: say so, not "another replica"
    if decision is None:
        echo("another replica holds the lease: nothing done")
        return
    for line in decision_lines(decision, rec.executor.dry_run) + unreadable_lines(rec.unreadable):
        echo(line)


@health.command("run")
@_health_options
@click.option("--dry-run", is_flag=True, help="Decide and log, write nothing.")
@click.option("--listen", type=Address(), default=":8080", show_default=True,
              help="Address of /metrics and /healthz.")
@click.pass_context
@_guard
def health_run(ctx: click.Context, listen: tuple[str, int], **options: Any) -> None:
    """Reconcile forever (the Deployment's command); only the Lease holder acts."""
    import json
    import logging
    import threading

    from generator.reconciler.serve import Metrics, serve

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rec = _reconciler(ctx, **options)
    metrics = Metrics([p.name for p in rec.pools], rec.period)
    serve(metrics, *listen)
    log = logging.getLogger("fleetgen.health")

    def on_loop(decision: Any, seconds: float, failed: bool) -> None:
        metrics.record(decision, rec.nodes if decision else {}, seconds, failed, rec.executor.failures,
                       len(rec.unreadable))
        log.info(json.dumps({"loop": "failed" if failed else "done", "leader": decision is not None,
                             "seconds": round(seconds, 3), "actions": len(decision.actions) if decision else 0,
                             "writeFailures": rec.executor.failures, "nodeList": rec.listed,
                             "unreadableNodes": len(rec.unreadable)}))

    rec.run(None, threading.Event(), on_loop)


@health.command("status")
@_health_options
@click.pass_context
@_guard
def health_status(ctx: click.Context, **options: Any) -> None:
    """Each pool (nodes down, breaker), and the nodes the reconciler holds, why and since when."""
    from generator.reconciler.status import status_lines

    for line in status_lines(_reconciler(ctx, **options)):
        echo(line)


@health.command("reset-breaker")
@_health_options
@click.option("--pool", metavar="NAME", type=Name("pool"), help="Reset only this pool's breaker (default: every pool).")
@click.option("--drain", is_flag=True, help="Reset the drain breaker (evictions) instead of the cordon breaker.")
@click.pass_context
@_guard
def health_reset(ctx: click.Context, pool: str | None, drain: bool, **options: Any) -> None:
    """A human says the fleet (or one pool) is fine: the reconciler may act there again."""
    from generator.errors import UsageError

    rec = _reconciler(ctx, **options)
    if pool is not None and pool not in {p.name for p in rec.pools}:
        raise UsageError(f"unknown pool {pool!r}; pools: {', '.join(sorted(p.name for p in rec.pools))}")
    reset = rec.reset_breaker(pool, drain=drain)
    kind = "drain breaker" if drain else "breaker"
    if not reset:
        echo(f"{kind} reset (was not tripped)")
    for name, was in sorted(reset.items()):
        name = name.partition(":")[2] if drain else name
        echo(f"{kind} reset{'' if name == '*' else ' in pool ' + name} (was tripped: {was.reason})")

