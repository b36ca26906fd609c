"""Cross-file checks: the stage between reading the files and compiling them. A fleet whose files each
parse can still be wrong as a whole (quotas over a pool, a team naming a cluster it has no quota in);
these find that, at file and line, before anything is compiled from it."""

from __future__ import annotations

from pathlib import Path

from generator.checks.fleet import check_fleet
from generator.config.fleet import Fleet, LoadCache, read_fleet
from generator.errors import InputError


def load_fleet(root: Path, cache: LoadCache | None = None) -> Fleet:
    """Read every file of the fleet under `root` and check it as a whole; InputError lists every problem."""
    fleet = read_fleet(root, cache=cache)
    findings = check_fleet(fleet)
    if findings:
        raise InputError(sorted(set(findings)))
    return fleet
