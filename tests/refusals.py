"""A fleet file edited so that `fleetgen render` refuses it: where and what it says, and that it wrote
nothing."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import edit, run, snapshot


def refused_at(fleet_root: Path, file: str, old: str, new: str, where: str, message: str, hint: str | None) -> None:
    """`file` edited from `old` to `new` makes render exit 2 saying `message` at `where`, writing nothing."""
    before = snapshot(fleet_root / "rendered")
    edit(fleet_root, file, old, new)
    result = run(fleet_root, "render")
    assert result.code == 2, result.out
    assert where in result.err and message in result.err, result.err
    assert hint is None or hint in result.err, result.err
    assert snapshot(fleet_root / "rendered") == before
