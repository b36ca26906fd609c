"""A commit's files exactly as git stores them, read with plumbing no attribute can alter.

`git archive` applies the archived tree's own `.gitattributes` (and `info/attributes`,
`core.attributesFile`): `export-ignore` drops a file, `export-subst` rewrites `$Format:...$`,
and `eol`, `ident`, `working-tree-encoding` and `filter` drivers convert the content (git
v2.39.5, archive.c lines 93-95 and 161-166). So a pull request could hide a team file from its
own preview with one line in `teams/.gitattributes`. `git ls-tree` lists a tree without
attributes, and `git cat-file --batch` without `--filters`/`--textconv` streams each blob raw
(builtin/cat-file.c lines 356-386): what is read here is what the commit holds.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from generator.errors import UsageError

REGULAR = frozenset({"100644", "100755"})
KINDS = {"120000": "symbolic links", "160000": "a submodule (gitlink)"}
"""What a tree entry that is not a regular file is called in an error."""


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """`git -C root ARGS`'s output; a failure is a usage error naming the command."""
    proc = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


@dataclass(frozen=True)
class Entry:
    """One file of a tree: its mode, object id and path from the repository's top."""

    mode: str
    oid: str
    path: str


def entries(root: Path, commit: str, paths: list[str]) -> list[Entry]:
    """Every file under `paths` at `commit` (`git ls-tree -r`: no attribute applies)."""
    out = []
    for record in filter(None, git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths)
                         .decode("utf-8", "surrogateescape").split("\0")):
        meta, path = record.split("\t", 1)
        mode, _, oid = meta.split()
        out.append(Entry(mode, oid, path))
    return out


def read_blobs(root: Path, oids: list[str], shown: list[str]) -> list[bytes]:
    """The raw content of each blob, in one `git cat-file --batch`; `shown[i]` names `oids[i]` in
    an error (a missing object, or one that is not a file)."""
    return [bytes(blob) for blob in _batch(root, oids, shown)]


def _batch(root: Path, oids: list[str], shown: list[str]) -> Iterator[memoryview]:
    """Each blob as a view into `git cat-file --batch`'s output (no copy: a whole rendered/ is
    hundreds of MiB)."""
    if not oids:
        return
    data = memoryview(git(root, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in oids).encode()))
    at = 0
    for oid, name in zip(oids, shown, strict=True):
        header_end = at + bytes(data[at:at + 200]).index(b"\n")
        header = bytes(data[at:header_end]).split()
        if len(header) != 3 or header[1] != b"blob":
            what = f"a {header[1].decode(errors='replace')}" if len(header) == 3 else "no object"
            raise UsageError(f"{name}: git has {what} for {oid}, not a file: check that the repository is "
                             "complete (a shallow or partial clone may lack it)")
        size = int(header[2])
        yield data[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1


def export(root: Path, commit: str, paths: list[str], dest: Path, ref: str) -> None:
    """The files under `paths` at `commit` into `dest`, byte for byte: regular files only (a link,
    a submodule or an unsafe path is refused, nothing outside `dest` is written)."""
    listed = entries(root, commit, paths)
    for entry in listed:
        if entry.mode not in REGULAR:
            raise refused(ref, f"{KINDS.get(entry.mode, 'a special file')} among the inputs ({entry.path})")
    targets = [_target(dest, entry.path, ref) for entry in listed]
    for entry, target, content in zip(listed, targets, _batch(root, [e.oid for e in listed],
                                                              [f"{ref}:{e.path}" for e in listed]), strict=True):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        except (FileExistsError, IsADirectoryError, NotADirectoryError):  # one name as a file and a folder
            raise refused(ref, f"a path it cannot write safely ({entry.path})") from None


def _target(dest: Path, path: str, ref: str) -> Path:
    parts = PurePosixPath(path).parts
    if PurePosixPath(path).is_absolute() or any(p in ("", ".", "..", ".git") for p in parts):
        raise refused(ref, f"a path outside the repository ({path})")
    return dest.joinpath(*parts)


def refused(ref: str, what: str) -> UsageError:
    """The error for a ref whose inputs fleetgen will not write out."""
    return UsageError(f"{ref} holds {what}; fleetgen does not follow links or write outside its temporary "
                      "folder: compare with a ref without them")


def main(argv: list[str]) -> int:
    """`python -m generator.diff.gitblobs COMMIT DEST PATH...`: the preview workflow's export of a
    pull request's inputs (.github/scripts/preview-diff.sh), run in the repository's top folder."""
    if len(argv) < 2:
        print("usage: python -m generator.diff.gitblobs COMMIT DEST [PATH...]", file=sys.stderr)
        return 2
    commit, dest, paths = argv[0], Path(argv[1]), argv[2:]
    try:
        export(Path.cwd(), commit, paths, dest, commit)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
