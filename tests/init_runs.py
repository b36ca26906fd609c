"""What the tests run `fleetgen init` with, and how they see what a run left on disk (a refused or killed
run must leave a folder exactly as it was)."""

from __future__ import annotations

import os
from pathlib import Path

INIT_ARGS = ["init", "--owner", "@gpuco/platform", "--repo-url", "https://github.com/gpuco/fleet.git",
             "--registry", "ghcr.io/gpuco", "--cluster", "prod", "--team", "research",
             "--gpu-product", "NVIDIA-H100-80GB-HBM3", "--gpus-per-node", "8", "--nodes", "16",
             "--cpu-per-node", "192", "--memory-per-node", "1800Gi",
             "--fleetgen-from", "https://github.com/gpuco/fleetgen.git"]


def tree_state(base: Path, skip: tuple[str, ...] = ("__pycache__",)) -> dict[str, str | bytes]:
    """Every entry below `base` without following a link: a file's bytes, a link's target, a folder's
    name (so a removed empty folder shows too)."""
    out: dict[str, str | bytes] = {}
    for dirpath, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs + names:
            path = Path(dirpath, name)
            rel = path.relative_to(base).as_posix()
            out[rel] = (f"-> {os.readlink(path)}" if path.is_symlink() else "dir" if path.is_dir()
                        else path.read_bytes())
    return out
