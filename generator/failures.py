"""Every failure as one or two lines a person can act on: the table behind the CLI's error boundary.

Findings (`InputError`) keep their own located lines; everything else is matched here by type,
most specific first, and an OSError by its errno, so a full disk, a read-only tree or a locale
that cannot print reads as what it is instead of a traceback.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from generator.errors import InputError, UsageError

OS_HINTS: dict[int, str] = {
    errno.ENOSPC: "the disk is full: free some space and run again",
    errno.EDQUOT: "the disk quota is used up: free some space and run again",
    errno.EROFS: "the file system is read-only: run fleetgen where it may write",
    errno.EACCES: "permission denied: check the owner and mode of the file or folder",
    errno.EPERM: "operation not permitted: check the owner and mode of the file or folder",
    errno.ENOENT: "no such file or folder: check the path",
    errno.ENOTDIR: "a path component is a file, not a folder: check the path",
    errno.EISDIR: "the path is a folder, not a file: check the path",
    errno.ELOOP: "the path is a symbolic link, which fleetgen does not follow: replace it with the real file",
}


def _findings(exc: BaseException, verb: str) -> str:
    assert isinstance(exc, InputError)
    n = len(exc.findings)
    return f"{exc}\nerror: {n} problem{'s' if n != 1 else ''} found; nothing was written"


def _plain(exc: BaseException, verb: str) -> str:
    return str(exc)


def _os(exc: BaseException, verb: str) -> str:
    assert isinstance(exc, OSError)
    where = f" ({exc.filename})" if exc.filename else ""
    hint = OS_HINTS.get(exc.errno or 0, "see the message above")
    return (f"error: {verb} failed: {exc.strerror or exc}{where}\n"
            f"    fix: {hint}; rendered/ is left as the last complete render")


def _unicode(exc: BaseException, verb: str) -> str:
    return (f"error: {verb} failed: text cannot be converted with this locale's encoding ({exc})\n"
            "    fix: use a UTF-8 locale, e.g. LANG=C.UTF-8 or PYTHONUTF8=1")


def _interrupted(exc: BaseException, verb: str) -> str:
    return (f"error: {verb} interrupted; rendered/ is either the last complete render or, if the switch had "
            "begun, is completed by the next `fleetgen render`")


def _cluster(exc: BaseException, verb: str) -> str:
    from generator.connection import explain

    try:
        return str(explain(exc, "the configured API server", verb, flags=True))
    except BaseException:  # noqa: B036 - explain re-raises what it does not know
        return _internal(exc, verb)


def _internal(exc: BaseException, verb: str) -> str:
    from generator import __version__

    return (f"error: {verb} failed: internal error {type(exc).__name__}: {exc}\n"
            f"    fix: this is a fleetgen bug (version {__version__}); please report it with the command you ran")


def _kinds() -> list[tuple[tuple[type[BaseException], ...], Callable[[BaseException, str], str]]]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from generator.connection import ClusterError

    return [
        ((InputError,), _findings),
        ((UsageError, ClusterError), _plain),
        ((ApiException, HTTPError), _cluster),
        ((UnicodeError,), _unicode),
        ((OSError,), _os),
        ((KeyboardInterrupt,), _interrupted),
    ]


def describe(exc: BaseException, verb: str) -> str:
    """The message for `exc`, raised while running `fleetgen <verb>`."""
    for kinds, message in _kinds():
        if isinstance(exc, kinds):
            return message(exc, verb)
    return _internal(exc, verb)
