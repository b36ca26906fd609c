"""The example fleet as content: what `fleetgen init` may replace without `--force`.

A copy of this repository is the untouched example when its hand-written inputs (teams/, clusters/,
fleet.yaml and CODEOWNERS) are byte for byte the example's, whatever its owners say: a fleet of
one's own that kept the example's owners, or a copy whose teams were edited before init, is not.
The example's inputs are recorded as SHA-256 digests in `files/example.sha256`, a file of the
package, with the names of fleetgen's own tests and benchmarks (init moves those aside too): a file
of one's own there is found as well. `python -m generator.scaffold.example --write` records them
again after the example changes or a test file is added (a test fails until it does). Line endings
are compared as LF, so a checkout with CRLF ones (git's autocrlf) is still the example.
"""

from __future__ import annotations

import hashlib
import os
import sys
from importlib import resources
from pathlib import Path

from generator import repofiles
from generator.config.repo import FLEET_FILE

INPUT_FOLDERS = ("teams", "clusters")
INPUT_FILES = (FLEET_FILE, ".github/CODEOWNERS")
LISTED_FOLDERS = ("tests", "benchmarks", "docs", "images")
"""fleetgen's own development files and manual, which init also moves aside: known by name only (they change
with every commit of fleetgen), so a file of one's own among them is found, an edited one of fleetgen's not
(init's own check finds those where the copy is a git checkout: changes not committed)."""
KEPT_TESTS = ("upstream",)
"""What of tests/ a fleet keeps: the pinned tool builds its workflows use (kubeconform)."""
KEPT = tuple(f"tests/{kept}" for kept in KEPT_TESTS)
"""What init keeps of LISTED_FOLDERS, so no concern of the record."""
UNTOUCHED = frozenset({".git", ".venv", ".tools", "fleetgen.egg-info", "node_modules", "__pycache__", ".pytest_cache",
                       ".mypy_cache", ".ruff_cache", ".hypothesis"})
"""What init neither reads nor writes, so a link there is no concern of its: git's own folder and
the environments and caches git ignores (a virtual environment and node_modules/.bin are made of
links; tests/run installs the latter under tests/)."""
RECORD = "example.sha256"
"""Under generator/scaffold/files/: one `<sha256>  <path>` line per input of the example and one
`-  <path>` line per file of LISTED_FOLDERS, sorted by path."""
NAME_ONLY = "-"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def input_paths(root: Path) -> list[str]:
    """Every hand-written input of the fleet at `root` (relative, POSIX), sorted."""
    paths = [f"{folder}/{rel}" for folder in INPUT_FOLDERS if repofiles.lexists(root, folder)
             for rel in repofiles.files_under(root, folder)]
    return sorted(paths + [rel for rel in INPUT_FILES if repofiles.lexists(root, rel)])


def fingerprint(root: Path) -> dict[str, str]:
    """Every hand-written input of the fleet at `root`: its path and digest."""
    return {rel: _digest(repofiles.read_bytes(root, rel)) for rel in input_paths(root)}


def current(root: Path) -> dict[str, str]:
    """What the record holds for the fleet at `root`: its inputs' digests and the listed folders' names."""
    return {**fingerprint(root), **listed(root)}


def listed(root: Path) -> dict[str, str]:
    """The files of LISTED_FOLDERS at `root` (less KEPT and UNTOUCHED), each with NAME_ONLY."""
    out = {}
    for folder in LISTED_FOLDERS:
        top = root / folder
        for dirpath, dirs, names in os.walk(top):  # links were refused before init gets here
            here = Path(dirpath).relative_to(root).as_posix()
            dirs[:] = sorted(d for d in dirs if d not in UNTOUCHED and f"{here}/{d}" not in KEPT)
            out.update({f"{here}/{name}": NAME_ONLY for name in names})
    return out


def record_text(digests: dict[str, str]) -> str:
    return "".join(f"{digest}  {rel}\n" for rel, digest in sorted(digests.items()))


def recorded() -> dict[str, str]:
    """The example's inputs as this fleetgen release shipped them."""
    text = resources.files("generator.scaffold").joinpath("files", RECORD).read_text(encoding="utf-8")
    return {rel: digest for digest, rel in (line.split("  ", 1) for line in text.splitlines())}


def departures(root: Path) -> list[str]:
    """How the inputs at `root` differ from the example's, one `<path> (<how>)` each: files of its own
    first, then the example's changed, then those removed (each sorted); none: the untouched example."""
    have, example = current(root), recorded()
    own = [f"{rel} (not the example's)" for rel in sorted(have.keys() - example.keys())]
    changed = [f"{rel} (changed)" for rel in sorted(have.keys() & example.keys()) if have[rel] != example[rel]]
    removed = [f"{rel} (the example's, removed)" for rel in sorted(example.keys() - have.keys())
               if example[rel] != NAME_ONLY]  # fleetgen's own files gone: nothing of the user's is lost
    return own + changed + removed  # what would be lost first


def main(argv: list[str]) -> int:
    """`--write` records this checkout's inputs as the example's; `--check` exits 1 when the record is stale."""
    root = Path(__file__).resolve().parents[2]
    target = Path(__file__).resolve().parent / "files" / RECORD
    text = record_text(current(root))
    if argv == ["--write"]:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target.relative_to(root).as_posix()}")
        return 0
    if argv == ["--check"]:
        if target.read_text(encoding="utf-8") != text:
            print("the example's inputs changed: run python -m generator.scaffold.example --write")
            return 1
        return 0
    print("usage: python -m generator.scaffold.example --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
