"""`fleetgen diff` as the tests read it: its JSON report (checked against schemas/diff.schema.json), its
Markdown pages, and whether a page's collapsible sections are balanced outside its code blocks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema_rs

from tests.conftest import REPO, run

SCHEMA = json.loads((REPO / "schemas" / "diff.schema.json").read_text())


def diff_json(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """`fleetgen diff --format json` in `root`: its exit code (0 or 1) and its report, valid for SCHEMA."""
    result = run(root, "diff", "--format", "json", *args)
    assert result.code in (0, 1), result.err
    report = json.loads(result.out)
    errors = [e.message for e in jsonschema_rs.validator_for(SCHEMA).iter_errors(report)]
    assert not errors, errors
    return result.code, report


def markdown(root: Path, *args: str) -> list[str]:
    """`fleetgen diff --format markdown` in `root`: its pages (one comment each)."""
    result = run(root, "diff", "--format", "markdown", *args)
    assert result.code in (0, 1), result.err
    return result.out.split("\n\n---\n\n")


def outside_code(text: str) -> str:
    """The Markdown outside fenced code blocks (a fence closes only with a run at least as long)."""
    out, fence = [], ""
    for line in text.splitlines():
        run_ = re.match(r"^(`{3,})", line)
        if fence:
            if run_ and len(run_.group(1)) >= len(fence) and line.strip("`") == "":
                fence = ""
            continue
        if run_:
            fence = run_.group(1)
            continue
        out.append(line)
    return "\n".join(out)


def balanced(text: str) -> bool:
    """Every <details> outside code blocks is closed, and none is closed before it opens."""
    depth = 0
    for tag in re.findall(r"</?details>", outside_code(text)):
        depth += 1 if tag == "<details>" else -1
        if depth < 0:
            return False
    return depth == 0
