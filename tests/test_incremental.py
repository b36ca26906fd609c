"""The no-op fast path of `render`: taken only when inputs, generator and tree are untouched."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import edit, run, snapshot

FAST = "inputs, generator and tree unchanged since the last render"


def test_second_render_is_a_no_op(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    before = {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered").rglob("*.yaml")}
    again = run(fleet_root, "render")
    assert again.code == 0 and FAST in again.out
    assert {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered").rglob("*.yaml")} == before


def test_any_input_change_does_the_full_work(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    result = run(fleet_root, "render")
    # its ClusterQueue, and its file as dev publishes it
    assert result.code == 0 and FAST not in result.out and "2 changed" in result.out
    assert "nominalQuota: '5'" in (fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml").read_text()


def test_a_hand_edited_tree_is_repaired(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    good = snapshot(fleet_root / "rendered")
    target = fleet_root / "rendered/prod-east/kueue/resourceflavor-h100.yaml"
    target.write_text("edited by hand\n")
    result = run(fleet_root, "render")
    assert result.code == 0 and FAST not in result.out
    assert snapshot(fleet_root / "rendered") == good


def test_check_and_single_cluster_never_take_the_shortcut(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    assert FAST not in run(fleet_root, "render", "--check").out
    assert FAST not in run(fleet_root, "render", "--cluster", "dev").out


def test_a_same_size_edit_with_its_mtime_put_back_is_repaired(fleet_root: Path) -> None:
    """The records hold content hashes: size and mtime alone would let this edit survive (issue 11)."""
    import os

    assert run(fleet_root, "render").code == 0
    path = fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml"
    before, stat = path.read_bytes(), path.stat()
    forged = before.replace(b"nominalQuota: '6'", b"nominalQuota: '9'")
    assert forged != before and len(forged) == len(before)
    path.write_bytes(forged)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = run(fleet_root, "render")
    assert result.code == 0 and "1 changed" in result.out, result.out
    assert path.read_bytes() == before
