"""The one door to a fleet repository's files: reads and writes that never leave its root.

A fleet repository is written by many hands. A committed symbolic link (`teams/x.yaml ->
/etc/shadow`, `rendered/dev -> /home/ci`) would make a read echo a file outside the repository
in an error message, or a write overwrite one. Every path fleetgen reads or writes under the
root goes through here: no component from the root down may be a link, no `..`, no absolute
path, and files are opened with O_NOFOLLOW so a link swapped in afterwards is refused too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from generator.errors import UsageError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePath(UsageError):
    """A path that is a link, or would leave the root: exit 2, nothing read or written."""

    def __init__(self, path: str, reason: str, fix: str) -> None:
        super().__init__(f"{path} {reason}: {fix}")
        self.path, self.reason, self.fix = path, reason, fix


LINK_REASON = ("is a symbolic link; fleetgen does not follow links in the repository "
               "(one could read or write outside it)")
LINK_FIX = "replace it with the real file or folder"


def _parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or any(p in ("..", "") for p in parts):
        raise UnsafePath(str(rel), "leaves the repository", "use a path inside it")
    return parts


def inside(root: Path, rel: str | PurePosixPath, shown: str = "") -> Path:
    """`root/rel`, after checking that no existing component below `root` is a symbolic link.
    `shown` is the root's own path as users see it (`rendered/` when `root` is that folder)."""
    current = root
    for part in _parts(rel):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break  # the rest does not exist yet: nothing to follow
        if stat.S_ISLNK(mode):
            raise UnsafePath(shown + current.relative_to(root).as_posix(), LINK_REASON, LINK_FIX)
    return root / PurePosixPath(rel)


def read_regular(path: Path) -> tuple[os.stat_result, bytes] | None:
    """A file's stat data and content through one descriptor (so the two agree), opened without
    following a link; None when it is not a regular file. OSError as opening or reading raises it."""
    # O_NONBLOCK: opening a FIFO (or a device) committed in place of a file must not wait for a
    # writer that never comes; it is refused below as not a regular file.
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return st, b"".join(chunks)
    finally:
        os.close(fd)


def read_bytes(root: Path, rel: str | PurePosixPath, shown: str = "") -> bytes:
    """Content of a regular file inside the root."""
    got = read_regular(inside(root, rel, shown))
    if got is None:
        raise UnsafePath(f"{shown}{rel}", "is not a regular file", "commit a file here")
    return got[1]


def write_bytes(root: Path, rel: str | PurePosixPath, data: bytes) -> None:
    """Replace a file inside the root atomically: a new file beside it, then a rename over it
    (a rename replaces a link itself, never what it points to)."""
    path = inside(root, rel)
    if not path.parent.is_dir():
        parts = _parts(rel)
        for depth in range(1, len(parts)):  # create missing folders one by one, each checked
            folder = inside(root, PurePosixPath(*parts[:depth]))
            if not folder.is_dir():
                folder.mkdir()
    tmp = path.with_name(f".{path.name}.fleetgen-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL | _NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def files_under(root: Path, rel: str | PurePosixPath, shown: str = "") -> list[str]:
    """Regular files below `root/rel` (paths relative to it, sorted); a link anywhere is refused."""
    top = inside(root, rel, shown)
    if not top.is_dir():
        return []
    out: list[str] = []
    for dirpath, dirs, names in os.walk(top):
        for name in dirs + names:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                inside(root, Path(full).relative_to(root).as_posix(), shown)  # raises, naming the link
        out.extend(Path(dirpath, name).relative_to(top).as_posix() for name in names)
    return sorted(out)


def refuse_links(root: Path, skip: frozenset[str] = frozenset()) -> None:
    """Raise UnsafePath naming the first symbolic link at or below `root` (in sorted order), before a
    command that moves or writes whole trees starts. Entries named in `skip` (git-ignored
    environments and caches) are not looked at."""
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)  # os.walk lists links to folders, never enters them
        for name in sorted({*dirs, *names} - skip):
            full = Path(dirpath, name)
            if full.is_symlink():
                raise UnsafePath(full.relative_to(root).as_posix(), LINK_REASON, LINK_FIX)


def move(root: Path, source: str | PurePosixPath, target: str | PurePosixPath) -> None:
    """Rename `root/source` to `root/target`, never over anything there (a rename moves a link itself,
    never what it points to; the folders on both ways are checked for links just before)."""
    old, new = inside(root, source), inside(root, target)
    if os.path.lexists(new):
        raise UnsafePath(str(target), "is in the way (it appeared meanwhile)", "run the command again")
    os.rename(old, new)
