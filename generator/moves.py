"""A switch of whole paths of the repository by a list of renames, which a kill can interrupt anywhere
and the next run takes up again (`fleetgen init` switches its new fleet in with one).

A render's switch (`emit`) replaces folders of `rendered/`; init's replaces `teams/`, `clusters/`,
`tests/`, ... with what it built in its stage (`.fleetgen/init-*/new/`), moving each replaced path
aside into the stage's `previous/`. It is the same transaction: the journal naming the stage, its
token and these moves is written first (the commit point), then the renames are made in order. A
move is (kind, path), the path relative to the repository:

- `aside`: `path` -> `<stage>/previous/path`, done once its target in the stage is there;
- `in`: `<stage>/new/path` -> `path`, and `back`: `<stage>/previous/path` -> `path`, each done once
  its source in the stage is gone.

Whether a move is done is read from the stage, which only fleetgen writes, never from a note the
kill could have cut short. The moves are made in order and undone in reverse, so the done ones are
always the first few: `forward` finishes the list from any point, `back` undoes it from any point.
"""

from __future__ import annotations

from pathlib import Path

from generator import repofiles

Move = tuple[str, str]
"""(kind, path): see the module's docstring."""

KINDS = {"aside": ("", "previous"), "in": ("new", ""), "back": ("previous", "")}
"""Kind -> (the source's folder in the stage, the target's); "" is the repository itself."""
MOVABLE = frozenset({"teams", "clusters", "rendered", "benchmarks", "tests", "tests/upstream", "fleet.yaml",
                     ".github", ".github/CODEOWNERS", "fleetgen.txt", "generator", "docs", "images", "pyproject.toml",
                     "Dockerfile", ".dockerignore", "mkdocs.yml", "CHANGELOG.md", "README.md",
                     ".pre-commit-hooks.yaml"})
"""What a switch may move: the paths `fleetgen init` replaces or keeps (generator/scaffold/init.py)."""


def valid(moves: object) -> list[Move] | None:
    """`moves` as read from a journal (hostile input), or None unless it is a list of [kind, path] pairs
    of the kinds above and the paths MOVABLE."""
    if not isinstance(moves, list):
        return None
    out: list[Move] = []
    for move in moves:
        if not (isinstance(move, list) and len(move) == 2 and move[0] in KINDS and move[1] in MOVABLE):
            return None
        out.append((move[0], move[1]))
    return out


def _ends(stage: str, move: Move) -> tuple[str, str]:
    """(source, target) of a move, relative to the repository; `stage` is the stage's own path."""
    kind, path = move
    source, target = KINDS[kind]
    return f"{stage}/{source}/{path}" if source else path, f"{stage}/{target}/{path}" if target else path


def _done(root: Path, stage: str, move: Move) -> bool:
    source, target = _ends(stage, move)
    return repofiles.lexists(root, target) if move[0] == "aside" else not repofiles.lexists(root, source)


def progress(root: Path, stage: str, moves: list[Move]) -> int:
    """How many of `moves` are done (the first ones, in order)."""
    done = 0
    while done < len(moves) and _done(root, stage, moves[done]):
        done += 1
    return done


def forward(root: Path, stage: str, moves: list[Move]) -> None:
    """Make the moves not yet done, in order; folders inside the stage are made as needed."""
    for move in moves[progress(root, stage, moves):]:
        source, target = _ends(stage, move)
        repofiles.move(root, source, target, create=move[0] == "aside")


def back(root: Path, stage: str, moves: list[Move]) -> None:
    """Undo the moves done, in reverse: the repository as it was before the first."""
    for move in reversed(moves[:progress(root, stage, moves)]):
        source, target = _ends(stage, move)
        repofiles.move(root, target, source)


def holds_files(root: Path, rel: str) -> bool:
    """Whether anything but folders is at or below `root/rel` (a link counts, never followed)."""
    parent, _, name = rel.rpartition("/")
    try:
        with repofiles.Folder.open(root, parent) as folder:
            return folder.holds_files(name)
    except FileNotFoundError:
        return False

