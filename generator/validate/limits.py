"""Limits the API server holds objects to that no schema states (a ConfigMap's data size), and the
number of published fleet-file parts the job SDK reads.

`kube-public/fleetgen-fleet` grows with the fleet (every team file of a cluster), so a large fleet
could render one the API server refuses at sync time, or more parts than the SDK will read; this
says so at render time instead.
"""

from __future__ import annotations

from generator.compile.manifest import Manifest
from generator.compile.published import MAX_PARTS, NAME, NAMESPACE
from generator.errors import Finding
from generator.validate.findings import object_finding

CHECK = "limits"
MAX_DATA_BYTES = 1 << 20
"""core.MaxSecretSize, which ValidateConfigMap holds data plus binaryData to (k8s.io/kubernetes
v1.36.3 pkg/apis/core/types.go:6626, pkg/apis/core/validation/validation.go:7890)."""


def validate_limits(manifests: list[Manifest]) -> list[Finding]:
    """A finding for each ConfigMap whose data the API server would refuse as too long, and one for
    more parts of published fleet files than the SDK reads."""
    out = []
    published = [m for m in manifests if m.kind == "ConfigMap" and m.body["metadata"].get("namespace") == NAMESPACE
                 and (m.name == NAME or m.name.startswith(f"{NAME}-"))]
    if len(published) > MAX_PARTS:
        out.append(object_finding(published[0], "data", f"the fleet files are published in {len(published)} "
                                  f"ConfigMaps; the job SDK reads at most {MAX_PARTS}", "split the fleet into more "
                                  "clusters, or set tenancy.publishFleet: false in the cluster file", CHECK))
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
