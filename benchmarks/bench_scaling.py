"""Scaling benchmark: how render time grows with the teams of one pool and with the clusters.

Each size is rendered in its own fresh process (`render --full`: load, check, compile, validate,
emit, write), timed inside it, so start-up is not counted and nothing is cached between sizes.
The growth exponent is the least-squares slope of log(seconds) against log(size): 1.0 is
linear, 2.0 quadratic; the sweep renders in one process (`jobs=1`), so the exponent is the
algorithm's, not the cores'. It fails (exit 1) above MAX_EXPONENT. The 10,000-team pool is then
rendered again as `fleetgen render` does (`--jobs auto`: its objects' text is written on every
core), which is what the 30 s target is about.

    python benchmarks/bench_scaling.py              # teams 250 to 10,000; clusters 5 to 100
    python benchmarks/bench_scaling.py --quick      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import one_pool, synthesize  # noqa: E402
from table import print_table, scratch  # noqa: E402

MAX_EXPONENT = 1.15
TEAMS = (250, 500, 1000, 2500, 5000, 10_000)
CLUSTERS = (5, 10, 25, 50, 100)
TEAMS_PER_CLUSTER = 20
TEN_THOUSAND_BOUND_S = 30.0
"""Issue 33: 10,000 teams in one pool render in under 30 s."""

TIMED = """
import json, sys, time
from pathlib import Path
from generator import render
root = Path(sys.argv[1])
start = time.perf_counter()
result = render.build(root, jobs=int(sys.argv[2]))
render.write(result)
print(json.dumps({"seconds": time.perf_counter() - start, "objects": render.object_count(result)}))
"""


def timed_render(root: Path, jobs: int = 1) -> tuple[float, int]:
    """Seconds and objects of one full render of `root` (`jobs` as render's --jobs, 0: auto),
    measured inside a fresh process."""
    shutil.rmtree(root / "rendered", ignore_errors=True)
    shutil.rmtree(root / ".fleetgen", ignore_errors=True)
    proc = subprocess.run([sys.executable, "-c", TIMED, str(root), str(jobs)], capture_output=True, text=True,
                          check=False,
                          cwd=Path(__file__).resolve().parent.parent)
    if proc.returncode != 0:
        raise SystemExit(f"render of {root} failed:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(out["seconds"]), int(out["objects"])


def ten_thousand(tmp: Path) -> float:
    """Seconds of the 10,000-team pool (left by the sweep) rendered as `fleetgen render` does."""
    return timed_render(tmp / "teams-10000", jobs=0)[0]


def exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(seconds) on log(size)."""
    xs, ys = [math.log(n) for n, _ in points], [math.log(s) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def sweep(tmp: Path, sizes: tuple[int, ...], make: str) -> tuple[list[tuple[int, float]], list[str]]:
    points, lines = [], []
    for size in sizes:
        root = tmp / f"{make}-{size}"
        if make == "teams":
            one_pool(root, size)
        else:
            synthesize(root, size, TEAMS_PER_CLUSTER)
        seconds, objects = timed_render(root)
        points.append((size, seconds))
        lines.append(f"{size:>6} {make}: {seconds:7.2f} s, {objects} objects, {seconds / objects * 1e6:.0f} us/object")
    return points, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run (exponent not judged)")
    args = parser.parse_args()
    teams, clusters = ((100, 200, 400), (2, 4, 8)) if args.quick else (TEAMS, CLUSTERS)
    rows: list[tuple[str, str]] = []
    failed = []
    with scratch("fleetgen-bench-scaling-") as tmp:
        for make, sizes, what in (("teams", teams, "teams in one pool (1 cluster)"),
                                  ("clusters", clusters, f"clusters ({TEAMS_PER_CLUSTER} teams each, 2 pools)")):
            points, lines = sweep(Path(tmp), sizes, make)
            slope = exponent(points)
            judged = not args.quick
            verdict = "" if not judged else (" (target <= 1.15)" if slope <= MAX_EXPONENT else " ABOVE 1.15")
            if judged and slope > MAX_EXPONENT:
                failed.append(what)
            rows += [(what, line) for line in lines]
            rows.append((f"growth exponent: {what}", f"{slope:.2f}{verdict}"))
            if make == "teams" and sizes[-1] == 10_000:
                ten = ten_thousand(Path(tmp))
                rows.append(("10,000 teams in one pool, --jobs auto",
                             f"{ten:.2f} s (target < {TEN_THOUSAND_BOUND_S:.0f} s)"))
    print_table(rows)
    if failed:
        raise SystemExit(f"growth above {MAX_EXPONENT}: {', '.join(failed)}")


if __name__ == "__main__":
    main()
