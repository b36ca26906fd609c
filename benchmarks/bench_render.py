"""Render benchmark: a full `fleetgen render` against libyaml's C dumper writing the same objects.

Both are measured in the same run on the same machine, so the ratio means something anywhere:
  floor  = yaml.dump(obj, Dumper=CSafeDumper) for every compiled object, one file per object,
           into an empty folder (the least any YAML-writing generator must do);
  render = `fleetgen render` in a fresh process into an empty rendered/ (load, compile,
           validate, emit, write, swap).

    python benchmarks/bench_render.py                 # 50 clusters x 200 teams
    python benchmarks/bench_render.py --clusters 5 --teams 20
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import synthesize  # noqa: E402
from table import print_table, scratch  # noqa: E402


def floor(root: Path, out: Path) -> tuple[float, int]:
    """Seconds for the C dumper to write every compiled object to its own file."""
    from generator.checks import load_fleet
    from generator.compile import compile_cluster

    fleet = load_fleet(root)
    objects = [(name, m) for name in sorted(fleet.clusters) for m in compile_cluster(fleet, name)]
    start = time.perf_counter()
    made: set[Path] = set()
    for name, m in objects:
        target = out / name / m.path
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        with open(target, "w") as handle:
            yaml.dump(m.body, handle, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    return time.perf_counter() - start, len(objects)


def render(root: Path, keep: bool = False) -> tuple[float, str]:
    """Seconds for a `fleetgen render` in a fresh process (cold unless `keep`), and its summary line."""
    if not keep:
        shutil.rmtree(root / "rendered", ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(root), "render"],
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"render failed:\n{proc.stderr}")
    return elapsed, proc.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--pools", type=int, default=2)
    args = parser.parse_args()
    with scratch("fleetgen-bench-") as tmp:
        root = synthesize(Path(tmp) / "fleet", args.clusters, args.teams, args.pools)
        floor_s, objects = floor(root, Path(tmp) / "floor")
        render_s, summary = render(root)
        noop_s, noop_summary = render(root, keep=True)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = [("fleet", f"{args.clusters} clusters x {args.teams} teams x {args.pools} pools"),
            ("objects", str(objects)),
            ("floor: C dumper writes the objects", f"{floor_s:.2f} s"),
            ("fleetgen render (cold, fresh process)", f"{render_s:.2f} s"),
            ("ratio render / floor", f"{render_s / floor_s:.2f}x"),
            ("no-op re-render (nothing changed)", f"{noop_s:.2f} s = {noop_s / render_s:.1%} of the full render"),
            ("render peak memory", f"{peak_mb:.0f} MiB"),
            ("render said", summary),
            ("re-render said", noop_summary)]
    print_table(rows)


if __name__ == "__main__":
    main()
