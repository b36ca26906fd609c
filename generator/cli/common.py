"""What every verb of the command line shares: output through the terminal filter, the error
boundary, exit codes, parameter types, the full-help group and the cluster connection options."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from generator.connection import Connection

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
         request_timeout: float | None = None) -> Connection:
    from generator.connection import connect

    return connect(kubeconfig, context, token, server, insecure_skip_tls_verify,
                   certificate_authority=certificate_authority, request_timeout=request_timeout, flags=True)

