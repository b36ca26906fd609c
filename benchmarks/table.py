"""The result table every benchmark prints."""

from __future__ import annotations

import os
import tempfile


def print_table(rows: list[tuple[str, str]]) -> None:
    """Two left-aligned columns."""
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")


def scratch(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for a benchmark's fleets: in memory (/dev/shm) where there is one, so that
    fleetgen and its floors are timed on the CPU, not on a shared disk's queue (100,000+ small
    files); FLEETGEN_BENCH_DIR picks another place."""
    chosen = os.environ.get("FLEETGEN_BENCH_DIR")
    if chosen is None and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        chosen = "/dev/shm"
    return tempfile.TemporaryDirectory(prefix=prefix, dir=chosen)
