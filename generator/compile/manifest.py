"""The unit every compiler returns: one Kubernetes object, where it goes, and what produced it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator import __version__
from generator.objectlabels import MANAGED_BY as MANAGED_BY  # re-exported: the compilers label through here
from generator.objectlabels import TEAM_LABEL as TEAM_LABEL
from generator.objectlabels import labels as labels
from generator.versions import component

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig

NOT_OBJECT_FILES = ("kustomization.yaml", ".sky.yaml", "skypilot-config.yaml")
"""Rendered files that are not Kubernetes objects (kustomize's index, SkyPilot tasks and config)."""


def is_object_file(name: str) -> bool:
    """Whether a rendered file named `name` holds a Kubernetes object."""
    return not name.endswith(NOT_OBJECT_FILES)


@dataclass(frozen=True)
class Manifest:
    """A Kubernetes object as data, its folder under `rendered/<cluster>/`, and its source.

    `source` is (file, line) of the config entry that produced the object; `origins` refines it
    per field (object path prefix -> (file, line)), so a schema or CEL finding on
    `spec.preemption` points at the cluster file's preemption block, not the team file.
    """

    folder: tuple[str, ...]
    body: dict[str, Any]
    source: tuple[str, int]
    origins: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    synced: bool = True
    """False for templates GitOps must not apply (JobSets, which Kueue mutates): not in any kustomization."""
    file: str | None = None
    """File name, when not the default `<kind>-<name>.yaml`."""
    kubernetes: bool = True
    """False for other YAML documents (SkyPilot tasks): written, never validated as objects."""

    def locate(self, path: str) -> tuple[str, int]:
        """(file, line) of the config that produced the field at `path` (e.g. spec.levels[1])."""
        best, best_len = self.source, -1
        for prefix, where in self.origins.items():
            if (path == prefix or path.startswith((prefix + ".", prefix + "["))) and len(prefix) > best_len:
                best, best_len = where, len(prefix)
        return best

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        return self.body["metadata"].get("namespace")

    @property
    def api_version(self) -> str:
        return str(self.body["apiVersion"])

    @property
    def filename(self) -> str:
        """`<kind>-<name>.yaml`, the kube-prometheus convention of one file per object."""
        return self.file or f"{self.kind.lower()}-{self.name}.yaml"

    @property
    def path(self) -> str:
        """Path relative to `rendered/<cluster>/`."""
        return "/".join(self.folder + (self.filename,))


ARGOCD_CRD_IN_SAME_SYNC = {"argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"}
"""On custom resources whose CRD arrives in the same Argo CD sync (from a chart): without it the
dry run fails on the unknown kind. Copy it (dict(...)) onto each object."""


def own_image(cfg: ClusterConfig, name: str) -> str:
    """This repository's image `name` (a versions.yaml entry) from the cluster's `images`, at fleetgen's
    version unless `images.tag` pins another."""
    assert cfg.images is not None, "the cluster model requires images wherever fleetgen's own images run"
    return cfg.images.reference(component(name).image, __version__)
