"""Which fleetgen a fleet runs: the one requirement line in `fleetgen.txt`.

A fleet made by `fleetgen init` carries no copy of the generator. It names a fleetgen release the way
a Python project names a dependency, and `./fleetgen` installs exactly that with pip, so taking a new
fleetgen is a one-line change reviewed like any other, never a merge of fleetgen's tree. This
repository, the example fleet, holds generator/ itself and has no such file.

The file comes with a pull request, so it is hostile until checked: only two forms are accepted, a
git source at a ref (`fleetgen @ git+<URL>@<ref>`) and a release of a package index
(`fleetgen==<version>`); pip options, other packages and a second line are refused. The launcher
(`./fleetgen`) holds the same two forms before it hands the line to pip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from generator import repofiles
from generator.errors import Finding, InputError

PIN_FILE = "fleetgen.txt"
FORMS = "`fleetgen @ git+<URL>@v<version>` (a tag or a commit of a fleetgen repository) or `fleetgen==<version>`"
_GIT = re.compile(r"fleetgen @ git\+(?P<source>(?:https|ssh|git|file)://[A-Za-z0-9._~:/%+@-]{1,400})"
                  r"@(?P<ref>[A-Za-z0-9._/-]{1,100})")
_INDEX = re.compile(r"fleetgen==(?P<ref>[0-9]{1,9}(?:\.[0-9]{1,9}){1,3})")
INDEX = "the package index"


@dataclass(frozen=True)
class Pin:
    """A fleet's fleetgen: the requirement pip installs, where it comes from and which release."""

    requirement: str
    source: str
    """A git URL, or INDEX."""
    ref: str
    """The tag, commit or version pinned."""

    @property
    def label(self) -> str:
        """The release as a reviewer reads it: the tag or version, a commit's first 12 digits."""
        return self.ref[:12] if re.fullmatch(r"[0-9a-f]{40}", self.ref) else self.ref


def parse(text: str, shown: str = PIN_FILE) -> Pin:
    """The pin a file's text holds; anything but exactly one line of the two forms is located."""
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.strip().startswith("#")]
    if len(lines) != 1:
        where = lines[1][0] if len(lines) > 1 else None
        raise InputError([Finding(shown, where, "", f"holds {len(lines)} requirement lines; it must hold exactly "
                                  "one: the fleetgen this fleet runs", f"keep one line: {FORMS}")])
    number, line = lines[0]
    if (match := _GIT.fullmatch(line)) is not None:
        return Pin(line, match["source"], match["ref"])
    if (match := _INDEX.fullmatch(line)) is not None:
        return Pin(line, INDEX, match["ref"])
    raise InputError([Finding(shown, number, "", f"{line[:120]!r} is not a fleetgen release pip may install here "
                              "(no options, no other package)", f"write {FORMS}")])


def read(root: Path) -> Pin | None:
    """The pin of the fleet at `root`, or None where it has none (this repository: generator/ is here)."""
    if not repofiles.lexists(root, PIN_FILE):
        return None
    data = repofiles.read_bytes(root, PIN_FILE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError([Finding(PIN_FILE, None, "", "is not UTF-8 text", f"write {FORMS}")]) from None
    return parse(text)


def text(requirement: str, how: str) -> str:
    """The file's whole text: why it is there, how to move it, then the line."""
    return (f"# The fleetgen this fleet runs ({how}). `./fleetgen` installs exactly this into .venv; to take\n"
            "# another release, change this line, run `./fleetgen render` and open a pull request: its preview\n"
            "# names the move and shows what the new release changes (docs/operations/upgrade-fleetgen.md).\n"
            f"{requirement}\n")


def git_requirement(source: str, ref: str) -> str:
    """The requirement line of `ref` in the git repository at `source`, checked like a read one."""
    if source.startswith("file:///"):  # pip's requirement parser wants a host in a file URL
        source = "file://localhost/" + source.removeprefix("file:///")
    line = f"fleetgen @ git+{source}@{ref}"
    parse(line, "--fleetgen-from")
    return line
