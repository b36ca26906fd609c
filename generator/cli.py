"""The `fleetgen` command line.

Heavy modules (pydantic models, jsonschema, CEL, the Kubernetes client) are imported inside the
commands so `fleetgen --help` stays fast. Exit codes: 0 ok, 1 findings or differences,
2 usage or input errors.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

EXIT_OK, EXIT_DIFF, EXIT_INPUT = 0, 1, 2


def echo(text: str = "", err: bool = False, nl: bool = True, color: bool = False) -> None:
    """click.echo through the terminal filter: no team text can drive a terminal or a CI log."""
    from generator.terminal import safe_text

    click.echo(safe_text(text, color), err=err, nl=nl, color=color or None)


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The error boundary of every verb: any failure becomes a line or two and exit 2, never a
    traceback (exit 1 stays for findings and differences)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from generator.failures import describe

        try:
            return fn(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException):
            raise
        except BaseException as exc:  # noqa: B036 - the boundary: Ctrl-C and SIGTERM included
            import os

            if os.environ.get("FLEETGEN_TRACEBACK") and not isinstance(exc, KeyboardInterrupt):
                raise  # for fleetgen's own developers
            echo(describe(exc, fn.__name__.replace("_", " ")), err=True)
            sys.exit(EXIT_INPUT)
    return wrapper


def _stop_on_sigterm() -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C: cleanup runs, helpers end, exit 2."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)


def _root(ctx: click.Context) -> Path:
    return Path(ctx.obj["root"]).resolve()


def _progress() -> Callable[[str], None] | None:
    """Progress on stderr when it is a terminal (never in CI logs or pipes)."""
    import os

    if not sys.stderr.isatty() or os.environ.get("CI"):
        return None
    done = [0]

    def step(cluster: str) -> None:
        done[0] += 1
        click.echo(f"\rcompiled {done[0]} clusters (last: {cluster})\033[K", err=True, nl=False)
    return step


class Seconds(click.FloatRange):
    """Seconds within a range that a timer can wait: FloatRange lets `nan` past every bound and `inf`
    or 1e300 past a minimum, and such a deadline is a crash (an HTTP library's, a timer thread's
    OverflowError) or no deadline."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds) or seconds > threading.TIMEOUT_MAX:
            self.fail(f"{value!r} is not a number of seconds this platform can wait.", param, ctx)
        return seconds


class Address(click.ParamType):
    """`[HOST]:PORT` to listen on, as (host, port): a port that is not 0-65535 is a usage error
    here, not a ValueError or OverflowError from the socket when the reconciler starts."""

    name = "[HOST]:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        host, _, port = str(value).rpartition(":")
        if not port.isascii() or not port.isdigit() or int(port) > 65535:
            self.fail(f"{value!r} is not [HOST]:PORT with a port from 0 to 65535.", param, ctx)
        return host or "0.0.0.0", int(port)  # noqa: S104 - the pod's metrics port


class Name(click.ParamType):
    """A team, cluster, pool, profile, job or namespace name, held to its rule before the command reads,
    writes or asks the cluster anything: names become paths (`teams/<team>.yaml`, or the API URL, where
    `..` would be resolved away by the HTTP client), so `../x` never gets that far."""

    name = "name"

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from generator.config.names import name_problem

        problem = name_problem(self.kind, str(value))
        if problem is not None:
            self.fail(problem, param, ctx)
        return str(value)


class FullHelpGroup(click.Group):
    """A command group whose `--help` lists each command's whole first sentence, wrapped (click cuts
    it at the terminal width minus the names, which left most summaries ending in "...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=10_000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_schema_opt = click.option("--schema-location", envvar="FLEETGEN_SCHEMA_LOCATION", metavar="DIR|URL",
                           help="Custom-resource schemas: a folder in {group}/{kind}_{version}.json layout "
                                "or a URL template (default: the public CRDs catalog, cached).")
_crd_opt = click.option("--crd-location", envvar="FLEETGEN_CRD_LOCATION", metavar="DIR|URL",
                        help="CRDs whose CEL rules are evaluated: a folder of CRD YAML files or a URL "
                             "template with {version} (default: the Kueue release manifests, cached).")


@click.group(cls=FullHelpGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", default=".", envvar="FLEETGEN_ROOT", show_default=True,
              type=click.Path(file_okay=False), help="Fleet repository with teams/, clusters/ and rendered/.")
@click.version_option(package_name="fleetgen")
@click.pass_context
def cli(ctx: click.Context, root: str) -> None:
    """fleetgen: compile teams/*.yaml and clusters/*.yaml into GitOps manifests under rendered/."""
    ctx.ensure_object(dict)
    ctx.obj["root"] = root


@cli.command()
@click.option("--cluster", "clusters", multiple=True, metavar="NAME", type=Name("cluster"),
              help="Render only this cluster (repeatable).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 listing files that differ from rendered/.")
@click.option("--full", is_flag=True, help="Trust no record of the last render (kept outside the repository): "
              "compile every cluster and compare every file.")
@click.option("-j", "--jobs", type=click.IntRange(0, 64), default=0,
              help="Processes compiling clusters; 0 (default) = one per core from 8 clusters on, else 1.")
@click.option("--lock-timeout", type=Seconds(min=0), default=60, show_default=True, metavar="SECONDS",
              help="How long to wait for another render of this repository to finish before giving up.")
@_schema_opt
@_crd_opt
@click.pass_context
@_guard
def render(ctx: click.Context, clusters: tuple[str, ...], check: bool, full: bool, jobs: int, lock_timeout: float,
           schema_location: str | None, crd_location: str | None) -> None:
    """Compile the fleet into rendered/<cluster>/ (atomically; nothing is written on any error)."""
    from generator import incremental

    if not clusters and not full:  # the no-op, before the compilers are even imported
        files = incremental.unchanged_since_last_render(_root(ctx), incremental.options_key(schema_location,
                                                                                            crd_location))
        if files is not None:
            echo(incremental.up_to_date_line(files, check))
            return
    from generator.render import render_fleet
    from generator.validate.pipeline import Options

    _stop_on_sigterm()  # unwinds through the stage's cleanup; held during the switch itself
    outcome = render_fleet(_root(ctx), list(clusters), check, jobs, Options(schema_location, crd_location),
                           lock_timeout, lambda line: echo(line, err=True), _progress(), full)
    for line in outcome.said:
        echo(line)
    if outcome.stale:
        sys.exit(EXIT_DIFF)


@cli.command()
@click.option("--cluster", "clusters", multiple=True, metavar="NAME", type=Name("cluster"),
              help="Validate only this cluster.")
@_schema_opt
@_crd_opt
@click.option("--offline", is_flag=True, help="Use only local locations and the cache; never the network.")
@click.option("--no-kubeconform", is_flag=True, help="Do not run kubeconform even when it is on PATH.")
@click.pass_context
@_guard
def validate(ctx: click.Context, clusters: tuple[str, ...], schema_location: str | None, crd_location: str | None,
             offline: bool, no_kubeconform: bool) -> None:
    """Run every check: config, schemas of every object (and kubeconform), Kueue CEL and webhook rules."""
    from generator import render as pipeline
    from generator.errors import InputError
    from generator.validate.pipeline import Options

    options = Options(schema_location, crd_location, network=not offline, kubeconform=not no_kubeconform,
                      complete=True)
    try:
        result = pipeline.build(_root(ctx), list(clusters) or None, options)
    except InputError as exc:
        if any(f.check == "config" for f in exc.findings):
            raise
        echo(str(exc), err=True)
        echo(f"{len(exc.findings)} findings", err=True)
        sys.exit(EXIT_DIFF)
    for line in result.notices():  # checks that could not run, then inputs Kueue reads otherwise
        echo(line, err=True)
    objects = pipeline.object_count(result)
    echo(f"valid: {objects} objects in {len(result.compiled)} clusters")


@cli.command()
@click.argument("what", type=click.Choice(["team", "cluster"]))
@click.argument("name", callback=lambda ctx, param, value: Name(ctx.params.get("what", "team")).convert(
    value, param, ctx))
@click.pass_context
@_guard
def explain(ctx: click.Context, what: str, name: str) -> None:
    """Show a team's quotas per cluster and pool, or a cluster's pool allocation."""
    from generator.checks import load_fleet
    from generator.errors import UsageError
    from generator.explain import explain_cluster, explain_team

    fleet = load_fleet(_root(ctx))
    known = fleet.teams if what == "team" else fleet.clusters
    if name not in known:
        raise UsageError(f"unknown {what} {name!r}; known: {', '.join(sorted(known)) or '(none)'}")
    echo(explain_team(fleet, name) if what == "team" else explain_cluster(fleet, name))


@cli.command("init")
@click.option("--owner", required=True, metavar="@ORG/TEAM",
              help="The platform team (GitHub @org/team, @user or e-mail): owns clusters/ and approves quotas.")
@click.option("--repo-url", required=True, metavar="URL", help="This fleet's git repository, which the cluster syncs.")
@click.option("--registry", required=True, metavar="HOST/PATH",
              help="Where .github/workflows/images.yml pushes fleetgen's images, e.g. ghcr.io/your-org.")
@click.option("--cluster", required=True, metavar="NAME", type=Name("cluster"), help="Name of the first cluster.")
@click.option("--engine", type=click.Choice(["argocd", "flux"]), default="argocd", show_default=True,
              help="GitOps engine of the cluster.")
@click.option("--team", required=True, metavar="NAME", type=Name("team"), help="Name of the first team.")
@click.option("--gpu-product", required=True, metavar="PRODUCT",
              help="GPU model as the GPU operator labels it, e.g. NVIDIA-H100-80GB-HBM3.")
@click.option("--gpus-per-node", required=True, type=click.IntRange(1, 64), help="GPUs on each node of the pool.")
@click.option("--nodes", required=True, type=click.IntRange(1, 100_000), help="Nodes in the pool.")
@click.option("--cpu-per-node", required=True, metavar="QUANTITY", help="Allocatable CPU of one node, e.g. 192.")
@click.option("--memory-per-node", required=True, metavar="QUANTITY",
              help="Allocatable memory of one node, e.g. 1800Gi.")
@click.option("--kubernetes-version", default="1.33", show_default=True, metavar="1.MINOR")
@click.option("--force", is_flag=True, help="Replace teams and clusters that are not the example fleet's.")
@click.pass_context
@_guard
def init(ctx: click.Context, force: bool, **values: Any) -> None:
    """Turn this copy of the fleetgen repository into your own fleet: one cluster, one team, your owners."""
    import signal

    from generator.scaffold.init import FleetSpec, init_fleet

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a CI cancel or `kill`: the switch's renames are undone, the stage removed
    signal.signal(signal.SIGTERM, stop)
    root = _root(ctx)
    written, kept = init_fleet(root, FleetSpec(**values), force=force, note=lambda line: echo(line, err=True))
    for rel in written:
        echo(f"wrote {rel}")
    echo(f"kept the files it replaced in {kept} (git ignores it; delete it once you no longer need them)")
    echo("next: read the commented keys in clusters/ and teams/, `./fleetgen render`, commit, and bootstrap the "
         "cluster from rendered/gitops/ (docs/how-to/gitops.md)")


@cli.command()
@click.argument("which", type=click.Choice(["team", "cluster", "diff"]), required=False)
@click.option("--write", is_flag=True, help="Write schemas/team.schema.json and schemas/cluster.schema.json.")
@click.option("--check", is_flag=True, help="Exit 1 if the schemas/ files are out of date.")
@click.pass_context
@_guard
def schema(ctx: click.Context, which: str | None, write: bool, check: bool) -> None:
    """Print the JSON Schema of team or cluster files (for editor autocompletion)."""
    from generator import repofiles
    from generator.jsonschemas import schema_files, schema_text

    root = _root(ctx)
    if write or check:
        stale = []
        for rel, text in schema_files().items():
            if repofiles.inside(root, rel).is_file() and repofiles.read_bytes(root, rel) == text.encode():
                continue
            stale.append(rel)
            if write:
                repofiles.write_bytes(root, rel, text.encode())
        if check and stale:
            echo(f"out of date: {', '.join(stale)}; run `fleetgen schema --write`")
            sys.exit(EXIT_DIFF)
        echo("schemas/ " + ("written" if write and stale else "up to date"))
        return
    echo(schema_text(which or "team"), nl=False)


@cli.command()
@click.option("--base", metavar="REF", help="Git ref to compare the work tree with (default HEAD).")
@click.option("--from", "from_dir", metavar="DIR", help="Compare DIR (a fleet repository or a rendered tree) ...")
@click.option("--to", "to_dir", metavar="DIR", help="... with DIR.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--ignore", multiple=True, metavar="KIND:PATH",
              help="Ignore field changes matching a glob, e.g. 'Application:spec.source.targetRevision'.")
@click.option("--output-dir", "output_dir_given", type=click.Path(file_okay=False), metavar="DIR",
              help="Write comment-N.md parts, diff.txt (complete) and diff.json to DIR; when the fleet does "
                   "not load, comment-1.md says why (exit 2).")
@click.option("--max-comment-chars", type=click.IntRange(min=4_000), default=60_000, show_default=True,
              help="Size budget of one Markdown comment part (GitHub refuses more than 65,536).")
@click.option("--head-sha", metavar="SHA", help="Commit named in every comment part (the pull request's head).")
@click.option("--rendered", "committed", is_flag=True,
              help="Compare the committed rendered/ of --base and of the work tree, reading only the files "
                   "that differ (fast; use once `fleetgen render --check` has passed).")
@click.option("--color/--no-color", default=None, help="Colour text output (default: when a terminal).")
@click.pass_context
@_guard
def diff(ctx: click.Context, base: str | None, from_dir: str | None, to_dir: str | None, fmt: str,
         ignore: tuple[str, ...], output_dir_given: str | None, max_comment_chars: int, head_sha: str | None,
         committed: bool, color: bool | None) -> None:
    """What a change does to every cluster: objects, GPU capacity per team, risks. Exit 1 when anything
    changes (an object, or a pool's size)."""
    from generator.diff.comment import Stamp, markdown_parts
    from generator.diff.outputs import now, output_dir, write_failure, write_report
    from generator.diff.report import to_text
    from generator.diff.run import run_diff

    _stop_on_sigterm()
    stamp = Stamp(head_sha or "", now())
    out = output_dir(_root(ctx), output_dir_given) if output_dir_given else None
    try:
        result = run_diff(_root(ctx), base, from_dir, to_dir, list(ignore), committed)
    except Exception as exc:
        if out is not None:
            from generator.failures import describe

            write_failure(out, describe(exc, "diff"), stamp, max_comment_chars)
        raise
    parts = markdown_parts(result, max_comment_chars, stamp) if fmt == "markdown" or out else []
    report = result.to_json().model_dump_json(indent=2) + "\n"
    if out is not None:
        write_report(out, result, parts, report)
        echo(f"wrote {len(parts)} comment part(s), diff.txt and diff.json to {out}", err=True)
    if fmt == "json":
        echo(report, nl=False)
    elif fmt == "markdown":
        echo("\n\n---\n\n".join(parts), nl=False)
    else:
        use_color = sys.stdout.isatty() if color is None else color
        echo(to_text(result, use_color), nl=False, color=use_color)
    sys.exit(EXIT_DIFF if result.changed else EXIT_OK)


def _connection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--kubeconfig", envvar="KUBECONFIG", metavar="FILE", help="Kubeconfig file."),
        click.option("--context", metavar="NAME", help="Kubeconfig context (the cluster to use)."),
        click.option("--token", envvar="FLEETGEN_TOKEN", metavar="TOKEN", help="Bearer token (with --server)."),
        click.option("--server", metavar="URL", help="API server URL (with --token)."),
        click.option("--certificate-authority", metavar="FILE",
                     help="CA bundle (PEM) that signed the server's certificate (with --token and --server)."),
        click.option("--insecure-skip-tls-verify", is_flag=True, help="Do not verify the server's certificate."),
        click.option("--request-timeout", type=Seconds(min=0.1), metavar="SECONDS",
                     help="Give up on an API call the cluster has not answered after SECONDS (default 60)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _api(kubeconfig: str | None, context: str | None, token: str | None, server: str | None,
         insecure_skip_tls_verify: bool, certificate_authority: str | None = None,
         request_timeout: float | None = None) -> Any:
    from generator.jobs import connect

    return connect(kubeconfig, context, token, server, insecure_skip_tls_verify,
                   certificate_authority=certificate_authority, request_timeout=request_timeout, flags=True)


def _checkout(ctx: click.Context) -> Path | None:
    """The fleet repository the command runs in (--root, default here), or None outside one: then the
    job commands read the fleet files the connected cluster publishes instead."""
    root = _root(ctx)
    return root if (root / "teams").is_dir() or (root / "clusters").is_dir() else None


def _job_fleet(ctx: click.Context, api: Any) -> Any:
    """The fleet of the checkout, or else of the connected cluster (`api`: an ApiClient, or a callable making one)."""
    from generator.checks import load_fleet
    from generator.jobs.published import published_fleet

    root = _checkout(ctx)
    return load_fleet(root) if root is not None else published_fleet(api() if callable(api) else api)


def _team_namespaces(ctx: click.Context, team: str, api: Any = None) -> list[str]:
    """The namespaces of `team` in this fleet repository, or in the cluster's published files outside
    one (UsageError naming the known teams)."""
    from generator.errors import UsageError

    fleet = _job_fleet(ctx, api)
    if team not in fleet.teams:
        raise UsageError(f"unknown team {team!r}; known: {', '.join(sorted(fleet.teams))}")
    return list(fleet.teams[team].config.namespace_names)


def _job_target(ctx: click.Context, namespace: str | None, team: str | None, conn: dict[str, Any]) -> tuple[str, Any]:
    """The job's namespace and the connection: a usage error first; the cluster asked for the team's
    namespaces only outside a fleet repository, over the one connection the command then uses."""
    api_of = functools.cache(lambda: _api(**conn))
    namespace = _namespace(ctx, namespace, team, api_of)
    return namespace, api_of()


def _namespace(ctx: click.Context, namespace: str | None, team: str | None, api: Any = None) -> str:
    if namespace:
        return namespace
    if team:
        return _team_namespaces(ctx, team, api)[0]
    from generator.errors import UsageError

    raise UsageError("say which namespace: --namespace NS or --team TEAM")


@cli.group(cls=FullHelpGroup)
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
    """Print a concrete job (a JobSet, or the profile's `kind`: a batch Job, RayJob, TrainJob or RayCluster)
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
    """Submit FILE (a JobSet, batch Job, RayJob, TrainJob or RayCluster) or TEAM PROFILE to the cluster, after
    checking it can run.

    The team's quota is checked against the fleet repository's files, or outside one against the
    files the cluster publishes.
    """
    from generator.config.names import name_problem
    from generator.errors import UsageError
    from generator.jobs import Job, RayCluster
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
    kind = str((made.body or {}).get("kind"))
    option = "" if kind == "JobSet" else f" --kind {kind.lower()}"
    echo(f"submitted {made.namespace}/{made.name}; follow it with: fleetgen job status {made.name} "
         f"--namespace {made.namespace}{option}")


def _job_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in (click.option("--team", type=Name("team"), help="Team (its first namespace)."),
                   click.option("-n", "--namespace", type=Name("namespace"), help="Namespace of the job."),
                   click.argument("name", type=Name("job"))):
        fn = option(fn)
    return fn


T = TypeVar("T")
KIND_NAMES = {"jobset": "a JobSet", "job": "a batch Job", "rayjob": "a RayJob", "trainjob": "a TrainJob",
              "raycluster": "a RayCluster", "deployment": "a serving Deployment",
              "leaderworkerset": "a serving LeaderWorkerSet"}
KIND_OPTION = click.option("--kind", type=click.Choice(list(KIND_NAMES)), default="jobset", show_default=True,
                           help="What NAME is: a JobSet, a batch Job, a RayJob, a TrainJob, a RayCluster, a serving "
                           "Deployment or LeaderWorkerSet (the Ray kinds where the cluster runs KubeRay, a TrainJob "
                           "where it runs Kubeflow Trainer, a LeaderWorkerSet where it runs LeaderWorkerSet).")


def _is_kind(api: Any, name: str, namespace: str, kind: str) -> bool:
    """Whether NAME is an object of `kind` (a --kind value) there; False where that cannot be told."""
    from generator.jobs import ClusterError, Job, RayCluster
    from generator.jobs.job import KIND_OPTIONS

    try:
        if kind == "raycluster":
            return RayCluster.on_cluster(api, name, namespace).exists()
        Job.on_cluster(api, name, namespace, KIND_OPTIONS[kind])._read()
        return True
    except ClusterError:
        return False
    except Exception as exc:  # noqa: BLE001 - the API client's 404 (or 403) means only "cannot tell"
        if getattr(exc, "status", None) in (403, 404):
            return False
        raise


def _job_or_hint(api: Any, name: str, namespace: str, command: str, kind: str, act: Callable[[], T]) -> T:
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


@job.command("status")
@_job_command
@KIND_OPTION
@_connection_options
@click.pass_context
@_guard
def job_status(ctx: click.Context, name: str, namespace: str | None, team: str | None, kind: str,
               **conn: Any) -> None:
    """Kueue admission and progress of job NAME (a RayCluster's: Kueue's, then its pods', then Ray's)."""
    from generator.jobs import Job, RayCluster
    from generator.jobs.job import KIND_OPTIONS

    ns, api = _job_target(ctx, namespace, team, conn)
    if kind == "raycluster":
        echo(str(RayCluster.on_cluster(api, name, ns).status()))
        return
    echo(str(_job_or_hint(api, name, ns, "status", kind, Job.on_cluster(api, name, ns, KIND_OPTIONS[kind]).status)))


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
    from generator.jobs import Job, RayCluster
    from generator.jobs.job import KIND_OPTIONS

    ns, api = _job_target(ctx, namespace, team, conn)
    lines = (RayCluster.on_cluster(api, name, ns).logs if kind == "raycluster"
             else Job.on_cluster(api, name, ns, KIND_OPTIONS[kind]).logs)

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
    from generator.jobs import Job, RayCluster
    from generator.jobs.job import KIND_OPTIONS

    ns, api = _job_target(ctx, namespace, team, conn)
    if kind == "raycluster":
        RayCluster.on_cluster(api, name, ns).down()
    else:
        _job_or_hint(api, name, ns, "cancel", kind, Job.on_cluster(api, name, ns, KIND_OPTIONS[kind]).cancel)
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
    from generator.errors import UsageError
    from generator.jobs import Job, RayCluster
    from generator.jobs.job import KIND_OPTIONS

    ns, api = _job_target(ctx, namespace, team, conn)
    if kind == "raycluster":  # admitted by Kueue, or running: every pod, as KubeRay calls it ready
        if until == "finished":
            raise UsageError("a RayCluster does not finish: wait --for admitted or running (ready)")
        RayCluster.on_cluster(api, name, ns).wait("ready" if until == "running" else until, timeout_seconds, interval,
                                                  progress=lambda status: echo(str(status)))
        return
    handle = Job.on_cluster(api, name, ns, KIND_OPTIONS[kind])
    final = _job_or_hint(api, name, ns, "wait", kind, lambda: handle.wait(
        until=until, timeout_seconds=timeout_seconds, poll=interval, progress=lambda status: echo(str(status))))
    if final.phase == "failed":
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
        echo(f"{found.namespace}/{str(found.status())}" + (f" ({found.of.kind})" if found.of.kind != "JobSet" else ""))
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


@cli.group(cls=FullHelpGroup)
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

    from generator.jobs import connect
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


def main() -> None:
    """Console-script entry point: output that cannot fail on any locale, then the CLI."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a latin-1 or ASCII terminal shows escapes instead of crashing
            reconfigure(errors="backslashreplace")
    cli(prog_name="fleetgen")
