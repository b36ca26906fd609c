"""Where fleetgen keeps what it may throw away: downloaded schemas, render indexes.

Its own module, with nothing heavy imported, because the no-op render reads its index from here
before the models and compilers are loaded."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache folder (XDG cache, overridable with FLEETGEN_CACHE_DIR)."""
    base = os.environ.get("FLEETGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fleetgen")
    return Path(base)
