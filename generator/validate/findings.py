"""Located findings for problems in compiled objects, traced back to the config line."""

from __future__ import annotations

from generator.compile.manifest import Manifest
from generator.errors import Finding


def object_finding(m: Manifest, path: str, message: str, hint: str, check: str) -> Finding:
    """A finding on `m` at JSON path `path`, located at the config entry that produced `m`."""
    where = f"{m.kind} {m.namespace + '/' if m.namespace else ''}{m.name}"
    file, line = m.locate(path)
    return Finding(file, line, f"{where}: {path}" if path else where, message, hint, check)
