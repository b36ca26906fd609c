"""`fleetgen job ...`: create, submit and follow jobs from a team's job profiles."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from generator.cli.common import FullHelpGroup, Name, Seconds, _api, _connection_options, _guard, _root, echo
from generator.kinds import BY_OBJECT, KINDS, OPERATORS, kind_of, operator_kinds

if TYPE_CHECKING:
    from generator.connection import Connection
    from generator.jobs import Job, RayCluster

T = TypeVar("T")

KIND_NAMES = {k.name: f"a serving {k.kind}" if k.serving else k.what for k in KINDS}
"""Each `--kind`, as messages call what NAME is."""
KIND_OPTION = click.option(
    "--kind", type=click.Choice(list(KIND_NAMES)), default=KINDS[0].name, show_default=True,
    help=f"What NAME is: {', '.join(list(KIND_NAMES.values())[:-1])} or {list(KIND_NAMES.values())[-1]} ("
    + ", ".join(f"{' and '.join(k.what for k in operator_kinds(op))} where the cluster runs {op.title}"
                for op in OPERATORS) + ").")


def _job(api: Connection, name: str, namespace: str, kind: str) -> Job:
    """The SDK's handle on job NAME of `kind` (a --kind whose record says `sdk_job`)."""
    from generator.jobs import Job

    return Job.on_cluster(api, name, namespace, kind_of(kind).kind)


def _ray_cluster(api: Connection, name: str, namespace: str) -> RayCluster:
    """The SDK's handle on a kind its `Job` does not handle: a Ray cluster (generator.jobs.ray)."""
    from generator.jobs import RayCluster

    return RayCluster.on_cluster(api, name, namespace)


def _is_kind(api: Connection, name: str, namespace: str, kind: str) -> bool:
    """Whether NAME is an object of `kind` (a --kind value) there; False where that cannot be told."""
    from generator.jobs import ClusterError

    try:
        if not kind_of(kind).sdk_job:
            return _ray_cluster(api, name, namespace).exists()
        _job(api, name, namespace, kind)._read()
        return True
    except ClusterError:
        return False
    except Exception as exc:  # noqa: BLE001 - the API client's 404 (or 403) means only "cannot tell"
        if getattr(exc, "status", None) in (403, 404):
            return False
        raise


def _job_or_hint(api: Connection, name: str, namespace: str, command: str, kind: str, act: Callable[[], T]) -> T:
    """`act` on job NAME of `kind`; where there is none but one of another kind, say how to ask for it."""
    from generator.errors import UsageError
    from generator.jobs import ClusterError

    try:
        return act()
    except ClusterError as exc:
        if " 404 " in f"{exc} ":
            for other in KIND_NAMES:
                if other != kind and _is_kind(api, name, namespace, other):
                    raise UsageError(f"{namespace}/{name} is {KIND_NAMES[other]}, not {KIND_NAMES[kind]}: fleetgen "
                                     f"job {command} {name} --namespace {namespace} --kind {other}") from None
        raise


def _status(api: Connection, name: str, ns: str, kind: str) -> str:
    """The status of NAME of `kind` (a RayCluster's: Kueue's, then its pods', then Ray's)."""
    if not kind_of(kind).sdk_job:
        return str(_ray_cluster(api, name, ns).status())
    return str(_job_or_hint(api, name, ns, "status", kind, _job(api, name, ns, kind).status))


def _log_lines(api: Connection, name: str, ns: str, kind: str) -> Callable[..., Iterator[str]]:
    """The `logs` method of NAME of `kind`."""
    return _job(api, name, ns, kind).logs if kind_of(kind).sdk_job else _ray_cluster(api, name, ns).logs


def _cancel(api: Connection, name: str, ns: str, kind: str) -> None:
    if not kind_of(kind).sdk_job:
        _ray_cluster(api, name, ns).down()
    else:
        _job_or_hint(api, name, ns, "cancel", kind, _job(api, name, ns, kind).cancel)


def _wait(api: Connection, name: str, ns: str, kind: str, until: str, timeout_seconds: float, interval: float,
          progress: Callable[[Any], None]) -> bool:
    """Wait for NAME of `kind` to get `until`; whether it failed."""
    from generator.errors import UsageError

    if not kind_of(kind).sdk_job:  # a Ray cluster: admitted by Kueue, or running: every pod, as KubeRay calls it ready
        if until == "finished":
            raise UsageError(f"{KIND_NAMES[kind]} does not finish: wait --for admitted or running (ready)")
        _ray_cluster(api, name, ns).wait("ready" if until == "running" else until, timeout_seconds, interval,
                                         progress=progress)
        return False
    handle = _job(api, name, ns, kind)
    final = _job_or_hint(api, name, ns, "wait", kind, lambda: handle.wait(
        until=until, timeout_seconds=timeout_seconds, poll=interval, progress=progress))
    return final.phase == "failed"


def _checkout(ctx: click.Context) -> Path | None:
    """The fleet repository the command runs in (--root, default here), or None outside one: then the
    job commands read the fleet files the connected cluster publishes instead."""
    root = _root(ctx)
    return root if (root / "teams").is_dir() or (root / "clusters").is_dir() else None


def _job_fleet(ctx: click.Context, api: Connection | Callable[[], Connection]) -> Any:
    """The fleet of the checkout, or else of the connected cluster (`api`: a connection, or a callable making one)."""
    from generator.checks import load_fleet
    from generator.jobs.published import published_fleet

    root = _checkout(ctx)
    return load_fleet(root) if root is not None else published_fleet(api() if callable(api) else api)


def _team_namespaces(ctx: click.Context, team: str, api: Connection | Callable[[], Connection]) -> list[str]:
    """The namespaces of `team` in this fleet repository, or in the cluster's published files outside
    one (UsageError naming the known teams)."""
    from generator.errors import UsageError

    fleet = _job_fleet(ctx, api)
    if team not in fleet.teams:
        raise UsageError(f"unknown team {team!r}; known: {', '.join(sorted(fleet.teams))}")
    return list(fleet.teams[team].config.namespace_names)


def _job_target(ctx: click.Context, namespace: str | None, team: str | None,
                conn: dict[str, Any]) -> tuple[str, Connection]:
    """The job's namespace and the connection: a usage error first; the cluster asked for the team's
    namespaces only outside a fleet repository, over the one connection the command then uses."""
    api_of = functools.cache(lambda: _api(**conn))
    namespace = _namespace(ctx, namespace, team, api_of)
    return namespace, api_of()


def _namespace(ctx: click.Context, namespace: str | None, team: str | None,
               api: Connection | Callable[[], Connection]) -> str:
    if namespace:
        return namespace
    if team:
        return _team_namespaces(ctx, team, api)[0]
    from generator.errors import UsageError

    raise UsageError("say which namespace: --namespace NS or --team TEAM")


def _job_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in (click.option("--team", type=Name("team"), help="Team (its first namespace)."),
                   click.option("-n", "--namespace", type=Name("namespace"), help="Namespace of the job."),
                   click.argument("name", type=Name("job"))):
        fn = option(fn)
    return fn


@click.group(cls=FullHelpGroup)
def job() -> None:
    """Create, submit and follow jobs (JobSets, batch Jobs, Ray clusters) from a team's job profiles."""


@job.command("new")
@click.argument("team", type=Name("team"))
@click.argument("profile", type=Name("profile"))
@click.option("--name", help="Job name (default: the profile name).")
@click.option("--nodes", type=int, help="Number of nodes (default: the profile's).")
@click.option("--image", help="Container image (default: the profile's).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.argument("command", nargs=-1)
@_connection_options
@click.pass_context
@_guard
def job_new(ctx: click.Context, team: str, profile: str, name: str | None, nodes: int | None, image: str | None,
            output: str | None, command: tuple[str, ...], **conn: Any) -> None:
    """Print a concrete job (the object of the profile's `kind`: a JobSet, a batch Job, a RayCluster, ...)
    from TEAM's PROFILE; `-- CMD...` replaces the program.

    In a fleet repository the profile comes from its files; elsewhere, from the fleet files the
    connected cluster publishes (the connection options then say which cluster).
    """
    from generator.jobs.made import from_profile
    from generator.yamltext import to_yaml

    root = _checkout(ctx)
    made = from_profile(team, profile, root=root, api=None if root else _api(**conn), name=name, nodes=nodes,
                        image=image, command=list(command) or None)
    assert made.body is not None
    text = to_yaml(made.body)
    if output:
        Path(output).write_text(text, encoding="utf-8")
        echo(f"wrote {output}: {made.body['kind']} {made.namespace}/{made.name}", err=True)
    else:
        echo(text, nl=False)


@job.command("submit")
@click.argument("what", nargs=-1, required=True)
@click.option("--name", help="Job name (with TEAM PROFILE).")
@click.option("--nodes", type=int, help="Number of nodes (with TEAM PROFILE).")
@click.option("--dry-run", is_flag=True,
              help="Check, then send it through the API server and its webhooks without creating it.")
@click.option("--no-check", is_flag=True, help="Skip the pre-submit checks (rights, queue, priority, quota); "
              "the job's Service names are still checked.")
@_connection_options
@click.pass_context
@_guard
def job_submit(ctx: click.Context, what: tuple[str, ...], name: str | None, nodes: int | None, dry_run: bool,
               no_check: bool, **conn: Any) -> None:
    """Submit FILE (an object of any job kind: a JobSet, a batch Job, a RayCluster, ...) or TEAM PROFILE to the
    cluster, after checking it can run.

    The team's quota is checked against the fleet repository's files, or outside one against the
    files the cluster publishes.
    """
    from generator.config.names import name_problem
    from generator.errors import UsageError
    from generator.jobs import made as making

    for kind, value in zip(("team", "profile"), what if len(what) == 2 else (), strict=False):
        if (problem := name_problem(kind, value)) is not None:  # before the cluster is asked anything
            raise UsageError(f"{kind.upper()}: {problem}")
    api, root = _api(**conn), _checkout(ctx)
    made: Job | RayCluster
    if len(what) == 1:
        made = making.from_file(what[0])
        made.root = root
        if root is None:  # the quota check reads the cluster's published files, if it publishes them
            from generator.jobs import ClusterError

            with contextlib.suppress(ClusterError):
                made.fleet = _job_fleet(ctx, api)
    elif len(what) == 2:
        made = making.from_profile(what[0], what[1], root=root, api=None if root else api, name=name, nodes=nodes)
    else:
        raise UsageError("give a job file, or TEAM PROFILE")
    if dry_run and not no_check:  # say every check, then refuse as submit would (checked once)
        from generator.jobs.presubmit import refuse

        outcomes = made.check(api)
        for outcome in outcomes:
            echo(str(outcome))
        refuse(made.name, outcomes)
    made.submit(api, dry_run=dry_run, check=not (no_check or dry_run))
    if dry_run:
        echo(f"dry run: {made.namespace}/{made.name} accepted by the API server and its admission webhooks; "
             "nothing was created")
        return
    made_kind = BY_OBJECT.get(str((made.body or {}).get("kind")), KINDS[0])
    option = "" if made_kind is KINDS[0] else f" --kind {made_kind.name}"
    echo(f"submitted {made.namespace}/{made.name}; follow it with: fleetgen job status {made.name} "
         f"--namespace {made.namespace}{option}")


@job.command("status")
@_job_command
@KIND_OPTION
@_connection_options
@click.pass_context
@_guard
def job_status(ctx: click.Context, name: str, namespace: str | None, team: str | None, kind: str,
               **conn: Any) -> None:
    """Kueue admission and progress of job NAME (a RayCluster's: Kueue's, then its pods', then Ray's)."""
    ns, api = _job_target(ctx, namespace, team, conn)
    echo(_status(api, name, ns, kind))


@job.command("logs")
@_job_command
@click.option("--rank", type=int, default=0, show_default=True,
              help="Node rank (0 is the master; a RayCluster's head, then its workers in name order).")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming new lines.")
@KIND_OPTION
@_connection_options
@click.pass_context
@_guard
def job_logs(ctx: click.Context, name: str, namespace: str | None, team: str | None, rank: int, follow: bool,
             kind: str, **conn: Any) -> None:
    """Logs of the training container of one node of job NAME (a RayJob: its driver; a RayCluster: Ray's)."""
    ns, api = _job_target(ctx, namespace, team, conn)
    lines = _log_lines(api, name, ns, kind)

    def show() -> None:  # lines are printed as they come, inside the hint's reach (the first read may 404)
        for line in lines(rank=rank, follow=follow):
            echo(line)

    _job_or_hint(api, name, ns, "logs", kind, show)


@job.command("cancel")
@_job_command
@KIND_OPTION
@_connection_options
@click.pass_context
@_guard
def job_cancel(ctx: click.Context, name: str, namespace: str | None, team: str | None, kind: str,
               **conn: Any) -> None:
    """Delete job NAME and its pods; Kueue gives the quota back."""
    ns, api = _job_target(ctx, namespace, team, conn)
    _cancel(api, name, ns, kind)
    echo(f"cancelled {ns}/{name}")


@job.command("wait")
@_job_command
@click.option("--for", "until", type=click.Choice(["admitted", "running", "finished"]), default="finished",
              show_default=True, help="What to wait for.")
@click.option("--timeout", "timeout_seconds", type=Seconds(min=0), default=3600, show_default=True,
              metavar="SECONDS", help="Give up (exit 2) after SECONDS.")
@click.option("--interval", type=Seconds(min=0.1), default=10, show_default=True, metavar="SECONDS",
              help="Seconds between looks at the job.")
@KIND_OPTION
@_connection_options
@click.pass_context
@_guard
def job_wait(ctx: click.Context, name: str, namespace: str | None, team: str | None, until: str,
             timeout_seconds: float, interval: float, kind: str, **conn: Any) -> None:
    """Wait until job NAME is admitted, running or finished; print each change.

    Exit 0 when it got there (finished: succeeded), 1 when it failed, 2 on timeout or error.
    """
    ns, api = _job_target(ctx, namespace, team, conn)
    if _wait(api, name, ns, kind, until, timeout_seconds, interval, progress=lambda status: echo(str(status))):
        ctx.exit(1)


@job.command("list")
@click.option("--team", type=Name("team"), help="Only this team's jobs (in its namespaces).")
@click.option("-n", "--namespace", type=Name("namespace"), help="Only jobs in this namespace.")
@_connection_options
@click.pass_context
@_guard
def job_list(ctx: click.Context, team: str | None, namespace: str | None, **conn: Any) -> None:
    """Jobs created from fleetgen profiles, and queued Ray clusters, with their state.

    Without --team or --namespace: every team namespace of the fleet that you may list jobs in.
    """
    from generator.errors import UsageError
    from generator.jobs import JobList

    api = _api(**conn)
    listing = JobList(api)
    if namespace:
        namespaces: list[str] | None = [namespace]
    elif team:
        namespaces = _team_namespaces(ctx, team, api)
    else:
        every = sorted({ns for t in _job_fleet(ctx, api).teams.values() for ns in t.config.namespace_names})
        namespaces = listing.readable(every)
        if not namespaces:
            raise UsageError("you may list jobs in none of the fleet's team namespaces: pass --namespace, or ask to "
                             "be added to a team's members")
    from generator.jobs.ray import RayClusters

    jobs = listing.jobs(namespaces, team)
    rays = RayClusters(api).in_namespaces(namespaces) if namespaces else []
    if not jobs and not rays:
        echo("no jobs")
    for found in jobs:
        echo(f"{found.namespace}/{str(found.status())}" + (f" ({found.of.kind})" if found.of is not KINDS[0] else ""))
    for ray in rays:
        echo(f"{ray.namespace}/{str(ray.status())} (RayCluster)")


@job.command("queues")
@click.option("--team", type=Name("team"), help="Only this team's queues.")
@_connection_options
@click.pass_context
@_guard
def job_queues(ctx: click.Context, team: str | None, **conn: Any) -> None:
    """The queues you may submit to on the cluster, per pool: GPUs guaranteed, borrowable, in use, free.

    Read from the cluster alone (the fleet files it publishes and Kueue's queue status): no checkout
    needed. Free: the team's unused guarantee; "up to": if the rest of its cohort is idle.
    """
    from generator.errors import UsageError
    from generator.jobs import queues

    found = queues(_api(**conn), team)
    if not found:
        raise UsageError(f"you may submit to no queue of {'team ' + repr(team) if team else 'any team'} on this "
                         "cluster: ask a team's owners to add you to its members")
    for info in found:
        echo(str(info))

