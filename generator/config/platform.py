"""Cluster keys for the platform stack: `gitops` (how it is installed) and `monitoring`."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, StrictBool, StrictStr, ValidationInfo, field_validator

from generator.config.base import ConfigModel
from generator.config.types import (
    IMAGE_DIGEST,
    DnsLabel,
    DnsSubdomain,
    ImageDigest,
    ImageTag,
    LabelKey,
    LabelValue,
    Quantity,
)
from generator.versions import own_images

DURATION = r"^([0-9]+(ms|s|m|h|d|w|y))+$"
REGISTRY = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$"
# Names reserved for documentation and tests (RFC 2606, RFC 6761): a value on one of them was never filled in.
_RESERVED_HOST = re.compile(r"(^|\.)(example\.(com|net|org)|example|invalid|test|localhost)$")


def placeholder_host(host: str) -> bool:
    """Whether `host` is a name reserved for examples, which no real repository or registry uses."""
    return bool(_RESERVED_HOST.search(host.lower().rstrip(".")))


def _url_host(url: str) -> str:
    """The host of an https://, ssh:// or scp-style (git@host:path) git URL."""
    if url.startswith(("https://", "ssh://")):
        return urlsplit(url).hostname or ""
    return url.partition("@")[2].partition(":")[0]

Duration = Annotated[StrictStr, Field(pattern=DURATION)]


class GitOps(ConfigModel):
    """How the cluster's platform components are installed from git."""

    engine: Literal["argocd", "flux"] = "argocd"
    """`argocd` renders Argo CD Applications with sync waves; `flux` renders HelmReleases with dependsOn."""
    namespace: DnsLabel | None = None
    """Namespace of the GitOps controller's objects; default `argocd` or `flux-system`."""
    repo_url: StrictStr = Field(pattern=r"^(https://|ssh://|git@)[A-Za-z0-9._~:/@%+-]+$")
    """Git repository that holds this fleet (Argo CD source / Flux GitRepository URL). Required: the cluster
    syncs from it, and no default could be yours."""
    revision: StrictStr = Field(default="main", pattern=r"^[A-Za-z0-9._/-]{1,255}$")
    """Branch (or tag) the cluster follows."""
    destination: StrictStr = Field(default="https://kubernetes.default.svc", pattern=r"^https://[A-Za-z0-9.:/_-]+$")
    """Argo CD: API server URL of the cluster as registered in Argo CD (in-cluster by default). Flux runs in
    each cluster and applies to its own."""
    chart_mirror: StrictStr | None = Field(default=None, pattern=r"^https://[A-Za-z0-9._~:/@%+-]+$")
    """Helm repository (HTTPS, with an `index.yaml`) that mirrors every chart fleetgen installs at its
    pinned version, for clusters that cannot reach the public chart repositories (air-gapped). Set, every
    platform chart comes from it and the AppProjects allow it alone; unset, each chart comes from its
    upstream repository (`generator/versions.yaml`)."""

    @property
    def controller_namespace(self) -> str:
        return self.namespace or ("argocd" if self.engine == "argocd" else "flux-system")

    @field_validator("repo_url", "chart_mirror")
    @classmethod
    def _not_a_placeholder(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and placeholder_host(_url_host(value)):
            what = "this fleet's own git repository" if info.field_name == "repo_url" else "your chart mirror"
            raise ValueError(f"{value} is on a name reserved for examples: set the URL of {what}")
        return value


class Images(ConfigModel):
    """Where the cluster pulls fleetgen's own images. `.github/workflows/images.yml` builds them from this
    repository (`Dockerfile`, `images/otelcol-journald/`) and pushes them on every release tag."""

    registry: StrictStr = Field(pattern=REGISTRY, max_length=200)
    """Registry host and path, e.g. `ghcr.io/acme`: the cluster runs `<registry>/fleetgen` (the health
    reconciler) and, with `monitoring.kernelLogs.source: journald`, `<registry>/fleetgen-otelcol-journald`."""
    tag: ImageTag | None = None
    """Tag of both images; default this fleetgen's version (the release the workflow pushed)."""
    digests: dict[StrictStr, ImageDigest] = {}
    """Per image (`fleetgen`, `fleetgen-otelcol-journald`), the digest that pins it: rendered as
    `<registry>/<image>:<tag>@sha256:...`, so the node runs exactly the image that was reviewed even if
    the tag is pushed again (the images workflow's run summary shows each pushed digest)."""

    @field_validator("registry")
    @classmethod
    def _not_a_placeholder(cls, value: str) -> str:
        if placeholder_host(value.partition("/")[0].partition(":")[0]):
            raise ValueError(f"{value} is on a name reserved for examples: set the registry your images "
                             "workflow pushes to")
        return value

    @field_validator("tag", mode="before")
    @classmethod
    def _a_digest_is_not_a_tag(cls, value: object) -> object:
        if isinstance(value, str) and re.fullmatch(IMAGE_DIGEST, value):
            raise ValueError(f"{value[:15]}... is a digest, and a digest pins one image, not both: write it under "
                             f"images.digests.<image> ({', '.join(own_images())}) and leave tag to the release tag")
        return value

    @field_validator("digests")
    @classmethod
    def _known_images(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(own_images()))
        if unknown:
            raise ValueError(f"no image of fleetgen is named {', '.join(map(repr, unknown))}: "
                             f"the images are {', '.join(own_images())}")
        return value

    def reference(self, name: str, version: str) -> str:
        """`<registry>/<name>:<tag>`, with `@sha256:...` where `digests` pins it."""
        digest = self.digests.get(name)
        return f"{self.registry}/{name}:{self.tag or version}{'@' + digest if digest else ''}"


TRAINER_RUNTIME = "torch-distributed"
"""The ClusterTrainingRuntime `kind: trainjob` profiles run on, which `operators.trainer` installs: the
chart's PyTorch runtime (charts/kubeflow-trainer/templates/runtimes/torch-distributed.yaml at v2.2.1)."""


class Operators(ConfigModel):
    """Job operators installed beside Kueue and JobSet, each pinned in `generator/versions.yaml` and
    synced by the cluster's GitOps engine after Kueue, so that Kueue's webhooks queue what they run."""

    ray: StrictBool = False
    """KubeRay's operator (RayCluster, RayJob, RayService), in `kuberay-system`. Kueue queues RayClusters
    and RayJobs against the team's quota (its `ray.io/*` integrations must be on), and team members may
    create, follow and delete them in their own namespaces."""
    trainer: StrictBool = False
    """Kubeflow Trainer v2 (TrainJob, and its `torch-distributed` ClusterTrainingRuntime), in
    `kubeflow-system`, on the cluster's JobSet. Kueue queues TrainJobs against the team's quota (its
    `trainer.kubeflow.org/trainjob` integration must be on), and team members may create, follow and
    delete them in their own namespaces."""
    lws: StrictBool = False
    """The LeaderWorkerSet controller (LeaderWorkerSet: servers of several pods per replica, a leader and
    its workers), in `lws-system`. Kueue admits each replica's group of pods as one Workload against the
    team's quota (its `leaderworkerset.x-k8s.io/leaderworkerset` integration must be on), and team members
    may create, follow and delete LeaderWorkerSets in their own namespaces."""


class Storage(ConfigModel):
    """A persistent volume for a stateful component."""

    size: Quantity
    """Volume size, e.g. 100Gi."""
    storage_class: DnsSubdomain | None = None
    """StorageClass; omitted means the cluster default."""


class Resources(ConfigModel):
    """CPU and memory requested (and memory limited) for a component."""

    cpu: Quantity
    """CPU request, e.g. 500m or 2."""
    memory: Quantity
    """Memory request and limit, e.g. 4Gi."""


class Prometheus(ConfigModel):
    """The Prometheus of kube-prometheus-stack."""

    retention: Duration = "15d"
    """How long samples are kept."""
    storage: Storage = Storage(size="100Gi")
    """Volume for the time-series database."""
    resources: Resources = Resources(cpu="1", memory="8Gi")
    """Requests of the Prometheus pod."""


class Loki(ConfigModel):
    """Loki, single-binary mode, for kernel logs."""

    retention: Duration = "168h"
    """How long log lines are kept."""
    storage: Storage = Storage(size="50Gi")
    """Volume for chunks and index."""
    resources: Resources = Resources(cpu="500m", memory="2Gi")
    """Requests of the Loki pod."""


class KernelLogs(ConfigModel):
    """Where the collector on each GPU node reads the kernel log."""

    source: Literal["file", "journald"] = "file"
    """`file` tails a syslog file (Ubuntu and Debian write /var/log/kern.log); `journald` reads the journal,
    with fleetgen's collector image that adds journalctl (images/otelcol-journald)."""
    path: StrictStr = Field(default="/var/log/kern.log", pattern=r"^/[A-Za-z0-9._/-]+$")
    """File to tail when source is `file`."""


class Drain(ConfigModel):
    """Evicting the pods of nodes the reconciler cordoned. Off by default: a cordon alone lets
    running jobs finish (or checkpoint) on their own; with it on, jobs on a faulty GPU are stopped
    through the eviction API, so PodDisruptionBudgets are honoured."""

    enabled: StrictBool = False
    """Evict the pods (except DaemonSet and static pods) of every node the reconciler holds."""
    max_percent: float = Field(default=10.0, gt=0, le=100)
    """Drain breaker: when more of a pool's nodes than this share (rounded up, at least one) would
    be draining at once, no pod in that pool is evicted until `fleetgen health reset-breaker --drain`."""
    evictions_per_loop: int = Field(default=50, ge=1, le=10000, strict=True)
    """Most evictions in one loop, all nodes together."""
    grace_period: Duration | None = None
    """Termination grace period of evicted pods (default: each pod's own)."""


class Health(ConfigModel):
    """The GPU health reconciler: cordons nodes with faulty GPUs and lifts its own cordons."""

    enabled: StrictBool = True
    """Deploy the reconciler in this cluster (it needs monitoring enabled)."""
    dry_run: StrictBool = False
    """Compute and log every decision, write nothing (start here on a new cluster)."""
    namespace: DnsLabel = "fleetgen-system"
    """Namespace of the reconciler (its Lease and breaker ConfigMap live there too)."""
    period: Duration = "30s"
    """Time between two reconcile loops."""
    healthy_checks_to_release: int = Field(default=3, ge=1, le=100, strict=True)
    """Consecutive healthy loops before one of our cordons is lifted."""
    cooldown: Duration = "15m"
    """Minimum time a node stays cordoned."""
    flap_count: int = Field(default=3, ge=2, le=100, strict=True)
    """Cordons within flapWindow after which a node is labelled for repair and held."""
    flap_window: Duration = "24h"
    """Window for counting a node's cordons."""
    max_unhealthy_percent: float = Field(default=50.0, gt=0, le=100)
    """Circuit breaker: never hold more than this share of a pool's nodes cordoned."""
    cordons_per_loop: int = Field(default=5, ge=1, le=1000, strict=True)
    """Most new cordons per pool in one loop; more faults wait for the next loops. With the breaker,
    it bounds what forged health signals can do (docs/concepts/security.md)."""
    prometheus_url: StrictStr | None = Field(default=None, pattern=r"^https?://[A-Za-z0-9.:/_-]+$")
    """Prometheus to query; default the kube-prometheus-stack service in the monitoring namespace."""
    loki_url: StrictStr | None = Field(default=None, pattern=r"^https?://[A-Za-z0-9.:/_-]+$")
    """Loki to query for kernel XID/SXid lines (tenant `kernel-logs`); default Loki's own Service in the
    monitoring namespace, which a NetworkPolicy opens to the reconciler's namespace."""
    drain: Drain = Drain()
    """Optional eviction of the pods of cordoned nodes."""


class Monitoring(ConfigModel):
    """GPU observability: exporter, Prometheus, Loki, kernel-log shipping, alerts and dashboards."""

    enabled: StrictBool = True
    """Render the monitoring stack and its rules for this cluster."""
    namespace: DnsLabel = "monitoring"
    """Namespace of Prometheus, Loki, the GPU exporter and the log collector."""
    gpu_exporter: Literal["dcgm-exporter", "gpu-operator"] = "dcgm-exporter"
    """`dcgm-exporter` installs NVIDIA's exporter chart; `gpu-operator` configures the exporter the GPU
    operator runs (installing the operator with its driver, container toolkit, device plugin and MIG
    manager disabled: the node image provides them; GPU Feature Discovery and NFD stay on)."""
    scrape_interval: Duration = "30s"
    """How often Prometheus scrapes every target."""
    prometheus: Prometheus = Prometheus()
    """Prometheus settings."""
    loki: Loki = Loki()
    """Loki settings."""
    kernel_logs: KernelLogs = KernelLogs()
    """Kernel log source on GPU nodes."""
    gpu_node_selector: dict[LabelKey, LabelValue] = {"nvidia.com/gpu.present": "true"}
    """Labels of GPU nodes: where the exporter and the log collector run."""
    stack_node_selector: dict[LabelKey, LabelValue] = {}
    """Labels of nodes for Prometheus, Grafana, Alertmanager and Loki (e.g. a system pool)."""
    avoid_gpu_nodes: StrictBool = True
    """Keep Prometheus, Grafana, Alertmanager and Loki off nodes labelled as GPU nodes."""
