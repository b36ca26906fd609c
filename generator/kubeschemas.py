"""The Kubernetes releases whose built-in object schemas fleetgen has (the `kubernetes-validate` package):
what a cluster file's `kubernetesVersion` may name, read by the checks and by the validators."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path


@functools.cache
def builtin_root() -> Path:
    """The package's schema folder, found without importing the package (its `__init__` loads
    jsonschema, 0.07 s that a render does not need)."""
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the kubernetes-validate package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


@functools.cache
def builtin_versions() -> tuple[str, ...]:
    """Kubernetes minor versions with built-in schemas, e.g. ('1.25', ..., '1.37')."""
    names = [p.name for p in builtin_root().iterdir() if p.name.endswith("-local-strict")]
    minors = {".".join(n[1:].split(".")[:2]) for n in names}
    return tuple(sorted(minors, key=lambda v: tuple(int(x) for x in v.split("."))))
