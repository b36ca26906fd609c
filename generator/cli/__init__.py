"""The `fleetgen` command line: the root group, and each verb group's module (build, diff, job, health)
added to it.

Heavy modules (pydantic models, jsonschema, CEL, the Kubernetes client) are imported inside the
commands so `fleetgen --help` stays fast. Exit codes: 0 ok, 1 findings or differences,
2 usage or input errors.
"""

from __future__ import annotations

import sys

import click

from generator.cli import build, diff, health, job
from generator.cli.common import FullHelpGroup


@click.group(cls=FullHelpGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", default=".", envvar="FLEETGEN_ROOT", show_default=True,
              type=click.Path(file_okay=False), help="Fleet repository with teams/, clusters/ and rendered/.")
@click.version_option(package_name="fleetgen")
@click.pass_context
def cli(ctx: click.Context, root: str) -> None:
    """fleetgen: compile teams/*.yaml and clusters/*.yaml into GitOps manifests under rendered/."""
    ctx.ensure_object(dict)
    ctx.obj["root"] = root


for command in (build.render, build.validate, build.explain, build.init, build.add, build.schema, diff.diff,
                job.job, health.health):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point: output that cannot fail on any locale, then the CLI."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a latin-1 or ASCII terminal shows escapes instead of crashing
            reconfigure(errors="backslashreplace")
    cli(prog_name="fleetgen")
