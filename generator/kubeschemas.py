"""The Kubernetes releases whose built-in object schemas fleetgen has (the `kubernetes-validate` package):
what a cluster file's `kubernetesVersion` may name, read by the checks and by the validators."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any


def builtin_root() -> Any:
    return resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")


@functools.cache
def builtin_versions() -> tuple[str, ...]:
    """Kubernetes minor versions with built-in schemas, e.g. ('1.25', ..., '1.37')."""
    names = [p.name for p in builtin_root().iterdir() if p.name.endswith("-local-strict")]
    minors = {".".join(n[1:].split(".")[:2]) for n in names}
    return tuple(sorted(minors, key=lambda v: tuple(int(x) for x in v.split("."))))
