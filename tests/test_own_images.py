"""Issue 29: no placeholder reaches a manifest. The repository URL is required, fleetgen's own images come
from the registry each cluster file names, and values on names reserved for examples are refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from generator import __version__
from generator.versions import lock
from tests.conftest import REPO, edit, run

REPO_URL = "  repoUrl: https://github.com/acme/gpu-fleet.git\n"
IMAGES = "images:\n  registry: ghcr.io/acme   # where .github/workflows/images.yml pushes fleetgen's own images\n"


@pytest.mark.parametrize(("old", "new", "expected"), [
    (REPO_URL, "", "clusters/prod-east.yaml:31: gitops.repoUrl: missing required key 'repoUrl'"),
    (REPO_URL, "  repoUrl: https://git.example.com/platform/fleet.git\n",
     "gitops.repoUrl: https://git.example.com/platform/fleet.git is on a name reserved for examples"),
    (REPO_URL, "  repoUrl: git@git.corp.test:platform/fleet.git\n", "is on a name reserved for examples"),
    (IMAGES, "", "images is required: the health reconciler runs fleetgen's own images"),
    (IMAGES, "images: {registry: registry.example/platform}\n",
     "images.registry: registry.example/platform is on a name reserved for examples"),
    (IMAGES, "images: {registry: ghcr.io/Acme}\n", "images.registry"),
    (IMAGES, "images: {registry: ghcr.io/acme, tag: 'sha256:abc'}\n", "images.tag: must be an image tag"),
])
def test_missing_or_placeholder_locations_are_errors(fleet_root: Path, old: str, new: str, expected: str) -> None:
    edit(fleet_root, "clusters/prod-east.yaml", old, new)
    result = run(fleet_root, "render")
    assert result.code == 2 and expected in result.err, result.err
    assert "nothing was written" in result.err


def test_a_missing_gitops_section_says_what_to_add(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/hub.yaml", "gitops:\n  engine: argocd\n" + REPO_URL, "")
    result = run(fleet_root, "render")
    assert result.code == 2 and "clusters/hub.yaml:1: gitops: missing required key 'gitops'" in result.err, result.err


def test_each_own_image_is_pinned_by_its_own_digest(fleet_root: Path) -> None:
    """Issue 52: a digest in `images.tag` pinned both images to one digest, which at most one of them can
    have. Each image now takes its own digest, rendered after its tag (`repo:tag@sha256:...`)."""
    reconciler, collector = "sha256:" + "ab" * 32, "sha256:" + "cd" * 32
    edit(fleet_root, "clusters/prod-west.yaml", IMAGES, "images: {registry: 'registry.corp.net:5000/gpu', tag: v9, "
         f"digests: {{fleetgen: '{reconciler}', fleetgen-otelcol-journald: '{collector}'}}}}\n")
    assert run(fleet_root, "render").code == 0
    rendered = fleet_root / "rendered/prod-west"
    deploy = yaml.safe_load((rendered / "health/deployment-fleetgen-health.yaml").read_text())
    daemonset = yaml.safe_load((rendered / "monitoring/daemonset-fleetgen-kernel-log.yaml").read_text())
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"registry.corp.net:5000/gpu/fleetgen:v9@{reconciler}"
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"registry.corp.net:5000/gpu/fleetgen-otelcol-journald:v9@{collector}"


@pytest.mark.parametrize(("images", "expected"), [
    ("{registry: ghcr.io/acme, tag: 'sha256:" + "ab" * 32 + "'}",
     "images.tag: sha256:abababab... is a digest, and a digest pins one image, not both: write it under "
     "images.digests.<image> (fleetgen, fleetgen-otelcol-journald)"),
    ("{registry: ghcr.io/acme, digests: {fleetgen: 'sha256:abc'}}",
     "images.digests.fleetgen: must be an image digest: 'sha256:' and 64 lower-case hex digits (got 'sha256:abc')"),
    ("{registry: ghcr.io/acme, digests: {fleetgen: 'sha256:" + "AB" * 32 + "'}}",
     "images.digests.fleetgen: must be an image digest"),
    ("{registry: ghcr.io/acme, digests: {fleetgen-health: 'sha256:" + "ab" * 32 + "'}}",
     "images.digests: no image of fleetgen is named 'fleetgen-health': the images are fleetgen, "
     "fleetgen-otelcol-journald"),
])
def test_a_digest_that_cannot_pin_its_image_is_an_error(fleet_root: Path, images: str, expected: str) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", IMAGES, f"images: {images}\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and f"clusters/prod-west.yaml:40: {expected}" in result.err, result.err
    assert "Traceback" not in result.err


def test_the_upstream_collector_runs_by_the_digest_versions_yaml_pins() -> None:
    """prod-east reads the kernel log from a file with the upstream collector image: root on the node,
    so pinned by digest in generator/versions.yaml, not by a tag that can be pushed again."""
    pin = lock()["otel-collector"]
    assert pin.digest.startswith("sha256:") and len(pin.digest) == 71
    daemonset = yaml.safe_load((REPO / "rendered/prod-east/monitoring/daemonset-fleetgen-kernel-log.yaml").read_text())
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"{pin.image}:{pin.version}@{pin.digest}"


def test_nothing_rendered_names_a_placeholder_image_or_repository() -> None:
    for path in (REPO / "rendered").rglob("*.yaml"):
        text = path.read_text()
        assert "example.com" not in text and "<" not in text.partition("image:")[2][:80], path
    lock_text = (REPO / "generator/versions.yaml").read_text()
    assert "acme" not in lock_text  # the project's own images carry no registry: each cluster file names it


def _images_workflow() -> dict:
    return yaml.safe_load((REPO / ".github/workflows/images.yml").read_text())


def test_the_images_workflow_pushes_what_the_manifests_name() -> None:
    flow = _images_workflow()
    job = flow["jobs"]["build"]
    # release tags here; in a fleet made by init, a moved pin (the images of the release it now runs)
    assert set(flow[True]) == {"push", "workflow_dispatch"}
    assert flow[True]["push"] == {"tags": ["v*"], "branches": ["main"], "paths": ["fleetgen.txt"]}
    pins = lock()
    assert {i["name"] for i in job["strategy"]["matrix"]["image"]} == {
        pins["health-reconciler"].image, pins["otel-collector-journald"].image}
    for image in job["strategy"]["matrix"]["image"]:
        assert (REPO / image["file"]).is_file() and (REPO / (image["context"] or ".")).is_dir()
    (build,) = [s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@")]
    assert build["with"]["tags"] == "${{ steps.meta.outputs.registry }}/${{ matrix.image.name }}:" \
                                    "${{ steps.meta.outputs.version }}"
    # Issue 52: the journald image copies the collector from the upstream image pinned by digest, and
    # the run's summary shows each pushed image's digest for `images.digests`.
    assert build["with"]["build-args"].splitlines() == ["OTELCOL_VERSION=${{ steps.meta.outputs.otelcol }}",
                                                   "OTELCOL_DIGEST=${{ steps.meta.outputs.otelcol_digest }}"]
    summary = job["steps"][-1]
    assert summary["env"]["DIGEST"] == f"${{{{ steps.{build['id']}.outputs.digest }}}}"
    assert "GITHUB_STEP_SUMMARY" in summary["run"] and "images.digests.$IMAGE" in summary["run"]


@pytest.mark.parametrize(("ref_type", "ref_name", "registry", "ok"), [
    ("tag", f"v{__version__}", "", True),
    ("tag", "v0.0.0-wrong", "", False),
    ("branch", "main", "registry.corp.net/gpu", True),
])
def test_the_images_workflow_script_checks_the_tag(tmp_path: Path, ref_type: str, ref_name: str, registry: str,
                                                   ok: bool) -> None:
    """The step's own bash, run as the runner runs it: the tag must be fleetgen's version."""
    step = next(s for s in _images_workflow()["jobs"]["build"]["steps"] if s.get("id") == "meta")
    output = tmp_path / "output"
    env = {**os.environ, "REF_TYPE": ref_type, "REF_NAME": ref_name, "IMAGE_REGISTRY": registry, "OWNER": "Acme",
           "GITHUB_OUTPUT": str(output)}
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    if ok:
        values = dict(line.split("=", 1) for line in output.read_text().splitlines())
        assert values["version"] == __version__ and values["otelcol"] == lock()["otel-collector"].version
        assert values["otelcol_digest"] == lock()["otel-collector"].digest
        assert values["registry"] == (registry or "ghcr.io/acme") and values["host"] == values["registry"].split("/")[0]
    else:
        assert "does not match fleetgen's version" in proc.stdout
