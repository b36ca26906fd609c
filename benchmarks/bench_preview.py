"""Pull-request preview benchmark (issue 15): cost in proportion to the change.

    python benchmarks/bench_preview.py                        # 50 clusters x 200 teams (a few minutes)
    python benchmarks/bench_preview.py --clusters 3 --teams 10  # smoke run

Two measures, each against the same floor measured in the same run: reading the changed files
only (git's list of differing rendered files, their bytes on both sides, parsed by libyaml's C
loader), the least any preview must do.

- a one-team quota change: `fleetgen diff --base HEAD --rendered --format markdown` in a fresh
  process (the preview workflow's call); target under 5 s at 50 x 200;
- a change touching every team (50 x 200: 10,000 ClusterQueues): the Markdown comment alone;
  target under 30 s.

The fleet is synthesized (every team has quota in every cluster) and rendered twice, committed
as the base and left in the work tree as the head, which takes most of the run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from synth import synthesize  # noqa: E402
from table import print_table, scratch  # noqa: E402


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=b@example.com", "-c", "user.name=bench", *args],
                          check=True, capture_output=True, text=True).stdout


def render(root: Path) -> None:
    """Render, then let git refresh its index (not timed): a render replaces every file, and git
    would otherwise re-read all of them on the first diff, which a fresh CI checkout never does."""
    from generator import render as pipeline

    pipeline.write(pipeline.build(root))
    if (root / ".git").is_dir():  # exit 1 lists the files that do differ: expected
        subprocess.run(["git", "-C", str(root), "update-index", "-q", "--refresh"], capture_output=True, check=False)


def read_changed_floor(root: Path) -> tuple[float, int]:
    """Seconds to list, read (both sides) and parse only the rendered files that differ from HEAD."""
    start = time.perf_counter()
    paths = [p for p in git(root, "diff", "--name-only", "-z", "HEAD", "--", "rendered/").split("\0") if p]
    request = "".join(f"HEAD:{p}\n" for p in paths).encode()
    blobs = subprocess.run(["git", "-C", str(root), "cat-file", "--batch"], input=request, capture_output=True,
                           check=True).stdout
    for path in paths:
        yaml.load((root / path).read_bytes(), Loader=yaml.CSafeLoader)
    at = 0
    for _ in paths:
        end = blobs.index(b"\n", at)
        size = int(blobs[at:end].split()[2])
        yaml.load(blobs[end + 1:end + 1 + size], Loader=yaml.CSafeLoader)
        at = end + 2 + size
    return time.perf_counter() - start, len(paths)


def change(root: Path, teams: list[Path]) -> None:
    for path in teams:
        path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--teams", type=int, default=200)
    args = parser.parse_args()
    from generator.diff.comment import markdown_parts
    from generator.diff.run import run_diff

    rows: list[tuple[str, str]] = [("fleet", f"{args.clusters} clusters x {args.teams} teams")]
    with scratch("fleetgen-bench-preview-") as tmp:
        root = Path(tmp) / "fleet"
        synthesize(root, args.clusters, args.teams)
        render(root)
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "base")
        team_files = sorted((root / "teams").glob("*.yaml"))

        change(root, team_files[7:8])
        render(root)
        floor_s, files = read_changed_floor(root)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(root), "diff", "--base", "HEAD",
                               "--rendered", "--format", "markdown"], capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        one_s = time.perf_counter() - start
        if proc.returncode != 1:
            raise SystemExit(f"fleetgen diff failed ({proc.returncode}):\n{proc.stderr}")
        rows += [("one team: rendered files that differ", str(files)),
                 ("floor: read and parse only those", f"{floor_s:.2f} s"),
                 ("fleetgen diff --rendered (fresh process)", f"{one_s:.2f} s = {one_s / floor_s:.1f}x floor "
                                                              "(target under 5 s at 50 x 200)")]

        git(root, "checkout", "-q", "--", "teams", "rendered")
        change(root, team_files)
        render(root)
        floor_s, files = read_changed_floor(root)
        result = run_diff(root, committed=True)
        start = time.perf_counter()
        parts = markdown_parts(result)
        md_s = time.perf_counter() - start
        rows += [("every team: objects changed", str(len(result.changes))),
                 ("floor: read and parse the differing files", f"{floor_s:.2f} s ({files} files)"),
                 ("Markdown comment", f"{md_s:.2f} s = {md_s / floor_s:.1f}x floor, {len(parts)} parts "
                                      "(target under 30 s for 10,000 objects)")]
    print_table(rows)


if __name__ == "__main__":
    main()
