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
    package = Path(__file__).resolve().parent
    code = [p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".j2") and p.is_file()]
    return hashlib.sha256("|".join([_hash_files(files, root), _hash_files(code, package), options]).encode()
                          ).hexdigest()


def _tree_stats(root: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    rendered = root / "rendered"
    for dirpath, _dirs, names in os.walk(rendered):
        for name in names:
            full = os.path.join(dirpath, name)
            st = os.stat(full)
            out[os.path.relpath(full, rendered)] = [st.st_size, st.st_mtime_ns]
    extra = root / ".github" / "CODEOWNERS"
    if extra.is_file():
        st = extra.stat()
        out["../.github/CODEOWNERS"] = [st.st_size, st.st_mtime_ns]
    return out


def _record_path(root: Path) -> Path:
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "renders" / f"{name}.json"


def up_to_date(root: Path, key: str) -> bool:
    """True when the last render recorded this key and the tree is exactly as it left it."""
    try:
        record = json.loads(_record_path(root).read_text())
    except (OSError, ValueError):
        return False
    return bool(record.get("key") == key and record.get("tree") == _tree_stats(root))


def remember(root: Path, key: str) -> None:
    """Record a successful render (best effort: a read-only cache only costs speed)."""
    path = _record_path(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "tree": _tree_stats(root)}))
        os.replace(tmp, path)
    except OSError:
        pass
