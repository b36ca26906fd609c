"""Skip a render when nothing can have changed: the no-op fast path.

A full render of a large fleet takes tens of seconds; most renders in CI and pre-commit change
nothing. After each successful render fleetgen records, outside the repository (in the cache
folder, keyed by the fleet's path), a hash of every input file and of the generator's own
source, plus the size and mtime of every rendered file. The next plain `render` with the same
inputs, the same generator and an untouched tree stops after stat-ing the tree. `--check`,
`--cluster` and a missing or different record always do the full work; nothing is committed,
so output stays byte-identical everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from generator.validate.schemas import cache_dir

INPUTS = ("teams", "clusters")
EXTRA_INPUTS = ("fleet.yaml",)


def _hash_files(paths: list[Path], base: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(base).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def inputs_key(root: Path, options: str) -> str:
    """Hash of the inputs, the generator's code and data, and the render options."""
    files = [p for folder in INPUTS for p in (root / folder).glob("*.y*ml") if p.is_file()]
    files += [root / name for name in EXTRA_INPUTS if (root / name).is_file()]
    return hashlib.sha256("|".join([_hash_files(files, root), code_key(), options]).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def code_key() -> str:
    """Hash of the generator's own code and data (once per process: the code cannot change under it)."""
    package = Path(__file__).resolve().parent
    return _hash_files([p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".j2") and p.is_file()],
                       package)


def cluster_key(root: Path, cluster_file: str, team_files: list[str], options: str) -> str:
    """Hash of everything one cluster's output depends on: its file, its teams' files, code, options."""
    files = [root / cluster_file, *(root / t for t in sorted(team_files))]
    return hashlib.sha256("|".join([_hash_files(files, root), code_key(), options]).encode()).hexdigest()


def _tree_stats(root: Path, top: str = "") -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    rendered = root / "rendered"
    for dirpath, _dirs, names in os.walk(rendered / top if top else rendered):
        for name in names:
            full = os.path.join(dirpath, name)
            st = os.stat(full)
            out[os.path.relpath(full, rendered)] = [st.st_size, st.st_mtime_ns]
    extra = root / ".github" / "CODEOWNERS"
    if not top and extra.is_file():
        st = extra.stat()
        out["../.github/CODEOWNERS"] = [st.st_size, st.st_mtime_ns]
    return out


def _record_path(root: Path) -> Path:
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "renders" / f"{name}.json"


def _clusters_path(root: Path) -> Path:
    return _record_path(root).with_suffix(".clusters.json")


def reusable(root: Path, name: str, key: str) -> int | None:
    """Object count of cluster `name` if its rendered files are still exactly what `key` produced."""
    try:
        record = json.loads(_clusters_path(root).read_text()).get(name) or {}
    except (OSError, ValueError):
        return None
    if record.get("key") != key or record.get("tree") != _tree_stats(root, name):
        return None
    return int(record.get("objects", 0))


def _write_record(path: Path, data: object) -> None:
    """Write a record atomically, best effort: a read-only cache only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass


def remember_clusters(root: Path, keys: dict[str, tuple[str, int]]) -> None:
    """Record each cluster's key, object count and file stats after a successful write."""
    _write_record(_clusters_path(root), {name: {"key": key, "objects": count, "tree": _tree_stats(root, name)}
                                         for name, (key, count) in sorted(keys.items())})


def up_to_date(root: Path, key: str) -> bool:
    """True when the last render recorded this key and the tree is exactly as it left it."""
    try:
        record = json.loads(_record_path(root).read_text())
    except (OSError, ValueError):
        return False
    return bool(record.get("key") == key and record.get("tree") == _tree_stats(root))


def remember(root: Path, key: str) -> None:
    """Record a successful render for the whole-fleet no-op check."""
    _write_record(_record_path(root), {"key": key, "tree": _tree_stats(root)})
