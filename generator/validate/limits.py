"""Limits the API server holds objects to that no schema states: a ConfigMap's data size.

`kube-public/fleetgen-fleet` grows with the fleet (every team file of a cluster), so a large fleet
could render one the API server refuses at sync time; this says so at render time instead.
"""

from __future__ import annotations

from generator.compile.manifest import Manifest
from generator.errors import Finding
from generator.validate.findings import object_finding

CHECK = "limits"
MAX_DATA_BYTES = 1 << 20
"""core.MaxSecretSize, which ValidateConfigMap holds data plus binaryData to (k8s.io/kubernetes
v1.36.3 pkg/apis/core/types.go:6626, pkg/apis/core/validation/validation.go:7890)."""


def validate_limits(manifests: list[Manifest]) -> list[Finding]:
    """A finding for each ConfigMap whose data the API server would refuse as too long."""
    out = []
    for m in manifests:
        if m.kind != "ConfigMap":
            continue
        size = sum(len(k) + len(str(v).encode()) for part in ("data", "binaryData")
                   for k, v in (m.body.get(part) or {}).items())
        if size > MAX_DATA_BYTES:
            out.append(object_finding(m, "data", f"{size} bytes of data; the API server refuses more than "
                                      f"{MAX_DATA_BYTES}", "split the fleet into more clusters, or shorten the "
                                      "team and cluster files published in it", CHECK))
    return out
