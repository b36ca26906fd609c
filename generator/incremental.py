"""Skip a render when nothing can have changed: the no-op fast path.

A full render of a large fleet takes tens of seconds; most renders in CI and pre-commit change
nothing. After each successful render fleetgen records, outside the repository (in the cache
folder, keyed by the fleet's path), a hash of every input file and of the generator's own
source, plus a hash of the content of every rendered file (not sizes and mtimes: a same-size
edit with its mtime put back must not survive). The next plain `render` with the same inputs,
the same generator and an untouched tree stops after reading and hashing the tree. `--check`,
`--cluster` and a missing or different record always do the full work; nothing is committed,
so output stays byte-identical everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from generator import repofiles
from generator.validate.schemas import cache_dir

INPUTS = ("teams", "clusters")
EXTRA_INPUTS = ("fleet.yaml",)


def _hash_files(paths: list[Path], base: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        rel = path.relative_to(base).as_posix()
        digest.update(rel.encode())
        digest.update(b"\0")
        digest.update(repofiles.read_bytes(base, rel))
        digest.update(b"\0")
    return digest.hexdigest()


def inputs_key(root: Path, options: str) -> str:
    """Hash of the inputs, the generator's code and data, and the render options; "" when an input
    cannot be read (a link, a permission): no fast path, and the loader reports it with its file."""
    try:
        files = [root / folder / rel for folder in INPUTS for rel in repofiles.files_under(root, folder)
                 if "/" not in rel and rel.endswith((".yaml", ".yml"))]
        files += [root / name for name in EXTRA_INPUTS if repofiles.inside(root, name).is_file()]
        inputs = _hash_files(files, root)
    except (OSError, repofiles.UnsafePath):
        return ""
    return hashlib.sha256("|".join([inputs, code_key(), options]).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def code_key() -> str:
    """Hash of the generator's own code and data (once per process: the code cannot change under it)."""
    package = Path(__file__).resolve().parent
    return _hash_files([p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".j2") and p.is_file()],
                       package)


def cluster_key(root: Path, cluster_file: str, input_files: list[str], options: str) -> str:
    """Hash of everything one cluster's output depends on: its file, its teams' files (and a
    MultiKueue manager's or worker's linked cluster files), code, options."""
    files = [root / cluster_file, *(root / t for t in sorted(input_files))]
    return hashlib.sha256("|".join([_hash_files(files, root), code_key(), options]).encode()).hexdigest()


CODEOWNERS = ".github/CODEOWNERS"


def digest(tree: dict[str, bytes]) -> str:
    """Hash of the paths and contents of a tree of files."""
    total = hashlib.sha256()
    for rel, content in sorted(tree.items()):
        total.update(hashlib.sha256(rel.encode() + b"\0" + content).digest())
    return total.hexdigest()


def _on_disk(root: Path, top: str = "") -> dict[str, bytes] | None:
    """rendered/ (or rendered/<top>) as it is now, plus CODEOWNERS for the whole; None if unreadable."""
    from generator import emit

    try:
        tree = emit.read_tree(repofiles.inside(root, emit.RENDERED), [top] if top else None)
        if not top and repofiles.inside(root, CODEOWNERS).is_file():
            tree[f"../{CODEOWNERS}"] = repofiles.read_bytes(root, CODEOWNERS)
    except (OSError, repofiles.UnsafePath):
        return None  # unreadable: never equal to a record, so the full render runs and reports it
    return tree


def _record_path(root: Path) -> Path:
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "renders" / f"{name}.json"


def _clusters_path(root: Path) -> Path:
    return _record_path(root).with_suffix(".clusters.json")


def reusable(root: Path, name: str, key: str) -> tuple[int, dict[str, bytes]] | None:
    """(object count, files) of cluster `name` if its rendered files are still exactly what `key`
    produced; the files are returned so that they are read once."""
    try:
        record = json.loads(_clusters_path(root).read_text(encoding="utf-8")).get(name) or {}
    except (OSError, ValueError):
        return None
    if record.get("key") != key or not record.get("tree"):
        return None
    files = _on_disk(root, name)
    if files is None or digest(files) != record["tree"]:
        return None
    return int(record.get("objects", 0)), files


def _write_record(path: Path, data: object) -> None:
    """Write a record atomically, best effort: a read-only cache only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def remember_clusters(root: Path, keys: dict[str, tuple[str, int]], tree: dict[str, bytes]) -> None:
    """Record each cluster's key, object count and content hash after a successful write; the hash
    is taken from `tree`, the files just written (disk now holds exactly those)."""
    by_cluster: dict[str, dict[str, bytes]] = {}
    for rel, content in tree.items():
        by_cluster.setdefault(rel.split("/", 1)[0], {})[rel] = content
    _write_record(_clusters_path(root), {name: {"key": key, "objects": count,
                                                "tree": digest(by_cluster.get(name, {}))}
                                         for name, (key, count) in sorted(keys.items())})


def up_to_date(root: Path, key: str) -> bool:
    """True when the last render recorded this key and the tree's content is exactly as it left it."""
    try:
        record = json.loads(_record_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not key or record.get("key") != key or not record.get("tree"):
        return False
    files = _on_disk(root)
    return files is not None and digest(files) == record["tree"]


def remember(root: Path, key: str, tree: dict[str, bytes]) -> None:
    """Record a successful render (`tree`: the files just written) for the whole-fleet no-op check."""
    files = dict(tree)
    try:
        if repofiles.inside(root, CODEOWNERS).is_file():
            files[f"../{CODEOWNERS}"] = repofiles.read_bytes(root, CODEOWNERS)
    except (OSError, repofiles.UnsafePath):
        return
    _write_record(_record_path(root), {"key": key, "tree": digest(files)})
