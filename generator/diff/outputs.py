"""Where `fleetgen diff --output-dir` puts its files: comment parts, the full diff and the JSON report.

The folder may be the pull request's own checkout (hostile until checked): inside the repository
no part of its path may be a link, and every file is replaced by rename, never written through one.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from generator import repofiles
from generator.diff.comment import Stamp, error_comment
from generator.diff.report import DiffResult, full_text
from generator.terminal import safe_text


def now() -> str:
    """UTC now to the minute, or SOURCE_DATE_EPOCH's time (reproducible output, as in reproducible builds)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else datetime.now(UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def output_dir(root: Path, given: str) -> Path:
    """The folder for diff's files: inside the repository no part of it may be a link; outside it,
    the folder the user named. Files in it are replaced by rename, never written through a link."""
    folder = Path(os.path.abspath(given))
    if folder == root or root in folder.parents:
        folder = repofiles.inside(root, folder.relative_to(root).as_posix())
    elif os.path.islink(folder):
        raise repofiles.UnsafePath(given, repofiles.LINK_REASON, "name the real folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_outputs(out: Path, parts: list[str], files: dict[str, str]) -> None:
    """comment-N.md parts (the old ones removed first) and the other files, each replaced by rename."""
    for old in out.glob("comment-*.md"):
        old.unlink()  # a link is removed itself, never what it points to
    for name in ("diff.txt", "diff.json"):  # a stale report never sits beside an error comment;
        if (out / name).is_file() and not (out / name).is_symlink():  # a planted link is refused below
            (out / name).unlink()
    named = {f"comment-{i}.md": part for i, part in enumerate(parts, 1)} | files
    for name, text in named.items():
        repofiles.write_bytes(out, name, safe_text(text).encode())


def write_report(out: Path, result: DiffResult, parts: list[str], report_json: str) -> None:
    """A diff that ran: its comment parts, the complete diff.txt and diff.json."""
    write_outputs(out, parts, {"diff.txt": full_text(result), "diff.json": report_json})


def write_failure(out: Path, failure: str, stamp: Stamp, budget: int) -> None:
    """A diff that could not run (the fleet does not load, ...): comment-1.md says why, and no stale
    report is left beside it."""
    write_outputs(out, [error_comment(failure, stamp, budget)], {})
