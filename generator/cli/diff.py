"""`fleetgen diff`: what a change does to every cluster."""

from __future__ import annotations

import sys

import click

from generator.cli.common import EXIT_DIFF, EXIT_OK, _guard, _root, _stop_on_sigterm, echo


@click.command()
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

