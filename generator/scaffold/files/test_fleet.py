"""This fleet's own checks: rendered/ is exactly what teams/ and clusters/ compile to, and passes every
check fleetgen has, kubeconform -strict included, and schemas/ is the pinned release's. Written by
`fleetgen init`; CI runs it (tests/run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def fleetgen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "generator", "--root", str(ROOT), *args], capture_output=True,
                          text=True, timeout=600)


def test_rendered_tree_is_current() -> None:
    result = fleetgen("render", "--check")
    assert result.returncode == 0, f"run `./fleetgen render` and commit rendered/:\n{result.stdout}{result.stderr}"


def test_every_object_passes_every_check() -> None:
    if shutil.which("kubeconform") is None:
        message = "kubeconform is not on PATH (tests/run builds it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    result = fleetgen("validate")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_editor_schemas_are_the_pinned_releases() -> None:
    """schemas/ (what editors check teams/ and clusters/ against) follows the fleetgen fleetgen.txt pins."""
    result = fleetgen("schema", "--check")
    assert result.returncode == 0, f"run `./fleetgen schema --write`, commit schemas/:\n{result.stdout}{result.stderr}"
