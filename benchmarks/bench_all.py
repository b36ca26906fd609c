"""Every speed target in one table, each against a floor measured in the same run.

    python benchmarks/bench_all.py                         # 50 clusters x 200 teams (minutes)
    python benchmarks/bench_all.py --quick                 # 3 x 10, the smoke run CI does

| measure                  | floor                                         | target       |
| full render              | libyaml's C dumper writing the same objects   | <= 2x        |
| no-op re-render          | the full render                               | <= 10%       |
| render --check           | the full render                               | (reported)   |
| validate                 | kubeconform -strict on the same tree (built)  | <= 1x        |
| diff, 1% changed         | libyaml's C loader reading both trees         | (reported)   |
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_diff import load_floor  # noqa: E402
from bench_render import floor as dump_floor  # noqa: E402
from synth import synthesize  # noqa: E402
from table import print_table  # noqa: E402

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


def fleetgen(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(root), *args], capture_output=True,
                          text=True, check=False, env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fleetgen {' '.join(args)} failed:\n{proc.stderr}")
    return elapsed, proc.returncode


def kubeconform_binary() -> str | None:
    """The pinned build (tests/upstream/tools.py) if built, else kubeconform on PATH."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.upstream import tools

    built = tools.binary("kubeconform")
    return str(built) if built.is_file() else shutil.which("kubeconform")


def kubeconform_tree(binary: str, root: Path, schemas: Path) -> tuple[float, dict[str, int]]:
    """Seconds for kubeconform -strict over every rendered cluster (each at its Kubernetes version,
    offline, with the arguments `fleetgen validate` uses) and the summed summary."""
    import json

    import yaml

    from generator.validate.kubeconform import kubeconform_args

    runs = []
    for cluster in sorted((root / "clusters").glob("*.yaml")):
        version = str(yaml.safe_load(cluster.read_text())["kubernetesVersion"])
        runs.append(([*kubeconform_args(binary, version, str(schemas)), "-summary"], root / "rendered" / cluster.stem))
    total = {"valid": 0, "invalid": 0, "errors": 0, "skipped": 0}
    elapsed = 0.0
    for args, folder in runs:  # arguments (and the offline schema copy) prepared before the clock starts
        start = time.perf_counter()
        proc = subprocess.run([*args, str(folder)], capture_output=True, text=True, check=False)
        elapsed += time.perf_counter() - start
        for key, value in json.loads(proc.stdout)["summary"].items():
            total[key] += int(value)
    return elapsed, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--pools", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 clusters x 10 teams: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.clusters, args.teams = 3, 10
    rows: list[tuple[str, str]] = [("fleet", f"{args.clusters} clusters x {args.teams} teams x {args.pools} pools")]
    with tempfile.TemporaryDirectory(prefix="fleetgen-bench-all-") as tmp:
        cache = {"FLEETGEN_CACHE_DIR": str(Path(tmp) / "cache")}
        root = synthesize(Path(tmp) / "fleet", args.clusters, args.teams, args.pools)
        floor_s, objects = dump_floor(root, Path(tmp) / "floor")
        full_s, _ = fleetgen(root, "render", env=cache)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        noop_s, _ = fleetgen(root, "render", env=cache)
        check_s, check_code = fleetgen(root, "render", "--check", env=cache)
        rows += [("objects", str(objects)),
                 ("full render / C dumper floor", f"{full_s:.2f} s / {floor_s:.2f} s = {full_s / floor_s:.2f}x "
                                                  f"(target <= 2x)"),
                 ("no-op re-render / full render", f"{noop_s:.2f} s = {noop_s / full_s:.1%} (target <= 10%)"),
                 ("render --check / full render", f"{check_s:.2f} s = {check_s / full_s:.0%} "
                                                 f"({'up to date' if check_code == 0 else 'stale?!'})"),
                 ("peak memory (largest fleetgen process)", f"{peak:.0f} MiB")]
        if (SHARED / "schemas").is_dir() and (SHARED / "crds").is_dir():
            validate_s, _ = fleetgen(root, "validate", "--offline", "--no-kubeconform", "--schema-location",
                                     str(SHARED / "schemas"), "--crd-location", str(SHARED / "crds"), env=cache)
            kubeconform = kubeconform_binary()
            if kubeconform:
                kc_s, summary = kubeconform_tree(kubeconform, root, SHARED / "schemas")
                if summary["valid"] + summary["invalid"] < objects:
                    raise SystemExit(f"kubeconform judged only {summary} of {objects} objects: nothing measured")
                rows.append(("validate / kubeconform -strict", f"{validate_s:.2f} s / {kc_s:.2f} s = "
                                                               f"{validate_s / kc_s:.2f}x (target <= 1x; "
                                                               f"kubeconform: {summary['valid']} valid)"))
            else:
                rows.append(("validate (kubeconform not installed)", f"{validate_s:.2f} s, no floor to compare"))
        else:
            rows.append(("validate", "skipped: ../shared (schemas, CRDs) not beside the checkout"))
        after = synthesize(Path(tmp) / "after", args.clusters, args.teams, args.pools)
        total = objects
        changed = min(args.teams, max(1, round(total * 0.01 / args.clusters)))
        for j in range(changed):
            path = after / "teams" / f"team-{j:04d}.yaml"
            path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))
        fleetgen(after, "render", env=cache)
        load_s, _ = load_floor(root / "rendered", after / "rendered")
        diff_s, _ = fleetgen(root, "diff", "--from", str(root / "rendered"), "--to", str(after / "rendered"),
                             "--format", "json", env=cache)
        rows.append(("diff 1% changed / C loader floor", f"{diff_s:.2f} s / {load_s:.2f} s = {diff_s / load_s:.2f}x"))
    print_table(rows)


if __name__ == "__main__":
    main()
