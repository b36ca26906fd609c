"""The versions lock: `generator/versions.yaml`, read once."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from importlib import resources

import yaml


@dataclass(frozen=True)
class Component:
    """A pinned upstream chart (https repository or OCI reference) or image."""

    name: str
    version: str = ""
    """The pinned release; empty for this repository's own images, which follow fleetgen's version."""
    chart: str = ""
    repo: str = ""
    image: str = ""
    app: str = ""
    """The application release a chart is told to run, where it is not the chart's own default."""
    digest: str = ""
    """An upstream image's digest (`sha256:...`): the reference becomes `image:version@digest`."""

    @property
    def reference(self) -> str:
        """An upstream image as a node pulls it: `image:version`, and `@digest` where pinned."""
        return f"{self.image}:{self.version}{'@' + self.digest if self.digest else ''}"

    @property
    def is_oci(self) -> bool:
        return self.chart.startswith("oci://")

    @property
    def oci_repository(self) -> str:
        """`oci://registry.k8s.io/kueue/charts/kueue` -> `registry.k8s.io/kueue/charts`."""
        return self.chart.removeprefix("oci://").rpartition("/")[0]

    @property
    def chart_name(self) -> str:
        return self.chart.rpartition("/")[2]

    def mirrored(self, mirror: str | None) -> Component:
        """The same chart and version from a Helm repository that mirrors every pinned chart."""
        return replace(self, chart=self.chart_name, repo=mirror) if mirror and self.chart else self


@functools.lru_cache(maxsize=1)
def lock() -> dict[str, Component]:
    """Every pinned component by name."""
    data = yaml.safe_load(resources.files("generator").joinpath("versions.yaml").read_text(encoding="utf-8"))
    return {name: Component(name=name, **{k: str(v) for k, v in spec.items()}) for name, spec in data.items()}


def component(name: str) -> Component:
    """One pinned component."""
    return lock()[name]


def own_images() -> list[str]:
    """The names of this repository's own images (entries with an image and no version), sorted."""
    return sorted(c.image for c in lock().values() if c.image and not c.version)
