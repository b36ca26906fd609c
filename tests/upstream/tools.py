"""The upstream programs the tests run, built from their own Go modules at pinned versions.

    python3 tests/upstream/tools.py build        # build what is missing; seconds when nothing changed
    python3 tests/upstream/tools.py list         # each tool: version, module, built or not
    python3 tests/upstream/tools.py path NAME    # the binary's path (exit 2 when not built)

`TOOLS` below is the one place versions are written. kubeconform and kustomize are built by
`go install module@version`, i.e. with their own go.mod. The Kubernetes family (etcd,
kube-apiserver, kube-controller-manager, Kueue, JobSet) is built from `go.mod` beside this file,
which requires them at the same versions and locks every dependency in `go.sum`; `build` refuses
to run when the two disagree. etcd is the release Kubernetes v1.36.3 itself requires
(go.etcd.io/etcd/server/v3 v3.6.8 in its go.mod), so the pair is the one upstream tests together.

Binaries go to `$FLEETGEN_TOOLS_DIR` (default `~/.cache/fleetgen/tools`), one folder per
`<name>-<version>`, with a stamp of everything the build depended on (Go version, go.mod, go.sum);
a folder whose stamp matches is reused without running Go. A tool whose module needs a newer Go than
the machine's names it in `toolchain` (Argo CD: go1.27.0); Go fetches that toolchain through the
module proxy (`GOTOOLCHAIN`), and the stamp records it instead. The folder lives outside the checkout
so that fresh clones (CI) reuse it; `.tools/` is gitignored for those who point it inside.
Beside the Kueue and JobSet binaries, `manifests.yaml` is `kustomize build config/default` of the
same module: the install manifests upstream releases, which the test cluster installs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Tool:
    """One upstream program: where its code lives and how it is built."""

    name: str
    module: str
    version: str
    package: str
    """Go package of the main program."""
    via_go_mod: bool
    """Built from our go.mod (True) or `go install package@version` with its own go.mod (False)."""
    manifests: bool = False
    """Also keep `kustomize build config/default` of the module (its install manifests)."""
    stamps: tuple[str, ...] = ()
    """`-X package.variable=value` linker flags that stamp the version, as upstream's own builds do
    (a kube-apiserver without them reports v0.0.0-master, which Kueue refuses to parse)."""
    directory: str = ""
    """A small program of ours beside this file (its own go.mod requires `module` at `version`):
    built there, so its dependencies never move the Kubernetes family's."""
    toolchain: str = ""
    """A Go release newer than the machine's that the module needs (`GOTOOLCHAIN`: Go fetches that
    toolchain through the module proxy); empty for the machine's Go."""
    chart_module: str = ""
    """The module that ships the program's Helm chart, where it is not `module` (at the same version)."""
    generated: tuple[tuple[str, str], ...] = ()
    """(path in the module, text): files upstream's release build writes into its tree before compiling,
    which the module zip lacks. The build then compiles a copy of the module with them written (a
    replace directive added to a copy of `directory`'s go.mod); the module cache stays untouched."""
    archive: tuple[str, str] = ()
    """(file in ../shared/upstream, its sha256): a source release the Go module proxy refuses to serve,
    built from that tarball with its own go.mod (its dependencies still come through the proxy)."""


def _k8s_stamps(version: str) -> tuple[str, ...]:
    """hack/lib/version.sh of Kubernetes: the same values in component-base and client-go."""
    major, minor = version.lstrip("v").split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean",
              "buildDate": "2026-07-22T18:07:38Z"}  # the release's own time (the proxy's .info), not now
    return tuple(f"-X {pkg}.{var}={val}" for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
                 for var, val in values.items())


K8S = "v1.36.3"
STD = "std"
"""`module` of a program of ours that needs only Go's standard library."""
TOOLS: tuple[Tool, ...] = (
    Tool("kubeconform", "github.com/yannh/kubeconform", "v0.8.0",
         "github.com/yannh/kubeconform/cmd/kubeconform", via_go_mod=False),
    Tool("kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "v5.8.2",
         "sigs.k8s.io/kustomize/kustomize/v5", via_go_mod=False),
    # `helm template` of the Kueue and JobSet charts shipped inside their Go modules (charts/).
    Tool("helm", "helm.sh/helm/v3", "v3.22.0", "helm.sh/helm/v3/cmd/helm", via_go_mod=False),
    # Nodes and pod lifecycles without kubelets (its stages: Ready nodes, pods Running, then done).
    Tool("kwok", "sigs.k8s.io/kwok", "v0.8.0", "sigs.k8s.io/kwok/cmd/kwok", via_go_mod=False),
    Tool("etcd", "go.etcd.io/etcd/server/v3", "v3.6.8", "go.etcd.io/etcd/server/v3", via_go_mod=True),
    Tool("kube-apiserver", "k8s.io/kubernetes", K8S, "k8s.io/kubernetes/cmd/kube-apiserver", via_go_mod=True,
         stamps=_k8s_stamps(K8S)),
    Tool("kube-controller-manager", "k8s.io/kubernetes", K8S, "k8s.io/kubernetes/cmd/kube-controller-manager",
         via_go_mod=True, stamps=_k8s_stamps(K8S)),
    # Binds pods to nodes: the fleet twin's pods land on nodes shaped like the cluster file.
    Tool("kube-scheduler", "k8s.io/kubernetes", K8S, "k8s.io/kubernetes/cmd/kube-scheduler", via_go_mod=True,
         stamps=_k8s_stamps(K8S)),
    # Applies the GitOps bootstrap exactly as the README tells a platform team (`kubectl apply -k`).
    Tool("kubectl", "k8s.io/kubernetes", K8S, "k8s.io/kubernetes/cmd/kubectl", via_go_mod=True,
         stamps=_k8s_stamps(K8S)),
    Tool("kueue", "sigs.k8s.io/kueue", "v0.19.2", "sigs.k8s.io/kueue/cmd/kueue", via_go_mod=True, manifests=True,
         stamps=("-X sigs.k8s.io/kueue/pkg/version.GitVersion=v0.19.2",
                 "-X sigs.k8s.io/kueue/pkg/version.GitCommit=8eab68778fc1b52affe165fdf5af29d1e9b4f3cb")),
    # Kueue's own CLI (`kubectl kueue`) at the controller's tag, as an ML engineer runs it against the twin.
    # Its module has no replace directives, so `go install` builds it with Kueue's own go.mod, as upstream's
    # release does (Makefile:552 at v0.19.2); in our go.mod it would move the whole family's stamps.
    Tool("kueuectl", "sigs.k8s.io/kueue", "v0.19.2", "sigs.k8s.io/kueue/cmd/kueuectl", via_go_mod=False,
         stamps=("-X sigs.k8s.io/kueue/pkg/version.GitVersion=v0.19.2",
                 "-X sigs.k8s.io/kueue/pkg/version.GitCommit=8eab68778fc1b52affe165fdf5af29d1e9b4f3cb")),
    # The Kueue a cluster upgrades from in the upgrade story (tests/test_upgrade_story.py): the release the
    # example's dev cluster runs, built with its own go.mod (`go install`, as kueuectl), manifests beside it.
    Tool("kueue-v0.15.2", "sigs.k8s.io/kueue", "v0.15.2", "sigs.k8s.io/kueue/cmd/kueue", via_go_mod=False,
         manifests=True,
         stamps=("-X sigs.k8s.io/kueue/pkg/version.GitVersion=v0.15.2",
                 "-X sigs.k8s.io/kueue/pkg/version.GitCommit=3790e86359efacde36b9fc2722e84f496a06d8fc")),
    Tool("jobset", "sigs.k8s.io/jobset", "v0.12.0", "sigs.k8s.io/jobset", via_go_mod=True, manifests=True,
         stamps=("-X sigs.k8s.io/jobset/pkg/version.GitVersion=v0.12.0",
                 "-X sigs.k8s.io/jobset/pkg/version.GitCommit=09e9a3bb4b64dbe75b5b0119d3623903f0434643")),
)
TOOLS += (
    # BuildKit's Dockerfile checks (what `docker build --check` runs), for the reconciler's image.
    Tool("dockerfile-lint", "github.com/moby/buildkit", "v0.34.2", ".", via_go_mod=False,
         directory="dockerfile-lint"),
    # dcgm-exporter 4.6.0's reading of its counters CSV (Go's encoding/csv; the exporter's module is
    # not served by the Go module proxy, so its few record rules are restated there).
    Tool("dcgm-csv", STD, "go", ".", via_go_mod=False, directory="dcgm-csv"),
    # The OpenTelemetry collector's config resolver (confmap, as contrib 0.139.0 links it): what the
    # kernel-log collector makes of `${file:...}` and `${env:...}` in its rendered configuration.
    Tool("otelcol-config", "go.opentelemetry.io/collector/confmap", "v1.45.0", ".", via_go_mod=False,
         directory="otelcol-config"),
    # Argo CD's Lua health customizations run as Argo CD v3.6.1 runs them (gopher-lua, gopher-json).
    Tool("argocd-health", "github.com/yuin/gopher-lua", "v1.1.2", ".", via_go_mod=False, directory="argocd-health"),
    # Loki's single binary, whose ruler evaluates the rendered XID rules (its go.mod has replace
    # directives, so it is built from ours, which restates them and names it as a `tool`).
    Tool("loki", "github.com/grafana/loki/v3", "v3.7.8", "github.com/grafana/loki/v3/cmd/loki", via_go_mod=False,
         directory="loki", stamps=("-X github.com/grafana/loki/v3/pkg/util/build.Version=3.7.8",)),
)
TOOLS += (
    # The fleet twin's GitOps engines. Argo CD v3.6.1 needs Go 1.27; its go.mod has replace directives,
    # restated in ours, which links only the application controller and the repo server (and miniredis
    # for their cache).
    Tool("argocd", "github.com/argoproj/argo-cd/v3", "v3.6.1", ".", via_go_mod=False, directory="argocd",
         toolchain="go1.27.0",
         stamps=("-X github.com/argoproj/argo-cd/v3/common.version=3.6.1",
                 "-X github.com/argoproj/argo-cd/v3/common.gitTag=v3.6.1",
                 "-X github.com/argoproj/argo-cd/v3/common.gitTreeState=clean")),
    # The twin's git host and chart mirror: `git http-backend` and a Helm repository over HTTPS.
    Tool("git-https", STD, "go", ".", via_go_mod=False, directory="git-https"),
    # Flux: the controllers flux2 v2.9.5 installs, each from a go.mod of ours restating its replaces.
    Tool("source-controller", "github.com/fluxcd/source-controller", "v1.9.5", "github.com/fluxcd/source-controller",
         via_go_mod=False, directory="flux-source"),
    Tool("kustomize-controller", "github.com/fluxcd/kustomize-controller", "v1.9.5",
         "github.com/fluxcd/kustomize-controller", via_go_mod=False, directory="flux-kustomize"),
    Tool("helm-controller", "github.com/fluxcd/helm-controller", "v1.6.4", "github.com/fluxcd/helm-controller",
         via_go_mod=False, directory="flux-helm"),
    # The flux CLI: `flux reconcile`, `flux get`, as a platform engineer runs them against the twin. It
    # embeds the install manifests flux2's release generates (`make build`); the twin installs Flux from
    # the controllers' own modules instead, so one file saying so stands in for them (only `flux install`
    # and `flux bootstrap` read them).
    Tool("flux", "github.com/fluxcd/flux2/v2", "v2.9.5", "github.com/fluxcd/flux2/v2/cmd/flux", via_go_mod=False,
         directory="flux-cli", stamps=("-X main.VERSION=2.9.5",),
         generated=(("cmd/flux/manifests/not-embedded.yaml",
                     "# This flux CLI was built for tests without flux2's generated install manifests:\n"
                     "# `flux install` and `flux bootstrap` are not available from it.\n"),)),
)
TOOLS += (
    # KubeRay's operator (`operators.ray`), at the ray-operator API Kueue v0.19.2 requires; its chart and
    # CRDs are in the repository's root module.
    Tool("kuberay-operator", "github.com/ray-project/kuberay/ray-operator", "v1.6.2",
         "github.com/ray-project/kuberay/ray-operator", via_go_mod=False,
         chart_module="github.com/ray-project/kuberay"),
    # Kubeflow Trainer's controller manager (`operators.trainer`), at the Trainer API Kueue v0.19.2
    # requires; its chart and CRDs are in the same module.
    Tool("kubeflow-trainer", "github.com/kubeflow/trainer/v2", "v2.2.1",
         "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager", via_go_mod=False),
    # The Trainer a cluster upgrades to in the upgrade story (tests/test_upgrade_story.py).
    Tool("kubeflow-trainer-v2.3.0", "github.com/kubeflow/trainer/v2", "v2.3.0",
         "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager", via_go_mod=False),
    # LeaderWorkerSet's controller (`operators.lws`), at the LeaderWorkerSet API Kueue v0.19.2 requires; its
    # chart and CRDs are in the same module. Built from a go.mod of ours: the proxy refuses to list the module.
    Tool("lws", "sigs.k8s.io/lws", "v0.9.0", "sigs.k8s.io/lws/cmd", via_go_mod=False, directory="lws"),
)
TOOLS += (
    # The Prometheus operator kube-prometheus-stack 79.5.0 runs (`monitoring`): the proxy refuses its
    # module, so it is built from the release tarball in ../shared/upstream, pinned by its sha256.
    Tool("prometheus-operator", "github.com/prometheus-operator/prometheus-operator", "v0.86.2", "./cmd/operator",
         via_go_mod=False, archive=("prometheus-operator-v0.86.2.tar.gz",
                                    "15fca41384b4354cb2c48ee5173d1114e3318d2fb228e14d029ea5869715f49e"),
         stamps=("-X github.com/prometheus/common/version.Version=0.86.2",
                 "-X github.com/prometheus/common/version.Branch=HEAD")),
    # The Prometheus that chart runs (v3.7.3, module version v0.307.3): it loads the operator's generated
    # configuration and evaluates the rendered rules. Its go.mod has exclude directives, restated in ours.
    Tool("prometheus", "github.com/prometheus/prometheus", "v0.307.3",
         "github.com/prometheus/prometheus/cmd/prometheus", via_go_mod=False, directory="prometheus",
         stamps=("-X github.com/prometheus/common/version.Version=3.7.3",
                 "-X github.com/prometheus/common/version.Branch=HEAD")),
    # Its promtool (`check rules`, rule unit tests), from the same go.mod.
    Tool("promtool", "github.com/prometheus/prometheus", "v0.307.3",
         "github.com/prometheus/prometheus/cmd/promtool", via_go_mod=False, directory="prometheus",
         stamps=("-X github.com/prometheus/common/version.Version=3.7.3",
                 "-X github.com/prometheus/common/version.Branch=HEAD")),
)
BY_NAME = {t.name: t for t in TOOLS}
SHARED_UPSTREAM = HERE.parents[2] / "shared" / "upstream"
"""Charts and sources the module proxy refuses, beside the checkout (see ../shared/README.md)."""

BUILD_ENV = {"GOGC": "400"}
"""The Go compiler and linker are Go programs: collecting their garbage a quarter as often builds a
cold helm in 133 s instead of 157 s on 2 cores (peak memory 0.66 GB instead of 0.46 GB per compile).
A GOGC set by the caller wins."""
LDFLAGS = ("-s", "-w")
"""No symbol table or DWARF, as upstream's release builds link (Kubernetes v1.36.3 hack/lib/golang.sh:946,
flux2 v2.9.5 .goreleaser.yml:9, source-controller v1.9.5 Makefile:40): half the link time (helm: 6.7 s
instead of 12.4 s) and a third less disk. Stack traces keep their file and line."""
WORKERS = 2
"""Builds run side by side: a single `go build` keeps 2 cores about 89% busy (downloads and the
single-threaded link leave the rest idle); a second build fills that."""

BUILD_WEIGHT = {"loki": 548, "argocd": 435, "source-controller": 401, "prometheus": 329, "kustomize-controller": 227,
                "kubeflow-trainer": 153, "lws": 155, "helm": 133, "kwok": 130, "kuberay-operator": 123,
                "helm-controller": 110, "prometheus-operator": 226, "promtool": 101, "flux": 88,
                "dockerfile-lint": 86, "kubeconform": 33, "kueuectl": 307, "kueue-v0.15.2": 300,
                "kubeflow-trainer-v2.3.0": 153}
"""Seconds each standalone tool took on a cold 2-core machine (its stamp's `seconds`), so the longest start first."""


class ToolError(Exception):
    """A build that cannot proceed; the message says what to do."""


def tools_dir() -> Path:
    return Path(os.environ.get("FLEETGEN_TOOLS_DIR") or Path.home() / ".cache" / "fleetgen" / "tools")


def folder(tool: Tool) -> Path:
    return tools_dir() / f"{tool.name}-{tool.version}"


def binary(name: str) -> Path:
    """Where the named tool's binary is (whether or not it has been built)."""
    tool = BY_NAME[name]
    return folder(tool) / tool.name


CHART_FOLDERS = {"loki": "production/helm", "kuberay-operator": "helm-chart"}
"""Where a module keeps its charts when not in `charts/`."""


def module_dir(name: str, version: str | None = None, module: str | None = None) -> Path:
    """A tool's module folder (its manifests, charts, stages and scripts), or another `module` released
    with it, at the pinned version or `version`, resolved as its build resolves it (in its own folder,
    with its toolchain); Go downloads it into its module cache if needed."""
    tool = BY_NAME[name]
    out = _go("mod", "download", "-json", f"{module or tool.module}@{version or tool.version}",
              cwd=HERE / tool.directory if tool.directory else HERE, env=_toolchain_env(tool))
    return Path(json.loads(out)["Dir"])


def writable_copy(source: Path, dest: Path) -> Path:
    """A copy of a folder of the module cache (read-only there) that may be changed."""
    shutil.copytree(source, dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


SUBCHART_MODULES = {"kubeflow-trainer": {"jobset": "sigs.k8s.io/jobset", "lws": "sigs.k8s.io/lws"}}
"""Per chart, the Go modules that ship its subcharts (`charts/<name>` at the dependency's version). Other
charts come as their module has them (tests/upstream/loki_server.py drops the subcharts Loki's values leave off)."""


def chart(name: str, version: str | None = None) -> Path:
    """The Helm chart a tool's module ships (`charts/<name>`) at the pinned version or `version`
    (another release of the same module: Go downloads it into its module cache). A chart named in
    SUBCHART_MODULES is assembled once beside the tools, as `helm dependency build` packs the published
    one: each subchart from its own module at the version Chart.yaml names (Helm refuses to template a
    chart whose subcharts are missing, even those its values turn off)."""
    import yaml

    module = module_dir(name, version, BY_NAME[name].chart_module or None)
    source = module / CHART_FOLDERS.get(name, "charts") / name
    modules = SUBCHART_MODULES.get(name)
    if not modules:
        return source
    needs = (yaml.safe_load((source / "Chart.yaml").read_text()) or {}).get("dependencies") or []
    target = tools_dir() / "charts" / f"{name}-{version or BY_NAME[name].version}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent)) / name
    writable_copy(source, staged)
    for need in needs:
        sub = Path(json.loads(_go("mod", "download", "-json",
                                  f"{modules[need['name']]}@v{need['version']}"))["Dir"])
        writable_copy(sub / "charts" / need["name"], staged / "charts" / need["name"])
    try:
        staged.rename(target)
    except OSError:  # another worker assembled it first
        shutil.rmtree(staged.parent, ignore_errors=True)
    else:
        staged.parent.rmdir()
    return target


def merged_values(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm values `over` laid on a copy of `base`, maps merged key by key as Helm merges them."""
    import copy

    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merged_values(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
            else value
    return out


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def trimmed_chart(name: str, values: dict[str, Any], dest: Path, version: str | None = None) -> Path:
    """A writable copy of a module's chart less the Chart.yaml dependencies `values` leave off.

    `helm template` and `helm package` refuse a chart whose dependencies are not vendored in charts/
    (action.CheckDependencies, pkg/action/install.go:718-732 at helm v3.22.0), even those whose condition
    is false, which Helm then drops anyway (processDependencyEnabled, pkg/chartutil/dependencies.go:132).
    Loki's module vendors none, so the copy removes the ones whose condition is false under the chart's
    defaults merged with `values`; one whose condition holds is an error (the module cannot serve it)."""
    import yaml

    copied = writable_copy(chart(name, version), dest)
    meta = yaml.safe_load((copied / "Chart.yaml").read_text())
    merged = merged_values(yaml.safe_load((copied / "values.yaml").read_text()) or {}, values)
    enabled = [d["name"] for d in meta.get("dependencies", []) if _lookup(merged, d.get("condition", "")) is True]
    if enabled:
        raise ToolError(f"the values enable subcharts of {name} its module does not ship: {enabled}")
    meta.pop("dependencies", None)
    (copied / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (copied / "Chart.lock").unlink(missing_ok=True)
    return copied


def module_file(module: str, rel: str) -> Path:
    """A file of a module go.mod requires, at the version it requires (Go downloads it if needed)."""
    version = _required_versions()[module]
    return Path(json.loads(_go("mod", "download", "-json", f"{module}@{version}"))["Dir"]) / rel


def manifests(name: str) -> Path:
    return folder(BY_NAME[name]) / "manifests.yaml"


def missing() -> list[str]:
    """Tools whose binary (or manifests) are not built yet."""
    return [t.name for t in TOOLS if _buildable(t)
            and (not binary(t.name).is_file() or (t.manifests and not manifests(t.name).is_file()))]


def archive_path(tool: Tool) -> Path | None:
    """The tool's source tarball in ../shared/upstream, or None when it is not built from one."""
    return SHARED_UPSTREAM / tool.archive[0] if tool.archive else None


def _buildable(tool: Tool) -> bool:
    """False for a tool built from ../shared when ../shared is absent (its tests say so and skip)."""
    path = archive_path(tool)
    return path is None or path.is_file()


def _unpack(tool: Tool, staged: Path) -> Path:
    """The tool's tarball checked against its pinned sha256 and unpacked; its single top folder."""
    import tarfile

    path = archive_path(tool)
    assert path is not None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != tool.archive[1]:
        raise ToolError(f"{path} has sha256 {digest}, but tools.py pins {tool.archive[1]}: "
                        "replace it with the release tarball or update the pin")
    with tarfile.open(path) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(staged, filter="data")
        else:  # Python before 3.11.4 (Debian 12's 3.11.2): refuse what the "data" filter would
            for member in tar.getmembers():
                names = [Path(member.name), *([Path(member.linkname)] if member.issym() else [])]
                if member.islnk() or member.isdev() or any(n.is_absolute() or ".." in n.parts for n in names):
                    raise ToolError(f"{path} holds {member.name!r}, which may not be unpacked")
            tar.extractall(staged)  # noqa: S202 - every member checked above
    tops = [p for p in staged.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise ToolError(f"{path} should hold one top folder, not {len(tops)}")
    return tops[0]


SHARED_CHARTS = {
    "kube-prometheus-stack": ("kube-prometheus-stack-79.5.0.tgz",
                              "863f3ac7a8490903b099d866909f1a17950d7dc73bbed90a459c5a3650ac9240"),
    "dcgm-exporter": ("dcgm-exporter-4.6.0.tgz", "9add2825d5e699ae8709c765ab580d1d23f24f0a49dd88ec5e4257f14490ee82"),
    "gpu-operator": ("gpu-operator-v25.10.0.tgz", "2a685f637aeb65b157556ffe40b1d72d1f40fa227ceb63449f254b6eb687d5d6"),
}
"""Helm chart archives in ../shared/upstream, packaged from their release tags (subcharts packed in), pinned
by sha256: no Go module ships them."""


def shared_chart(name: str) -> Path:
    """A released chart archive of SHARED_CHARTS, checked against its pinned sha256."""
    file, pinned = SHARED_CHARTS[name]
    path = SHARED_UPSTREAM / file
    if not path.is_file():
        raise ToolError(f"{path} is absent: the monitoring charts live in ../shared/upstream beside the checkout")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != pinned:
        raise ToolError(f"{path} has sha256 {digest}, but tools.py pins {pinned}")
    return path


def _toolchain_env(tool: Tool) -> dict[str, str]:
    return {"GOTOOLCHAIN": tool.toolchain} if tool.toolchain else {}


def _go(*args: str, cwd: Path = HERE, env: dict[str, str] | None = None) -> str:
    if shutil.which("go") is None:
        raise ToolError("`go` is not on PATH: install Go 1.26 or later (the tools are built from Go modules)")
    proc = subprocess.run(["go", *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise ToolError(f"go {' '.join(args)} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def _required_versions(go_mod: Path = HERE / "go.mod") -> dict[str, str]:
    """module -> version, as go.mod requires them."""
    text = go_mod.read_text()
    return dict(re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)(?:\s*//.*)?$", text, flags=re.MULTILINE))


def check_go_mod() -> None:
    """go.mod must require every go.mod-built tool at the version TOOLS names."""
    required = _required_versions()
    for tool in TOOLS:
        if tool.directory and tool.module != STD:
            own = _required_versions(HERE / tool.directory / "go.mod")
            if own.get(tool.module) != tool.version:
                raise ToolError(f"tests/upstream/{tool.directory}/go.mod requires {tool.module} "
                                f"{own.get(tool.module, '(nothing)')} but tools.py pins {tool.version}")
        if tool.via_go_mod and required.get(tool.module) != tool.version:
            raise ToolError(f"tests/upstream/go.mod requires {tool.module} {required.get(tool.module, '(nothing)')} "
                            f"but tools.py pins {tool.version}: run `go get {tool.module}@{tool.version} && "
                            "go mod tidy` in tests/upstream")


def _fingerprint(tool: Tool, go_version: str) -> str:
    digest = hashlib.sha256(f"{go_version}\n{tool.module}@{tool.version}\n{tool.package}\n{tool.stamps}\n{LDFLAGS}\n"
                            .encode())
    if tool.via_go_mod:
        digest.update((HERE / "go.mod").read_bytes())
        digest.update((HERE / "go.sum").read_bytes())
    if tool.directory:
        for source in sorted((HERE / tool.directory).iterdir()):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    for rel, text in tool.generated:
        digest.update(f"{rel}\0{text}\0".encode())
    if tool.archive:
        digest.update(f"{tool.archive}\0".encode())
    return digest.hexdigest()


def _go_version(tool: Tool, machine: str) -> str:
    """The Go release that builds `tool`: its toolchain, else the machine's."""
    return tool.toolchain or machine


def _stamp(tool: Tool) -> Path:
    return folder(tool) / "stamp.json"


def _current(tool: Tool, fingerprint: str) -> bool:
    try:
        stamp = json.loads(_stamp(tool).read_text())
    except (OSError, ValueError):
        return False
    return (stamp.get("fingerprint") == fingerprint and binary(tool.name).is_file()
            and (not tool.manifests or manifests(tool.name).is_file()))


def _install(target: Tool, staged: Path, built: Path, fingerprint: str, seconds: float) -> None:
    """Move a built binary (and manifests) into its folder, then write the stamp last."""
    dest = folder(target)
    dest.mkdir(parents=True, exist_ok=True)
    os.replace(built, binary(target.name))
    if target.manifests:
        os.replace(staged / f"{target.name}.manifests.yaml", manifests(target.name))
    _stamp(target).write_text(json.dumps({"fingerprint": fingerprint, "module": target.module,
                                          "version": target.version, "seconds": round(seconds, 1)}) + "\n")


def _build_env(tool: Tool) -> dict[str, str]:
    return {**{k: v for k, v in BUILD_ENV.items() if k not in os.environ}, **_toolchain_env(tool)}


def _ldflags(tool: Tool) -> str:
    return " ".join((*LDFLAGS, *tool.stamps))


def build(names: list[str] | None = None, log: bool = True) -> dict[str, float]:
    """Build the named tools (default all) that are not current; seconds spent per tool built.

    Each `go` invocation is one job, `WORKERS` at a time, longest first; a tool is installed (stamp
    last) as soon as its job ends, so an interrupted build keeps what finished. The first failure
    stops jobs not yet started and is raised once the running ones end."""
    wanted = [BY_NAME[n] for n in names] if names else list(TOOLS)
    for tool in [t for t in wanted if not _buildable(t)]:
        _say(log, f"not building {tool.name}: {archive_path(tool)} is absent (its tests skip; CI fails them)")
        wanted.remove(tool)
    check_go_mod()
    go_version = _go("env", "GOVERSION").strip()
    todo = _todo(wanted, go_version)
    spent: dict[str, float] = {}
    if not todo:
        return spent
    tools_dir().mkdir(parents=True, exist_ok=True)
    family = [t for t in todo if t.via_go_mod]
    single = sorted((t for t in todo if not t.via_go_mod), key=lambda t: -BUILD_WEIGHT.get(t.name, 0))
    with tempfile.TemporaryDirectory(dir=tools_dir(), prefix=".build-") as tmp, \
            ThreadPoolExecutor(max_workers=WORKERS) as pool:
        staged = Path(tmp)
        kustomize_ready = Event()
        if "kustomize" not in [t.name for t in todo]:
            kustomize_ready.set()

        def one(tool: Tool) -> None:
            started = time.monotonic()
            work = staged / tool.name
            work.mkdir()
            built = _build_single(tool, work, log)
            if tool.manifests:  # with our kustomize, like the family's
                if not kustomize_ready.wait(timeout=3600):
                    raise ToolError(f"kustomize was not built within an hour; {tool.name}'s manifests need it")
                _write_manifests([tool], work)
            spent[tool.name] = time.monotonic() - started
            _install(tool, work, built, _fingerprint(tool, _go_version(tool, go_version)), spent[tool.name])
            _say(log, f"built {tool.name} in {spent[tool.name]:.0f} s")
            if tool.name == "kustomize":
                kustomize_ready.set()

        def together(tools: list[Tool]) -> None:
            started = time.monotonic()
            _say(log, "building " + ", ".join(f"{t.name} {t.version}" for t in tools) + " from tests/upstream/go.mod")
            out = staged / "family"
            out.mkdir()
            # One invocation: Go shares the common packages between the binaries and builds in parallel.
            # -X of a variable a binary does not link is ignored, so one set of flags serves them all.
            ldflags = " ".join((*LDFLAGS, *sorted({flag for t in tools for flag in t.stamps})))
            _go("build", "-trimpath", f"-ldflags={ldflags}", "-o", str(out) + os.sep, *[t.package for t in tools],
                env=_build_env(tools[0]))
            if any(t.manifests for t in tools) and not kustomize_ready.wait(timeout=3600):
                raise ToolError("kustomize was not built within an hour; the Kueue and JobSet manifests need it")
            _write_manifests(tools, out)
            elapsed = time.monotonic() - started
            for tool in tools:
                spent[tool.name] = elapsed
                _install(tool, out, out / _exe_name(tool.package), _fingerprint(tool, go_version), elapsed)
            _say(log, f"built {', '.join(t.name for t in tools)} in {elapsed:.0f} s")

        # kustomize first (small, and the family's manifests wait for it), then the longest jobs.
        jobs = [pool.submit(one, t) for t in single if t.name == "kustomize"]
        jobs += [pool.submit(together, family)] if family else []
        jobs += [pool.submit(one, t) for t in single if t.name != "kustomize"]
        failure: BaseException | None = None
        for job in as_completed(jobs):
            if job.exception() is not None and failure is None:
                failure = job.exception()
                kustomize_ready.set()  # a job waiting for kustomize must not wait for a failed build
                for other in jobs:
                    other.cancel()
        if failure is not None:
            raise failure
    return spent


def _todo(wanted: list[Tool], go_version: str) -> list[Tool]:
    """The tools of `wanted` that are not current, and kustomize first when their manifests need it
    and it is not current either."""
    todo = [t for t in wanted if not _current(t, _fingerprint(t, _go_version(t, go_version)))]
    if any(t.manifests for t in todo) and "kustomize" not in [t.name for t in todo] \
            and not _current(BY_NAME["kustomize"], _fingerprint(BY_NAME["kustomize"], go_version)):
        todo.insert(0, BY_NAME["kustomize"])  # the manifests are built with our kustomize
    return todo


def _build_single(tool: Tool, work: Path, log: bool) -> Path:
    """Build one tool that is not of the go.mod family in `work`: from its source archive, from its
    folder in tests/upstream, or with `go install`; the binary built."""
    if tool.archive:
        _say(log, f"building {tool.name} {tool.version} from {tool.archive[0]}")
        source = _unpack(tool, work / "src")
        _go("build", "-trimpath", f"-ldflags={_ldflags(tool)}", "-o", str(work / tool.name), tool.package,
            cwd=source, env=_build_env(tool))
        return work / tool.name
    if tool.directory:
        _say(log, f"building {tool.name} against {tool.module} {tool.version} "
                  f"(tests/upstream/{tool.directory})")
        _go("build", "-trimpath", f"-ldflags={_ldflags(tool)}", "-o", str(work / tool.name), tool.package,
            cwd=_with_generated(tool, work), env=_build_env(tool))
        return work / tool.name
    _say(log, f"building {tool.name} {tool.version} (go install {tool.package}@{tool.version})")
    _go("install", "-trimpath", f"-ldflags={_ldflags(tool)}", f"{tool.package}@{tool.version}",
        env={**_build_env(tool), "GOBIN": str(work)})
    return work / _exe_name(tool.package)


def _write_manifests(tools: list[Tool], out: Path) -> None:
    """`<name>.manifests.yaml` in `out` for each tool that has them: its module's config/default,
    built with our kustomize."""
    for tool in tools:
        if tool.manifests:
            folder = (_go("list", "-m", "-f", "{{.Dir}}", tool.module).strip() if tool.via_go_mod
                      else module_dir(tool.name))
            text = _kustomize_build(Path(folder) / "config" / "default")
            (out / f"{tool.name}.manifests.yaml").write_text(text)


def _with_generated(tool: Tool, staged: Path) -> Path:
    """Where to build a `directory` tool: that folder, or for one with `generated` files a copy of it
    whose go.mod replaces the module with a copy of its tree that has them."""
    if not tool.generated:
        return HERE / tool.directory
    tree = writable_copy(module_dir(tool.name), staged / f"{tool.name}-module")
    work = staged / f"{tool.name}-build"
    for rel, text in tool.generated:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    shutil.copytree(HERE / tool.directory, work)
    _go("mod", "edit", f"-replace={tool.module}={tree}", cwd=work)
    return work


def _exe_name(package: str) -> str:
    """The file name `go build`/`go install` give a main package: its last element, less a /vN suffix."""
    parts = package.split("/")
    return parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]


def _kustomize_build(path: Path) -> str:
    proc = subprocess.run([str(binary("kustomize")), "build", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"kustomize build {path} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def _say(log: bool, text: str) -> None:
    if log:
        print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build and locate the pinned upstream programs the tests run.")
    sub = parser.add_subparsers(dest="verb", required=True)
    b = sub.add_parser("build", help="build every tool (or the named ones) that is not current")
    b.add_argument("names", nargs="*", metavar="NAME", help=", ".join(BY_NAME))
    sub.add_parser("list", help="each tool, its version and whether it is built")
    p = sub.add_parser("path", help="print the binary's path")
    p.add_argument("name", choices=sorted(BY_NAME))
    args = parser.parse_args(argv)
    unknown = [n for n in getattr(args, "names", []) if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown tool {unknown[0]!r}; known: {', '.join(BY_NAME)}")
    try:
        if args.verb == "build":
            started = time.monotonic()
            spent = build(args.names or None)
            total = time.monotonic() - started
            print(f"tools in {tools_dir()}: built {', '.join(spent) or 'nothing (all current)'} in {total:.1f} s")
        elif args.verb == "list":
            for tool in TOOLS:
                state = "built" if tool.name not in missing() else "missing"
                print(f"{tool.name:24} {tool.version:8} {state:8} {tool.module}")
        else:
            path = binary(args.name)
            if not path.is_file():
                print(f"{args.name} is not built: run python3 tests/upstream/tools.py build", file=sys.stderr)
                return 2
            print(path)
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
