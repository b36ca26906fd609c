"""The README's first command on a fresh checkout, with Debian's externally managed Python first on PATH,
then a diff on that Python (the floor fleetgen claims, 3.11, as Debian 12 ships it: 3.11.2).

The second command is what CI runs (`.ci/run` execs it, and test_cli holds the three equal), so it is
proved by every CI run; this test proves the first where PEP 668 refuses `pip install`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import checkout_copy

pytestmark = pytest.mark.upstream  # installs from the package index: minutes cold, not the fast tier

SYSTEM_PYTHON = Path("/usr/bin/python3")


def _externally_managed() -> bool:
    if not SYSTEM_PYTHON.is_file():
        return False
    stdlib = subprocess.run([str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return (Path(stdlib) / "EXTERNALLY-MANAGED").is_file()


def test_first_command_renders_on_an_externally_managed_system_python(tmp_path: Path) -> None:
    if not _externally_managed():
        message = f"{SYSTEM_PYTHON} is not an externally managed (PEP 668) Python here"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI's machines are Debian and must prove the first command on it")
        pytest.skip(message)
    root = checkout_copy(tmp_path / "checkout")
    env = {"PATH": f"{SYSTEM_PYTHON.parent}:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8"}
    refused = subprocess.run([str(SYSTEM_PYTHON), "-m", "pip", "install", "--dry-run", "pyyaml"], env=env,
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr

    first = subprocess.run(["./fleetgen", "render"], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "rendered/ already up to date" in first.stdout + first.stderr
    assert "installing into" in first.stderr
    base = subprocess.run([str(root / ".venv/bin/python"), "-c", "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert base == "/usr"  # the environment was made from the system Python, not a developer's

    again = subprocess.run(["./fleetgen", "render", "--check"], cwd=root, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0 and "installing" not in again.stderr  # made once, reused

    # A reviewer's next step on the same Python: a change, and the diff against the commit before it
    # (Debian 12's 3.11.2 has no tar extraction filters: this once failed with a TypeError there).
    git_env = {**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@acme.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@acme.com"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=root, env=git_env, check=True, capture_output=True)
    team = root / "teams/speech.yaml"
    team.write_text(team.read_text().replace("l4: {gpus: 6,", "l4: {gpus: 5,"))
    diff = subprocess.run(["./fleetgen", "diff", "--base", "HEAD", "--format", "json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert diff.returncode == 1, diff.stderr[-3000:]
    assert '"rule": "quota-reduced"' in diff.stdout and "speech loses 1 guaranteed l4 GPUs" in diff.stdout
