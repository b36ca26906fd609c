"""The verbs that work on the fleet repository: render, validate, explain, init and schema."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from generator.cli.common import EXIT_DIFF, FullHelpGroup, Name, Seconds, _guard, _root, _stop_on_sigterm, echo


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


_schema_opt = click.option("--schema-location", envvar="FLEETGEN_SCHEMA_LOCATION", metavar="DIR|URL",
                           help="Custom-resource schemas: a folder in {group}/{kind}_{version}.json layout "
                                "or a URL template (default: the public CRDs catalog, cached).")
_crd_opt = click.option("--crd-location", envvar="FLEETGEN_CRD_LOCATION", metavar="DIR|URL",
                        help="CRDs whose CEL rules are evaluated: a folder of CRD YAML files or a URL "
                             "template with {version} (default: the Kueue release manifests, cached).")


@click.command()
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


@click.command()
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


@click.command()
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


def _cluster_options(urls_required: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options that describe a new cluster, the same for `init` and `add cluster`; `add cluster`
    takes the repository URL and registry from the fleet's clusters unless given."""
    fallback = "" if urls_required else " Default: the one every cluster of the fleet uses."
    options = [
        click.option("--repo-url", required=urls_required, metavar="URL",
                     help=f"This fleet's git repository, which the cluster syncs.{fallback}"),
        click.option("--registry", required=urls_required, metavar="HOST/PATH",
                     help="Where .github/workflows/images.yml pushes fleetgen's images, e.g. ghcr.io/your-org."
                          f"{fallback}"),
        click.option("--cluster", required=True, metavar="NAME", type=Name("cluster"),
                     help="Name of the cluster (its file is clusters/NAME.yaml)."),
        click.option("--engine", type=click.Choice(["argocd", "flux"]), default="argocd", show_default=True,
                     help="GitOps engine of the cluster."),
        click.option("--gpu-product", required=True, metavar="PRODUCT",
                     help="GPU model as the GPU operator labels it, e.g. NVIDIA-H100-80GB-HBM3."),
        click.option("--gpus-per-node", required=True, type=click.IntRange(1, 64),
                     help="GPUs on each node of the pool."),
        click.option("--nodes", required=True, type=click.IntRange(1, 100_000), help="Nodes in the pool."),
        click.option("--cpu-per-node", required=True, metavar="QUANTITY",
                     help="Allocatable CPU of one node, e.g. 192."),
        click.option("--memory-per-node", required=True, metavar="QUANTITY",
                     help="Allocatable memory of one node, e.g. 1800Gi."),
        click.option("--kubernetes-version", default="1.33", show_default=True, metavar="1.MINOR"),
    ]

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command
    return apply


@click.command("init")
@click.option("--owner", required=True, metavar="@ORG/TEAM",
              help="The platform team (GitHub @org/team, @user or e-mail): owns clusters/ and approves quotas.")
@_cluster_options(urls_required=True)
@click.option("--team", required=True, metavar="NAME", type=Name("team"), help="Name of the first team.")
@click.option("--fleetgen-from", metavar="GIT_URL",
              help="The fleetgen repository the fleet installs its pinned release from (fleetgen.txt). Default: "
                   "this copy's `origin` remote.")
@click.option("--force", is_flag=True, help="Run over teams, clusters, fleet.yaml or CODEOWNERS that are not the "
              "example's: each is named first, then kept in .fleetgen/init-*/previous/.")
@click.pass_context
@_guard
def init(ctx: click.Context, force: bool, **values: Any) -> None:
    """Turn this copy of the fleetgen repository into your own fleet: one cluster, one team, your owners."""
    from generator.scaffold.init import FleetSpec, init_fleet, next_steps

    _stop_on_sigterm()  # the switch's renames are undone, the stage removed
    root, spec = _root(ctx), FleetSpec(**values)
    written, kept = init_fleet(root, spec, force=force, note=lambda line: echo(line, err=True))
    for rel in written:
        echo(f"wrote {rel}")
    echo(f"kept the files it replaced in {kept} (git ignores it; delete it once you no longer need them)")
    for line in next_steps(spec):
        echo(line)


@click.group("add", cls=FullHelpGroup)
def add() -> None:
    """Add to the fleet from the command line: a cluster."""


@add.command("cluster")
@_cluster_options(urls_required=False)
@_schema_opt
@_crd_opt
@click.pass_context
@_guard
def add_cluster(ctx: click.Context, schema_location: str | None, crd_location: str | None, **values: Any) -> None:
    """Write clusters/NAME.yaml (one GPU pool, every other key commented, the health reconciler in dry
    run) once the fleet with it passes every check, then render."""
    from generator.render import render_fleet
    from generator.scaffold.cluster import add_cluster as add_file
    from generator.scaffold.cluster import add_steps, spec_for
    from generator.validate.pipeline import Options

    _stop_on_sigterm()  # a `kill` unwinds: no temporary file left beside the new one
    root, options = _root(ctx), Options(schema_location, crd_location)
    spec = spec_for(root, values)
    echo(f"wrote {add_file(root, spec, options)}")
    outcome = render_fleet(root, [], False, 0, options, 60, lambda line: echo(line, err=True))
    for line in [*outcome.said, *add_steps(spec)]:
        echo(line)


@click.command()
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

