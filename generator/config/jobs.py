"""`jobProfiles` in team files: ready-to-run multi-node training jobs for a team's queue."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictStr

from generator.config.base import ConfigModel
from generator.config.types import Count, DnsSubdomain, LabelKey, Quantity

# Profile names become JobSet names, which must be DNS-1035 labels (start with a letter).
PROFILE_NAME = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
IMAGE = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$"
Arg = Annotated[StrictStr, Field(max_length=4096, pattern=r"^[^\x00]*$")]


class TopologyPreference(ConfigModel):
    """Topology-aware scheduling: keep all of the job's nodes within one topology domain."""

    mode: Literal["required", "preferred"]
    """`required` waits until one domain has room; `preferred` packs tightly but may spread."""
    level: LabelKey
    """Node label of the domain, one of the pool's topologyLevels (e.g. cloud.provider.com/topology-block)."""


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
    """A multi-node training job template: rendered as a JobSet and a SkyPilot task."""

    name: StrictStr = Field(pattern=PROFILE_NAME, max_length=63)
    """Profile name: the JobSet name of the template (a DNS-1035 label: starts with a letter)."""
    cluster: StrictStr
    """Cluster to run in; the team needs a quota there."""
    pool: StrictStr
    """Node pool to run on; the team needs a quota in it."""
    nodes: int = Field(ge=1, le=4096, strict=True)
    """Number of nodes (pods), one torchrun agent each."""
    gpus_per_node: Count | None = None
    """GPUs per pod; defaults to the pool's GPUs per node."""
    image: StrictStr = Field(pattern=IMAGE)
    """Container image, ideally pinned by digest."""
    command: list[Arg] = Field(min_length=1)
    """The training program, e.g. [python, train.py]; torchrun starts it on every GPU."""
    args: list[Arg] = []
    """Arguments for the program."""
    env: list[EnvVar] = []
    """Extra environment variables."""
    launcher: Literal["torchrun", "none"] = "torchrun"
    """`torchrun` wraps the command with rendezvous flags; `none` runs it as is (env still set)."""
    priority: DnsSubdomain | None = None
    """WorkloadPriorityClass; defaults to the team's defaultPriority."""
    max_restarts: int = Field(default=3, ge=0, le=100, strict=True)
    """How often the whole JobSet is recreated after an infrastructure failure."""
    fail_fast_exit_codes: list[Annotated[int, Field(ge=1, le=255, strict=True)]] = [1, 2, 126, 127]
    """Exit codes that mean a bug in the program: the JobSet fails at once instead of restarting."""
    shared_memory: Quantity = "64Gi"
    """Size of /dev/shm (a memory-backed volume) for data loaders and NCCL."""
    master_port: int = Field(default=29500, ge=1024, le=65535, strict=True)
    """Rendezvous port on rank 0."""
    topology: TopologyPreference | None = None
    """Optional topology-aware placement (the pool needs topologyLevels)."""
    leader: Leader | None = None
    """Optional separate leader replicated job for rank 0."""
