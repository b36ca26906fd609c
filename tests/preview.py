"""Node programs of tests/preview (Mermaid's parser, the comment script under Octokit)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.conftest import REPO

PREVIEW = REPO / "tests" / "preview"


def node() -> str:
    exe = shutil.which("node")
    if exe is None or not (PREVIEW / "node_modules" / "mermaid").is_dir():
        pytest.skip("tests/preview not installed: run `npm ci --prefix tests/preview` (.ci/run does)")
    return exe


def node_check(script: str, payload: Any) -> Any:
    """Run tests/preview/<script> with `payload` as JSON on stdin; its JSON answer."""
    proc = subprocess.run([node(), str(PREVIEW / script)], input=json.dumps(payload), capture_output=True,
                          text=True, check=False, cwd=PREVIEW, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
