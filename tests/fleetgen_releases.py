"""fleetgen releases as a fleet takes them: tags of a git repository that pip installs from
(`fleetgen @ git+file://localhost/<bare>@v<version>`), made here from this checkout, so no test needs
the network for fleetgen itself (pip still takes its dependencies from the package index or its cache)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from generator import __version__
from tests.conftest import checkout_copy


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
                           *args], cwd=root, check=True, capture_output=True, text=True).stdout


def url(bare: Path) -> str:
    """The form pip's requirement parser takes for a local repository (a host in the file URL)."""
    return f"file://localhost{bare.resolve()}"


def publish(source: Path, bare: Path, tag: str) -> None:
    """Commit `source` as it stands and push it to `bare` as release `tag`."""
    git(source, "add", "-A")
    git(source, "commit", "-qm", f"Release {tag}")
    git(source, "tag", tag)
    git(source, "push", "-q", str(bare), "main", tag)


def release_repository(where: Path) -> tuple[Path, Path]:
    """A bare repository holding this checkout as release v<version> (the bare one, and the work tree
    later releases are made in)."""
    source, bare = checkout_copy(where / "source"), where / "fleetgen.git"
    git(source, "init", "-q", "-b", "main")
    bare.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    publish(source, bare, f"v{__version__}")
    return bare, source


def next_version() -> str:
    major, minor, patch = (int(p) for p in __version__.split("."))
    return f"{major}.{minor}.{patch + 1}"


def publish_next(source: Path, bare: Path) -> str:
    """A synthetic next release: fleetgen's version moves (so do the image tags its manifests name) and the
    example fleet changes (a quota of the example team), as a real release's example often does."""
    version = next_version()
    init = source / "generator/__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text()))
    team = source / "teams/ml-research.yaml"
    team.write_text(team.read_text() + "# changed in the example fleet by the next release\n")
    publish(source, bare, f"v{version}")
    return version
