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
    (IMAGES, "images: {registry: ghcr.io/acme, tag: 'sha256:abc'}\n", "images.tag"),
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


def test_both_own_images_come_from_the_cluster_registry_and_a_digest_pins_them(fleet_root: Path) -> None:
    digest = "sha256:" + "ab" * 32
    edit(fleet_root, "clusters/prod-west.yaml", IMAGES, f"images: {{registry: 'registry.corp.net:5000/gpu', "
         f"tag: '{digest}'}}\n")
    assert run(fleet_root, "render").code == 0
    rendered = fleet_root / "rendered/prod-west"
    deploy = yaml.safe_load((rendered / "health/deployment-fleetgen-health.yaml").read_text())
    collector = yaml.safe_load((rendered / "monitoring/daemonset-fleetgen-kernel-log.yaml").read_text())
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"registry.corp.net:5000/gpu/fleetgen@{digest}"
    assert collector["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"registry.corp.net:5000/gpu/fleetgen-otelcol-journald@{digest}"


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
    assert set(flow[True]) == {"push", "workflow_dispatch"} and flow[True]["push"] == {"tags": ["v*"]}
    pins = lock()
    assert {i["name"] for i in job["strategy"]["matrix"]["image"]} == {
        pins["health-reconciler"].image, pins["otel-collector-journald"].image}
    for image in job["strategy"]["matrix"]["image"]:
        assert (REPO / image["file"]).is_file() and (REPO / image["context"]).is_dir()
    build = job["steps"][-1]
    assert build["uses"].startswith("docker/build-push-action@")
    assert build["with"]["tags"] == "${{ steps.meta.outputs.registry }}/${{ matrix.image.name }}:" \
                                    "${{ steps.meta.outputs.version }}"


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
        assert values["registry"] == (registry or "ghcr.io/acme") and values["host"] == values["registry"].split("/")[0]
    else:
        assert "does not match fleetgen's version" in proc.stdout
