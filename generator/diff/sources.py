"""The two sides of a diff: a git ref and the work tree, or two folders.

A folder with `clusters/` is a fleet repository and is compiled in memory (so the capacity
table has pool sizes); any other folder is taken as an already rendered tree.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from generator import emit
from generator.config.fleet import Fleet
from generator.errors import UsageError

INPUTS = ("teams", "clusters", "fleet.yaml")


@dataclass
class Side:
    """One side of a diff: its rendered tree, and the fleet when it was compiled here."""

    tree: emit.Tree
    fleet: Fleet | None
    label: str


def _git(root: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def compiled(root: Path, label: str) -> Side:
    """Compile the fleet at `root` in memory (no network checks, nothing written)."""
    from generator import render

    if not (root / "clusters").is_dir():
        return Side(emit.read_tree(root), None, label)
    result = render.build(root)
    return Side(result.tree, result.fleet, label)


def at_ref(root: Path, ref: str) -> Side:
    """Compile teams/ and clusters/ as they are at git `ref`, without touching the work tree."""
    top = Path(_git(root, "rev-parse", "--show-toplevel").decode().strip())
    prefix = root.resolve().relative_to(top.resolve()).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    commit = _git(root, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    listed = _git(root, "ls-tree", "--name-only", commit, prefix or ".").decode().split()
    wanted = [name for name in listed if name.removeprefix(prefix) in INPUTS]
    with tempfile.TemporaryDirectory(prefix="fleetgen-base-") as tmp:
        if wanted:
            data = _git(root, "archive", "--format=tar", commit, "--", *wanted)
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                links = [m.name for m in archive.getmembers() if m.issym() or m.islnk()]
                if links:  # the same rule as the work tree: links are refused, never followed
                    raise UsageError(f"{ref} holds symbolic links among the inputs ({', '.join(sorted(links))}); "
                                     "fleetgen does not follow links: compare with a ref without them")
                archive.extractall(tmp, filter="data")
        base_root = Path(tmp) / prefix
        base_root.mkdir(parents=True, exist_ok=True)
        if not (base_root / "clusters").is_dir():  # nothing at that ref yet: everything is new
            return Side({}, None, ref)
        return compiled(base_root, f"{ref} ({commit[:12]})")
