"""Grafana's own LogQL grammar (@grafana/lezer-logql, pinned in tests/logql/package-lock.json) run by node
on expressions: where each one fails to parse."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.conftest import REPO

CHECKER = REPO / "tests" / "logql"


def parse_errors(exprs: list[str]) -> list[list[int]]:
    """For each expression, the positions where the grammar finds an error ([] where it parses); skipped
    (with how to install it) without node or the grammar."""
    node = shutil.which("node")
    if node is None or not (CHECKER / "node_modules" / "@grafana" / "lezer-logql").is_dir():
        pytest.skip("LogQL grammar not installed: run `npm ci --prefix tests/logql` (.ci/run does)")
    proc = subprocess.run([node, str(CHECKER / "check.cjs")], input=json.dumps(exprs), capture_output=True,
                          text=True, check=True, cwd=CHECKER, timeout=60)
    return [entry["errors"] for entry in json.loads(proc.stdout)]
