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
_HOST = r"[A-Za-z0-9._~%+-]+(?::[0-9]{1,5})?"
_GIT = re.compile(r"fleetgen @ git\+(?P<source>(?:(?:https|git|file)://" + _HOST + r"|ssh://(?:git@)?" + _HOST
                  + r")/[A-Za-z0-9._~:/%+-]+)@(?P<ref>[A-Za-z0-9._/-]{1,100})")
"""A host with no user (a token in a committed file would be everyone's; ssh's `git@` alone), then a path,
then `@ref`: the split pip makes (the ref after the path's last `@`), so the source read here is the one pip
fetches. The launcher (`./fleetgen`) and the images workflow hold the same pattern."""
_INDEX = re.compile(r"fleetgen==(?P<ref>[0-9]{1,9}(?:\.[0-9]{1,9}){1,3})")
INDEX = "the package index"
LONGEST = 500


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
    """The pin a file's text holds; anything but exactly one line of the two forms is located. Lines end at
    LF (a CR before it is dropped), as the launcher's grep reads them; any other control character is refused."""
    lines = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.removesuffix("\r").strip(" \t")
        if line and not line.startswith("#"):
            lines.append((number, line))
    if len(lines) != 1:
        where = lines[1][0] if len(lines) > 1 else None
        raise InputError([Finding(shown, where, "", f"holds {len(lines)} requirement lines; it must hold exactly "
                                  "one: the fleetgen this fleet runs", f"keep one line: {FORMS}")])
    number, line = lines[0]
    if len(line) <= LONGEST and (match := _GIT.fullmatch(line)) is not None:
        return Pin(line, match["source"], match["ref"])
    if len(line) <= LONGEST and (match := _INDEX.fullmatch(line)) is not None:
        return Pin(line, INDEX, match["ref"])
    raise InputError([Finding(shown, number, "", f"{line[:120]!r} is not a fleetgen release pip may install here "
                              "(no options, no other package, no user or token in the URL)", f"write {FORMS}")])


def read(root: Path, shown: str = PIN_FILE) -> Pin | None:
    """The pin of the fleet at `root`, or None where it has none (this repository: generator/ is here);
    errors name the file as `shown` (`main:fleetgen.txt` for a diff's base)."""
    if not repofiles.lexists(root, PIN_FILE):
        return None
    data = repofiles.read_bytes(root, PIN_FILE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError([Finding(shown, None, "", "is not UTF-8 text", f"write {FORMS}")]) from None
    return parse(text, shown)


def text(requirement: str, how: str) -> str:
    """The file's whole text: why it is there, how to move it, then the line."""
    return (f"# The fleetgen this fleet runs ({how}). `./fleetgen` installs exactly this into .venv; to take\n"
            "# another release, change this line, run `./fleetgen render` and open a pull request: its preview\n"
            "# names the move and shows what the new release changes (docs/operations/upgrade-fleetgen.md).\n"
            f"{requirement}\n")


def git_requirement(source: str, ref: str) -> str:
    """The requirement line of `ref` in the git repository at `source`, checked like a read one. A local
    path or file URL gets the host pip's parser wants (`file://localhost/...`), scp-style `git@host:path`
    becomes ssh://, and a user or token in an https URL is left out (git's credential helper has it)."""
    if source.startswith("/"):
        source = "file://localhost" + source
    elif source.startswith("file:///"):
        source = "file://localhost/" + source.removeprefix("file:///")
    elif (scp := re.fullmatch(r"git@([A-Za-z0-9._-]+):(?!/)(.+)", source)) is not None:
        source = f"ssh://git@{scp[1]}/{scp[2]}"
    elif (auth := re.fullmatch(r"(https|git)://[^/@]*@(.+)", source)) is not None:
        source = f"{auth[1]}://{auth[2]}"
    line = f"fleetgen @ git+{source}@{ref}"
    parse(line, "--fleetgen-from")
    return line
