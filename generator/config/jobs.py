"""`jobProfiles` in team files: ready-to-run multi-node training jobs for a team's queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictStr

from generator.config.base import ConfigModel
from generator.config.types import Count, DnsSubdomain, ExecutionTime, LabelKey, PositiveCount, Quantity
from generator.durations import seconds

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig, NodePool

KUBERNETES_GRACE_SECONDS = 30
"""A pod's terminationGracePeriodSeconds when it sets none: templates leave the default out."""

# Profile names become JobSet names, which must be DNS-1035 labels (start with a letter).
PROFILE_NAME = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
IMAGE = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$"
DEFAULT_EXIT_CODES = {"torchrun": (2, 126, 127), "none": (1, 2, 126, 127)}
"""2: a usage error (argparse); 126/127: the command cannot run or is not found. torchrun turns any
worker failure into its own exit 1 (torch/distributed/elastic/multiprocessing/errors: ChildFailedError
propagates out of main), so under torchrun 1 says nothing about whose fault it was."""
TORCHRUN_ANY_FAILURE = 1
Arg = Annotated[StrictStr, Field(max_length=4096, pattern=r"^[^\x00]*$")]


class TopologySlice(ConfigModel):
    """Within the job's domain, groups of `size` nodes that must each share a narrower domain (Kueue
    annotations `podset-slice-required-topology` and `podset-slice-size`), e.g. 4-node NVLink racks."""

    level: LabelKey
    """Node label of each slice's domain: one of the pool's topologyLevels, at or below `topology.level`."""
    size: PositiveCount
    """Nodes per slice; must divide the job's nodes."""


class TopologyPreference(ConfigModel):
    """Topology-aware scheduling: keep all of the job's nodes within one topology domain."""

    mode: Literal["required", "preferred"]
    """`required` waits until one domain has room; `preferred` packs tightly but may spread."""
    level: LabelKey
    """Node label of the domain, one of the pool's topologyLevels (e.g. cloud.provider.com/topology-block)."""
    slice: TopologySlice | None = None
    """Slices of the job that must each sit in one narrower domain (not with a `leader`)."""


class EnvVar(ConfigModel):
    """An environment variable of the training container."""

    name: StrictStr = Field(pattern=ENV_NAME, max_length=256)
    """Variable name."""
    value: StrictStr = Field(max_length=32768)
    """Value (literal text)."""


class Leader(ConfigModel):
    """A separate replicated job for rank 0 (e.g. a coordinator with its own command)."""

    command: list[Arg] | None = None
    """Leader command; defaults to the profile's command."""
    args: list[Arg] | None = None
    """Leader arguments; default to the profile's arguments."""




class JobProfile(ConfigModel):
    """A ready-to-run job template of a team (or a Ray cluster, `kind: raycluster`): rendered as its `kind`'s
    object, and a SkyPilot task where its nodes run a program."""

    name: StrictStr = Field(pattern=PROFILE_NAME, max_length=63)
    """Profile name: the job's name in the template (a DNS-1035 label: starts with a letter)."""
    kind: StrictStr = "jobset"
    """What the profile renders and runs: one of the job kinds (generator/kinds; the JSON Schema and the
    reference list each with what it makes), checked where the profile is."""
    cluster: StrictStr
    """Cluster to run in; the team needs a quota there."""
    pool: StrictStr
    """Node pool to run on; the team needs a quota in it. Or the cluster's `cpuPool` (its name, `cpu` by
    default) for a CPU-only server (`kind: deployment` or `leaderworkerset`, e.g. a router): no GPUs,
    `cpu` and `memory` per pod, run in the team's CPU pool flavor (what the team holds of the pool when
    it is never preempted, else borrowed up to the cluster's `teamLimit`)."""
    nodes: int = Field(ge=1, le=4096, strict=True)
    """Number of nodes (pods), one torchrun agent each."""
    gpus_per_node: Count | None = None
    """GPUs per pod; defaults to the pool's GPUs per node (on the CPU pool: none, and only 0 may be set)."""
    cpu: Quantity | None = None
    """On the CPU pool only: CPU each pod requests, e.g. `4` or `500m`; defaults to 90% of a CPU-pool node
    (on a GPU pool a pod's CPU goes with its GPUs, in the pool's per-node ratio)."""
    memory: Quantity | None = None
    """On the CPU pool only: memory each pod requests (and is limited to), e.g. `16Gi`; defaults to 90% of a
    CPU-pool node."""
    image: StrictStr = Field(pattern=IMAGE)
    """Container image, ideally pinned by digest."""
    command: list[Arg] = []
    """The training program, e.g. [python, train.py]; torchrun starts it on every GPU. Required, except
    for `kind: raycluster`, which runs none."""
    args: list[Arg] = []
    """Arguments for the program."""
    env: list[EnvVar] = []
    """Extra environment variables."""
    launcher: Literal["torchrun", "none"] = "torchrun"
    """`torchrun` wraps the command with rendezvous flags; `none` runs it as is (env still set)."""
    priority: DnsSubdomain | None = None
    """WorkloadPriorityClass; defaults to the team's defaultPriority."""
    max_restarts: int = Field(default=3, ge=0, le=100, strict=True)
    """How often the whole JobSet is recreated after a failure (`kind: job`: how often each node's pod
    is retried); a disruption (a drained or lost node, a preemption) is not counted."""
    fail_fast_exit_codes: list[Annotated[int, Field(ge=1, le=255, strict=True)]] | None = None
    """Exit codes of the container that mean a bug, not a fault: the JobSet fails at once instead of
    restarting. Default: `[2, 126, 127]` with torchrun (which exits 1 whenever any worker fails,
    node loss and NCCL errors included, so 1 is refused there), `[1, 2, 126, 127]` without."""
    shared_memory: Quantity = "64Gi"
    """Size of /dev/shm (a memory-backed volume) for data loaders and NCCL."""
    master_port: int = Field(default=29500, ge=1024, le=65535, strict=True)
    """Rendezvous port on rank 0."""
    topology: TopologyPreference | None = None
    """Optional topology-aware placement (the pool needs topologyLevels)."""
    leader: Leader | None = None
    """Optional separate leader replicated job for rank 0."""
    port: int | None = Field(default=None, ge=1, le=65535, strict=True)
    """`kind: deployment` and `leaderworkerset` only: the port the server listens on, exposed by a
    ClusterIP Service named after the job (port name `serving`; a LeaderWorkerSet's leaders serve it)."""
    replicas: int | None = Field(default=None, ge=1, le=1000, strict=True)
    """`kind: leaderworkerset` only: how many groups of `nodes` pods serve (default 1)."""
    termination_grace_period_seconds: int = Field(default=KUBERNETES_GRACE_SECONDS, ge=0, le=86400, strict=True)
    """Seconds between SIGTERM and SIGKILL when a pod is stopped (preemption, eviction, a drained
    node): time for a checkpoint-on-SIGTERM handler to save. Kubernetes' default is 30."""
    max_execution_time: ExecutionTime | None = None
    """Longest the job may run once admitted, e.g. `72h`: Kueue then evicts and deactivates it
    (label `kueue.x-k8s.io/max-exec-time-seconds`); time spent admitted before a requeue counts."""

    @property
    def max_execution_seconds(self) -> int | None:
        """`maxExecutionTime` in seconds, as Kueue's label takes it."""
        return None if self.max_execution_time is None else int(seconds(self.max_execution_time))

    def on_cpu_pool(self, cluster: ClusterConfig) -> bool:
        """Whether the profile is CPU-only: its `pool` names the cluster's `cpuPool`."""
        return cluster.cpu_pool is not None and self.pool == cluster.cpu_pool.name

    def gpus_in(self, pool: NodePool) -> int:
        """GPUs per pod on `pool`: the profile's `gpusPerNode`, or the pool's GPUs per node."""
        return self.gpus_per_node if self.gpus_per_node is not None else pool.gpu.per_node

    @property
    def exit_codes(self) -> list[int]:
        """The fail-fast exit codes in force: the profile's, or the launcher's default."""
        if self.fail_fast_exit_codes is not None:
            return sorted(set(self.fail_fast_exit_codes))
        return list(DEFAULT_EXIT_CODES[self.launcher])
