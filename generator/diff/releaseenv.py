"""The fleetgen release a diff's base pins, installed once per requirement in the cache folder.

A fleet made by `fleetgen init` names its fleetgen in `fleetgen.txt` (`generator/pinfile.py`). When a
change moves that pin, the base must be rendered by the release the base pinned, or the preview
would show nothing of what the new release changes. pip installs that requirement into a virtual
environment of its own under `<cache>/releases/`, kept for the next diff (a second diff against the
same base installs nothing). Two diffs at once take turns (a lock file); a failed install leaves no
environment that looks finished (the stamp is written last), and one whose Python no longer starts
is made again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from generator.cachedir import cache_dir
from generator.pinfile import Pin

INSTALL_TIMEOUT = 900
STAMP = ".fleetgen-installed"


class InstallError(Exception):
    """pip could not install the pinned release (no network, a ref that is not there): one sentence."""


def _run(command: list[str], what: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=INSTALL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InstallError(f"{what}: {error}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
        raise InstallError(f"{what}: {last}")


def _runs(folder: Path) -> bool:
    """Whether the environment's Python still starts (a cache restored on a machine without it does not)."""
    try:
        return subprocess.run([str(folder / "bin" / "python"), "-c", "import generator"], capture_output=True,
                              check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def installed(pin: Pin) -> Path:
    """The `fleetgen` program of `pin`'s release, installed first where the cache has none."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = hashlib.sha256(f"{pin.requirement}\0{python}".encode()).hexdigest()[:16]
    folder = cache_dir() / "releases" / key
    program = folder / "bin" / "fleetgen"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = folder / STAMP
        if program.is_file() and stamp.is_file() and stamp.read_text() == pin.requirement and _runs(folder):
            return program
        shutil.rmtree(folder, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(folder)], "python -m venv failed")
        _run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              pin.requirement], f"pip could not install {pin.requirement}")
        if not os.access(program, os.X_OK):
            raise InstallError(f"{pin.requirement} installed no `fleetgen` program")
        stamp.write_text(pin.requirement)
    return program
