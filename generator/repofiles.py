"""The one door to a fleet repository's files: reads and writes that never leave its root.

A fleet repository is written by many hands. A committed symbolic link (`teams/x.yaml ->
/etc/shadow`, `rendered/dev -> /home/ci`) would make a read echo a file outside the repository
in an error message, or a write overwrite one. Every path fleetgen reads or writes under the
root goes through here: no component from the root down may be a link, no `..`, no absolute
path, and files are opened with O_NOFOLLOW so a link swapped in afterwards is refused too.

Writes go through `Folder`: a folder held open, every name below it resolved by the kernel from
its descriptor (`dir_fd`), each component opened with O_NOFOLLOW|O_DIRECTORY. A path string is
walked again by the kernel at every call, through whatever link a commit (or a racing process)
put on the way; a descriptor is not. `tracked` asks git which paths it tracks, for folders that
are fleetgen's own and must never come from a commit.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import TracebackType

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


def read_regular(path: Path, dir_fd: int | None = None, follow: bool = False,
                 limit: int | None = None) -> tuple[os.stat_result, bytes] | None:
    """A file's stat data and content through one descriptor (so the two agree), opened without
    following a link unless `follow` (relative to `dir_fd` if given), at most `limit` + 1 bytes if
    given; None when it is not a regular file. OSError as opening or reading raises it."""
    # O_NONBLOCK: opening a FIFO (or a device) committed in place of a file must not wait for a
    # writer that never comes; it is refused below as not a regular file.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else _NOFOLLOW)
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while (limit is None or size <= limit) and (
                chunk := os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        return st, b"".join(chunks)
    finally:
        os.close(fd)


def read_bytes(root: Path, rel: str | PurePosixPath, shown: str = "") -> bytes:
    """Content of a regular file inside the root."""
    got = read_regular(inside(root, rel, shown))
    if got is None:
        raise UnsafePath(f"{shown}{rel}", "is not a regular file", "commit a file here")
    return got[1]


@contextmanager
def _holding(root: Path, rel: str | PurePosixPath) -> Iterator[tuple[Folder, str]]:
    """The folder that holds the file `rel` inside the root, open (made if missing), and the file's name."""
    parts = _parts(rel)
    inside(root, rel)  # a link in place of the file is refused by name, not silently replaced
    with Folder.open(root, PurePosixPath(*parts[:-1]).as_posix() if len(parts) > 1 else "", create=True) as folder:
        yield folder, parts[-1]


def write_bytes(root: Path, rel: str | PurePosixPath, data: bytes) -> None:
    """Replace a file inside the root atomically: a new file beside it, then a rename over it
    (a rename replaces a link itself, never what it points to). Missing folders are created."""
    with _holding(root, rel) as (folder, name):
        folder.replace(name, data)


def create_bytes(root: Path, rel: str | PurePosixPath, data: bytes) -> None:
    """Create a file inside the root, whole or not at all; FileExistsError if anything is there."""
    with _holding(root, rel) as (folder, name):
        folder.create(name, data)


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _name(name: str, shown: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise UnsafePath(f"{shown}{name}", "is not a plain name in its folder", "use a name without / or ..")
    return name


class Folder:
    """A folder inside the root, held open: every operation names an entry relative to its
    descriptor, so no link on the way (committed, or swapped in meanwhile) is ever followed.
    `shown` is its path as users see it, ending in `/` (`.fleetgen/stage-x/`)."""

    def __init__(self, fd: int, shown: str) -> None:
        self.fd, self.shown = fd, shown

    @classmethod
    def open(cls, root: Path, rel: str = "", create: bool = False) -> Folder:
        """`root/rel`, each component checked and opened in turn (created if `create`). The root
        itself is the user's choice and may be reached through a link; nothing below it may."""
        folder = cls(os.open(root, _DIR_FLAGS & ~_NOFOLLOW), "")
        try:
            for part in _parts(rel) if rel not in ("", ".") else ():
                inner = folder.child(part, create)
                folder.close()
                folder = inner
        except BaseException:
            folder.close()
            raise
        return folder

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def mode(self, name: str) -> int | None:
        """The entry's file type and mode, not following a link; None if there is none."""
        try:
            return os.lstat(_name(name, self.shown), dir_fd=self.fd).st_mode
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.mode(name) is not None

    def names(self) -> list[str]:
        """The entries, sorted."""
        return sorted(os.listdir(self.fd))

    def _unsafe(self, name: str, mode: int) -> UnsafePath:
        if stat.S_ISLNK(mode):
            return UnsafePath(f"{self.shown}{name}", LINK_REASON, LINK_FIX)
        return UnsafePath(f"{self.shown}{name}", "is not a folder", "remove it, or move it out of the way")

    def _link(self, error: OSError, name: str) -> OSError | UnsafePath:
        """ELOOP from an O_NOFOLLOW open: the entry is a link, said with its path; else `error`."""
        return UnsafePath(f"{self.shown}{name}", LINK_REASON, LINK_FIX) if error.errno == errno.ELOOP else error

    def child(self, name: str, create: bool = False) -> Folder:
        """The folder `name` in this one, opened without following a link (made if `create`)."""
        mode = self.mode(name)
        if mode is None and create:
            with _ignoring(errno.EEXIST):
                os.mkdir(name, 0o777, dir_fd=self.fd)
            mode = self.mode(name)
        if mode is None:
            raise FileNotFoundError(errno.ENOENT, "no such folder", f"{self.shown}{name}")
        if not stat.S_ISDIR(mode):
            raise self._unsafe(name, mode)
        try:
            return Folder(os.open(name, _DIR_FLAGS, dir_fd=self.fd), f"{self.shown}{name}/")
        except OSError as exc:  # swapped for a link or a file after the lstat
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._unsafe(name, stat.S_IFLNK) from None
            raise

    def write_new(self, name: str, data: bytes, mode: int = 0o666) -> os.stat_result:
        """Create the file `name` (it must not exist: no link is written through) with `data`;
        its stat data as written."""
        fd = os.open(_name(name, self.shown), _NEW_FILE, mode, dir_fd=self.fd)
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view):]
            return os.fstat(fd)
        finally:
            os.close(fd)

    def open_file(self, name: str, flags: int, mode: int = 0o644) -> int:
        """A descriptor of the file `name` (for a lock, say), never opened through a link; the
        caller closes it."""
        try:
            return os.open(_name(name, self.shown), flags | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode,
                           dir_fd=self.fd)
        except OSError as exc:
            raise self._link(exc, name) from None

    def replace(self, name: str, data: bytes) -> None:
        """Write `name` atomically: a new file beside it, renamed over it (a rename replaces a
        link itself, never what it points to)."""
        tmp = self._beside(name)
        try:
            self.write_new(tmp, data, 0o644)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def _beside(self, name: str) -> str:
        """A free name for the new content of `name`, next to it (this process's, cleared first)."""
        tmp = f".{_name(name, self.shown)}.fleetgen-{os.getpid()}"
        self.unlink(tmp)
        return tmp

    def create(self, name: str, data: bytes) -> None:
        """Write the new file `name` whole or not at all, never over an entry there (FileExistsError):
        a file beside it, then a hard link to the name, which fails if anything has taken it."""
        tmp = self._beside(name)
        try:
            self.write_new(tmp, data, 0o644)
            os.link(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        finally:
            self.unlink(tmp)

    def read(self, name: str) -> bytes:
        """A regular file's content, opened without following a link."""
        try:
            got = read_regular(Path(_name(name, self.shown)), self.fd)
        except OSError as exc:
            raise self._link(exc, name) from None
        if got is None:
            raise UnsafePath(f"{self.shown}{name}", "is not a regular file", "remove it")
        return got[1]

    def unlink(self, name: str) -> None:
        """Remove a file or link (never what a link points to); nothing if absent."""
        with _ignoring(errno.ENOENT):
            os.unlink(_name(name, self.shown), dir_fd=self.fd)

    def holds_files(self, name: str) -> bool:
        """Whether the entry `name` is anything but a tree of empty folders (a link counts, and is never
        followed): what a clean-up may delete without losing anything written."""
        mode = self.mode(name)
        if mode is None or not stat.S_ISDIR(mode):
            return mode is not None
        for _, dirs, files, fd in os.fwalk(name, dir_fd=self.fd, follow_symlinks=False):
            # fwalk lists a link to a folder among the folders (and does not enter it)
            if files or any(not stat.S_ISDIR(os.lstat(d, dir_fd=fd).st_mode) for d in dirs):
                return True
        return False

    def rename(self, name: str, to: Folder, new_name: str) -> None:
        """Move the entry `name` to `to/new_name`: both folders held open, so the kernel resolves
        only the last components, and rename never follows a link there."""
        os.rename(_name(name, self.shown), _name(new_name, to.shown), src_dir_fd=self.fd, dst_dir_fd=to.fd)

    def remove_tree(self, name: str) -> None:
        """Delete the folder `name` and all below it, best effort; never through a link (a link
        there is removed itself)."""
        mode = self.mode(name)
        if mode is None:
            return
        if not stat.S_ISDIR(mode):
            self.unlink(name)
            return
        shutil.rmtree(name, ignore_errors=True, dir_fd=self.fd)


class _ignoring:
    """Suppress an OSError with one errno (contextlib.suppress matches on type only)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        return isinstance(error, OSError) and error.errno == self.code


def tracked(root: Path, rel: str) -> list[str]:
    """The paths under `root/rel` that git tracks (git judges, from the repository's index);
    empty when `root` is not in a git work tree or git is not installed."""
    _parts(rel)
    try:
        proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", rel],
                              capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    return sorted(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p)


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


def _split(rel: str | PurePosixPath) -> tuple[str, str]:
    """(parent folder, name) of a path inside the root; the parent is "" at the top."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(str(rel), "is the repository itself", "name a path inside it")
    return PurePosixPath(*parts[:-1]).as_posix() if len(parts) > 1 else "", parts[-1]


def lexists(root: Path, rel: str | PurePosixPath) -> bool:
    """Whether `root/rel` is there (a link counts, never followed); False when a folder on the way is
    missing. A link or file in place of a folder on the way is refused (UnsafePath)."""
    parent, name = _split(rel)
    try:
        with Folder.open(root, parent) as folder:
            return folder.exists(name)
    except FileNotFoundError:
        return False


def move(root: Path, source: str | PurePosixPath, target: str | PurePosixPath, create: bool = False) -> None:
    """Rename `root/source` to `root/target`, never over anything there: both folders held open (each
    component checked and opened without following a link), so the kernel resolves only the two last
    names, and a rename moves an entry itself, never what a link points to. The source itself may not be
    a link either. `create` makes the target's missing folders."""
    (source_dir, source_name), (target_dir, target_name) = _split(source), _split(target)
    with Folder.open(root, source_dir) as old:
        mode = old.mode(source_name)
        if mode is not None and stat.S_ISLNK(mode):
            raise old._unsafe(source_name, mode)
        with Folder.open(root, target_dir, create) as new:
            if new.exists(target_name):
                raise UnsafePath(str(target), "is in the way (it appeared meanwhile)", "run the command again")
            old.rename(source_name, new, target_name)


def read_named(path: str | Path, limit: int) -> bytes:
    """A file a user named outside the repository (a job file, a policy, a kubeconfig): links are
    followed, as they named it, but a FIFO or device in its place is refused rather than waited on.
    At most `limit` + 1 bytes are read, so the caller can tell a file over its limit. OSError as
    opening or reading raises it; NotRegular for anything but a regular file."""
    got = read_regular(Path(path), follow=True, limit=limit)
    if got is None:
        raise NotRegular("not a regular file")
    return got[1]


def refuse_special(path: str | Path) -> None:
    """NotRegular if `path` exists and is not a regular file (links followed): for files another
    library opens itself, which would wait on a FIFO for ever."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # absent or unreadable: the library that opens it says so
    if not stat.S_ISREG(mode):
        raise NotRegular(f"{path} is not a regular file")


class NotRegular(OSError):
    """A named path that is a FIFO, device, socket or folder: nothing to read, or nothing to wait on."""
