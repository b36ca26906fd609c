"""Diff benchmark: `fleetgen diff` of two rendered fleets (~30,000 objects, 1% changed) against
the time libyaml's C loader takes just to load both trees, measured in the same run.

    python benchmarks/bench_diff.py                       # 20 clusters x 170 teams
    python benchmarks/bench_diff.py --clusters 4 --teams 30
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import synthesize  # noqa: E402
from table import print_table, scratch  # noqa: E402


def render(root: Path) -> None:
    from generator import render as pipeline

    pipeline.write(pipeline.build(root))


def load_floor(*trees: Path) -> tuple[float, int]:
    """Seconds for yaml.load(CSafeLoader) of every file of both trees (the least a diff must do)."""
    start = time.perf_counter()
    count = 0
    for tree in trees:
        for path in tree.rglob("*.yaml"):
            with open(path, "rb") as handle:
                yaml.load(handle, Loader=yaml.CSafeLoader)
            count += 1
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--teams", type=int, default=170)
    parser.add_argument("--changed", type=float, default=0.01, help="share of objects that change")
    args = parser.parse_args()
    from generator.diff.comment import markdown_parts
    from generator.diff.run import run_diff

    with scratch("fleetgen-bench-diff-") as tmp:
        before = synthesize(Path(tmp) / "before", args.clusters, args.teams)
        render(before)
        after = synthesize(Path(tmp) / "after", args.clusters, args.teams)
        total = sum(1 for p in (before / "rendered").rglob("*.yaml") if p.name != "kustomization.yaml")
        # Each team's borrowing limit change rewrites its ClusterQueue in every cluster.
        changed = min(args.teams, max(1, round(total * args.changed / args.clusters)))
        for j in range(changed):
            path = after / "teams" / f"team-{j:04d}.yaml"
            path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))
        render(after)
        floor_s, files = load_floor(before / "rendered", after / "rendered")
        start = time.perf_counter()
        result = run_diff(Path(tmp), from_dir=str(before / "rendered"), to_dir=str(after / "rendered"))
        diff_s = time.perf_counter() - start
        start = time.perf_counter()
        parts = markdown_parts(result)
        md_s = time.perf_counter() - start
    rows = [("fleet", f"{args.clusters} clusters x {args.teams} teams, {changed} teams' borrowing limits changed"),
            ("objects per tree", str(total)),
            ("files read (both trees, with kustomizations)", str(files)),
            ("changed objects", f"{len(result.changes)} ({len(result.changes) / total:.1%})"),
            ("floor: C loader reads both trees", f"{floor_s:.2f} s"),
            ("fleetgen diff (load, match, field diff, risks)", f"{diff_s:.2f} s"),
            ("ratio diff / floor", f"{diff_s / floor_s:.2f}x"),
            ("Markdown report", f"{md_s:.2f} s, {len(parts)} comment(s)")]
    print_table(rows)


if __name__ == "__main__":
    main()
