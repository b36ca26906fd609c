"""`clusters/<name>.yaml`: one GPU cluster, its node pools, priorities and Kueue policy."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import (
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from generator import releases
from generator.config.base import ConfigModel
from generator.config.platform import GitOps, Health, Images, Monitoring, Operators
from generator.config.types import (
    ControllerName,
    Count,
    DnsLabel,
    DnsSubdomain,
    Framework,
    GoDuration,
    Int32,
    KubernetesVersion,
    KueueVersion,
    LabelKey,
    LabelValue,
    ParameterKey,
    ParameterValue,
    Quantity,
    Release,
    ResourceName,
    ResourcePrefix,
    ResourceWeight,
    SubjectName,
    Weight,
)
from generator.versions import component

PINNABLE = tuple(name for name in releases.table() if name != "kueue")
"""Components a cluster file's `versions` pins (Kueue's is `kueue.version`)."""

MIN_KUEUE = (0, 14)
V1BETA2_KUEUE = (0, 16)


def kueue_tuple(version: str) -> tuple[int, int, int]:
    """`v0.19.2` -> (0, 19, 2)."""
    major, minor, patch = version.lstrip("v").split(".")
    return int(major), int(minor), int(patch)


ReclaimPolicy = Literal["Never", "LowerPriority", "Any"]
BorrowPolicy = Literal["Never", "LowerPriority"]
WithinQueuePolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]


class BorrowWithinCohort(ConfigModel):
    """Whether a queue that borrows may preempt workloads in other queues of the cohort."""

    policy: BorrowPolicy = "Never"
    """`LowerPriority` lets a borrowing queue preempt lower-priority workloads of others."""
    max_priority_threshold: Int32 | None = None
    """Only workloads at or below this priority may be preempted while borrowing."""


class Preemption(ConfigModel):
    """Kueue ClusterQueue preemption policy, applied to every team queue of the cluster."""

    reclaim_within_cohort: ReclaimPolicy = "Any"
    """Whether a queue may preempt borrowers to get its own nominal quota back: `Any` from every
    borrower, `LowerPriority` only from borrowed work of lower priority (a borrower at the lender's
    priority or above keeps it until its jobs end), `Never` from none."""
    borrow_within_cohort: BorrowWithinCohort | None = None
    """Preemption while borrowing; not allowed together with `reclaimWithinCohort: Never`."""
    within_cluster_queue: WithinQueuePolicy = "LowerPriority"
    """Preemption among the workloads of one team queue."""


KUEUE_CHART_FRAMEWORKS: dict[tuple[int, int], tuple[str, ...]] = {
    # charts/kueue/values.yaml `integrations.frameworks` of the release (checked against the charts
    # in their Go modules by tests/test_kueue_policy.py); a release uses the entry at or below it.
    (0, 14): ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "jobset.x-k8s.io/jobset",
              "trainer.kubeflow.org/trainjob", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
              "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob",
              "workload.codeflare.dev/appwrapper"),
    (0, 16): ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "jobset.x-k8s.io/jobset",
              "trainer.kubeflow.org/trainjob", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
              "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob",
              "workload.codeflare.dev/appwrapper", "pod", "deployment", "statefulset",
              "leaderworkerset.x-k8s.io/leaderworkerset"),
    (0, 19): ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster",
              "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod",
              "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"),
}
MUTATING_POLICY_KUBERNETES = (1, 36)
CEL_CIDR_KUBERNETES = (1, 31)
"""From here admission policies may call CEL's cidr(): added to the CEL environment in 1.30, and the API
server checks a new expression against the previous minor's environment (k8s.io/apiserver v0.36.3
pkg/cel/environment/base.go:52-57 and 137-142), so a 1.30 server refuses a policy that calls it."""
"""The first Kubernetes minor that serves MutatingAdmissionPolicy without a feature gate."""
FLEETGEN_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "pod")
"""What fleetgen's own job templates and the health of its queues rely on."""
MULTIKUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
"""What a MultiKueue manager dispatches: its client on each worker watches every enabled
integration's kind and stays disconnected while one is not served there (the real Kueue v0.19.2
reported `no matches for kind "MPIJob"` for the chart's defaults); fleetgen installs JobSet on
every cluster and grants the manager these kinds on its workers."""

class WaitForPodsReady(ConfigModel):
    """All-or-nothing start of multi-node jobs (Kueue `waitForPodsReady`)."""

    timeout: GoDuration = "10m"
    """A job whose pods are not all ready this long after admission releases its quota and is requeued."""
    backoff_base_seconds: StrictInt = Field(default=60, ge=1, le=86400)
    """First requeue delay; it doubles on every further eviction."""
    backoff_max_seconds: StrictInt = Field(default=3600, ge=1, le=604800)
    """Longest requeue delay."""


class FlavorFungibility(ConfigModel):
    """Whether a job moves on to the team's next pool rather than borrow or preempt in the current
    one (Kueue `flavorFungibility`; pools are tried in the team's flavor order)."""

    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = "MayStopSearch"
    """`MayStopSearch` (Kueue's default): borrow in the first pool where the job fits by borrowing,
    even when it would fit in the team's own quota of a later pool. `TryNextFlavor`: use own quota
    in a later pool first; borrow only when no pool fits without."""
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = "TryNextFlavor"
    """`TryNextFlavor` (Kueue's default): try later pools before preempting in the current one.
    `MayStopSearch`: preempt in the first pool where preemption makes the job fit."""
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None
    """When every pool needs borrowing or preemption, which to prefer (Kueue v0.15 and later; both
    `when` keys must then be `TryNextFlavor`, as Kueue's own validation requires)."""

    @model_validator(mode="after")
    def _preference_needs_try_next(self) -> FlavorFungibility:
        # kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go:455 (the CRD's CEL rule).
        if self.preference is not None and (self.when_can_borrow, self.when_can_preempt) != ("TryNextFlavor",) * 2:
            raise ValueError("preference can only be set when both whenCanBorrow and whenCanPreempt are "
                             "TryNextFlavor")
        return self


class TeamPolicy(ConfigModel):
    """What a team file's `policy` may choose for its own queue in this cluster. The cluster's own
    value of each setting is always allowed. Settings that only order or preempt the team's own work
    (queueing strategy, preemption within its queue, never being preempted) are open to every team
    unless narrowed here; settings that preempt other teams' work (`reclaimWithinCohort`,
    `borrowWithinCohort`) are closed unless listed here."""

    queueing_strategy: list[QueueingStrategy] = ["BestEffortFIFO", "StrictFIFO"]
    """Queueing strategies a team may choose (only its own queue's order)."""
    within_cluster_queue: list[WithinQueuePolicy] = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
    """`withinClusterQueue` values a team may choose (only its own workloads)."""
    reclaim_within_cohort: list[ReclaimPolicy] = []
    """`reclaimWithinCohort` values a team may choose besides the cluster's: how it takes lent quota
    back from other teams' borrowed work."""
    borrow_within_cohort: list[BorrowPolicy] = []
    """`borrowWithinCohort.policy` values a team may choose besides the cluster's: whether it
    preempts other teams' work of lower priority while borrowing."""
    never_preempted: StrictBool = True
    """Whether a team may declare `policy.neverPreempted` (it then never borrows here)."""
    max_termination_grace_period_seconds: StrictBool = True
    """Whether a team may set its own `policy.maxTerminationGracePeriodSeconds`, below the cluster's
    `kueue.maxTerminationGracePeriodSeconds` (never above it): a shorter stop for its own pods only."""


SHARED_QUEUE_PREFIX = "shared-"


class AdmissionFairSharing(ConfigModel):
    """Pools shared by recent usage instead of per-team quota (Kueue's Admission Fair Sharing).

    Each listed pool gets one ClusterQueue, `shared-<pool>`, holding all of its GPUs, and each team
    that lists the pool in its quotas (with `gpus: 0`) a LocalQueue `<team>-<pool>` on it, in the
    team's first namespace. When jobs wait, Kueue admits first the one whose team has used least in
    the recent past (its LocalQueue's usage, decayed with `usageHalfLifeTime`, divided by the team's
    `usageWeight`). The cost: no team has a guarantee in these pools, so none is taken back by
    preemption either; only priority preempts there (`withinClusterQueue`)."""

    pools: list[DnsLabel] = Field(min_length=1)
    """GPU pools of the cluster shared by usage. No team or cohort holds GPUs in them."""
    usage_half_life_time: GoDuration = "24h"
    """After this long a team's past usage counts half (Kueue `usageHalfLifeTime`); above 0."""
    usage_sampling_interval: GoDuration = "5m"
    """How often Kueue folds what each team holds into its usage (Kueue `usageSamplingInterval`).
    Between samples, each admission adds its share at once (Kueue's entry penalty)."""
    within_cluster_queue: Literal["Never", "LowerPriority"] = "LowerPriority"
    """Preemption inside a shared pool's queue, across the teams in it: `LowerPriority`, a job
    preempts any team's jobs of lower priority, those of the team that used most first; `Never`.
    Not `LowerOrNewerEqualPriority`: an older job would preempt the newer one Kueue admitted first
    for its team's lower usage, putting age back above usage (kueue v0.19.2
    pkg/scheduler/preemption/common/preemption_policy.go:40-48)."""
    resource_weights: dict[ResourceName, ResourceWeight] | None = None
    """How much each resource counts in usage (Kueue `resourceWeights`); omitted: 1 for each shared
    pool's GPU resource, 0 for cpu and memory. Kueue's own default counts every resource 1, which
    ranks teams by memory bytes."""

    @field_validator("usage_half_life_time", "usage_sampling_interval")
    @classmethod
    def _above_zero(cls, value: str) -> str:
        # Kueue takes a half-life of 0 as "forget at once", which leaves nothing to rank by.
        if not re.search(r"[1-9]", value):
            raise ValueError(f"{value!r} is zero: give a duration above 0, e.g. 24h")
        return value

    @property
    def measure(self) -> str:
        """What a team's usage counts, in a few words."""
        return "GPU use" if self.resource_weights is None else "use (as resourceWeights count it)"

    @staticmethod
    def cluster_queue(pool: str) -> str:
        """The ClusterQueue of a shared pool."""
        return f"{SHARED_QUEUE_PREFIX}{pool}"

    @staticmethod
    def local_queue(team: str, pool: str) -> str:
        """A team's LocalQueue on a shared pool (names differ per team: Kueue ranks preemption
        candidates by usage only between LocalQueues of different names, kueue v0.19.2
        pkg/scheduler/preemption/common/ordering.go:86-92)."""
        return f"{team}-{pool}"


class Kueue(ConfigModel):
    """The Kueue release installed in the cluster and its queueing policy."""

    version: KueueVersion = f"v{component('kueue').version}"
    """Kueue release: one of fleetgen's table (docs/reference/releases.md), which goes with the cluster's other
    releases (`versions`). v0.16 and later get `kueue.x-k8s.io/v1beta2` objects."""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    """Order in which each team queue admits its workloads (a team's `policy` may choose its own)."""
    preemption: Preemption = Preemption()
    """Preemption policy of every team ClusterQueue (a team's `policy` may choose its own, within
    `teamPolicy`)."""
    team_policy: TeamPolicy = TeamPolicy()
    """What teams may choose for their own queue here (team files' `policy`)."""
    fair_sharing: bool | None = None
    """Kueue fair sharing. Unset: on when a team or cohort of the cluster sets a fairSharingWeight.
    `false` refuses weights (they would do nothing). `true` also accepts `borrowWithinCohort`,
    which fair sharing then ignores (see the check's message)."""
    integrations: list[Framework] | None = None
    """Kueue integrations (`integrations.frameworks`). Unset: the Kueue chart's own defaults for
    the release plus fleetgen's (JobSet, batch Job, PyTorchJob, pod), so Ray, TrainJob,
    LeaderWorkerSet, Deployment and StatefulSet jobs with a queue label are queued, not run
    unqueued. Set: exactly these, which must include `jobset.x-k8s.io/jobset` (the job templates).
    A MultiKueue manager: `batch/job` and JobSet, the kinds it dispatches, and with `operators.ray`
    the Ray kinds."""
    manage_jobs_without_queue_name: bool = False
    """Kueue's `manageJobsWithoutQueueName`. In team namespaces it changes little: Kueue already gives
    every job, Pod and Deployment without a queue label the namespace's `default` LocalQueue (which
    fleetgen always renders), so none bypasses the quotas either way."""
    exclude_resource_prefixes: list[ResourcePrefix] = ["ephemeral-storage", "rdma/"]
    """Resources Kueue does not account: a request for a resource no ClusterQueue covers would
    otherwise block admission for ever (RDMA NICs, local scratch)."""
    wait_for_pods_ready: WaitForPodsReady = WaitForPodsReady()
    """All-or-nothing start of multi-node jobs."""
    flavor_fungibility: FlavorFungibility | None = None
    """Default `flavorFungibility` of every team queue (a team's own key overrides it); unset:
    Kueue's defaults."""
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Pools shared by recent usage, with no per-team guarantee (Kueue v0.15 or later)."""
    max_termination_grace_period_seconds: StrictInt = Field(default=300, ge=0, le=86400)
    """The reclaim deadline: the longest `terminationGracePeriodSeconds` a pod in a team namespace
    may have (a pod that sets none has Kubernetes' 30). When a team reclaims GPUs it lent, Kueue
    preempts the borrower's workload and stops its job at once, but the job's pods hold their GPUs
    until they have stopped, and the kubelet gives each pod its grace period before killing it: so
    the borrowed GPUs are back within this many seconds, plus Kueue's and the scheduler's reaction.
    Enforced by a ValidatingAdmissionPolicy on pods and on every kind that carries pod templates;
    a team's `policy` may choose less where `teamPolicy` allows it."""
    share_unallocated: bool = True
    """Put each pool's GPUs that no team holds (capacity minus team quotas, with their CPU and
    memory) in the root Cohort's quota, so teams with quota in the pool can borrow them. Without
    it no quota covers them and Kueue never admits work onto them."""

    @field_validator("version")
    @classmethod
    def _supported(cls, value: str) -> str:
        if kueue_tuple(value)[:2] < MIN_KUEUE:
            oldest = f"v{MIN_KUEUE[0]}.{MIN_KUEUE[1]}"
            raise ValueError(f"Kueue {value} is older than {oldest}, the oldest fleetgen supports")
        return value

    @field_validator("integrations")
    @classmethod
    def _jobset_kept(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and "jobset.x-k8s.io/jobset" not in value:
            raise ValueError("integrations must include jobset.x-k8s.io/jobset: fleetgen's job templates are "
                             "JobSets, which would otherwise run without a queue")
        return value

    @property
    def frameworks(self) -> list[str]:
        """The integrations the Kueue configuration enables."""
        if self.integrations is not None:
            return list(dict.fromkeys(self.integrations))
        minor = kueue_tuple(self.version)[:2]
        chart = KUEUE_CHART_FRAMEWORKS[max(k for k in KUEUE_CHART_FRAMEWORKS if k <= minor)]
        return list(dict.fromkeys([*chart, *FLEETGEN_FRAMEWORKS]))

    @property
    def api_version(self) -> str:
        """`kueue.x-k8s.io/v1beta2` from v0.16 on, `v1beta1` before."""
        return "kueue.x-k8s.io/v1beta2" if kueue_tuple(self.version)[:2] >= V1BETA2_KUEUE else "kueue.x-k8s.io/v1beta1"


class Gpu(ConfigModel):
    """The GPUs every node of a pool carries."""

    product: LabelValue
    """GPU model as the GPU operator labels it (`nvidia.com/gpu.product`), e.g. NVIDIA-H100-80GB-HBM3."""
    per_node: StrictInt = Field(ge=1, le=64)
    """GPUs on each node."""
    resource: ResourceName = "nvidia.com/gpu"
    """Extended resource name the device plugin advertises."""


class Taint(ConfigModel):
    """A taint every node of the pool carries; jobs admitted to the pool get a matching toleration."""

    key: LabelKey
    """Taint key."""
    value: LabelValue | None = None
    """Taint value; omit for a key-only taint."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    """Taint effect."""


class NodePool(ConfigModel):
    """A group of identical GPU nodes; becomes one Kueue ResourceFlavor."""

    name: DnsLabel
    """Pool name, used as the ResourceFlavor name and as the key in team quotas."""
    gpu: Gpu
    """GPUs per node."""
    nodes: Count
    """Number of nodes in the pool (its GPU capacity is nodes x gpu.perNode)."""
    cpu_per_node: Quantity
    """Allocatable CPU of one node; team CPU quota is derived from GPUs in this ratio."""
    memory_per_node: Quantity
    """Allocatable memory of one node; team memory quota is derived from GPUs in this ratio."""
    node_labels: dict[LabelKey, LabelValue] = {}
    """Labels that select the pool's nodes (ResourceFlavor nodeLabels, at most 8)."""
    taints: list[Taint] = []
    """Taints of the pool's nodes (ResourceFlavor nodeTaints and tolerations, at most 8)."""
    topology_levels: list[LabelKey] | None = None
    """Node labels from the widest to the narrowest topology domain, e.g.
    [topology.kubernetes.io/zone, kubernetes.io/hostname]; emits a Kueue Topology for the pool."""

    @property
    def gpus(self) -> int:
        """GPU capacity of the pool."""
        return self.nodes * self.gpu.per_node

    @model_validator(mode="after")
    def _topology_needs_labels(self) -> NodePool:
        if self.topology_levels is not None and not self.node_labels:
            raise ValueError("a pool with topologyLevels needs at least one nodeLabel (Kueue requires it)")
        return self


class CpuLimit(ConfigModel):
    """The most of the CPU pool one team's CPU-only jobs hold at once."""

    cpu: Quantity
    """CPU, e.g. 64 or 500m."""
    memory: Quantity
    """Memory, e.g. 256Gi."""


class CpuPool(ConfigModel):
    """Nodes without GPUs for the CPU-only jobs of team namespaces.

    Its ResourceFlavor is the first flavor of every team's ClusterQueue, with no quota of its own:
    the root cohort lends the whole pool. Kueue takes the first flavor that fits, so a CPU-only job
    (with the team's queue label, or none: the namespace's `default` LocalQueue is on the same
    queue) runs here while the pool has room for it within the team's limit; a job requesting GPUs
    never fits this flavor and goes on to the team's GPU pools. When the pool cannot take a CPU-only
    job, Kueue tries the team's GPU pools next, where it uses the CPU share of the team's own GPU
    quota (`explain team` says so). Without a CPU pool, CPU-only jobs run on GPU nodes (a warning)."""

    name: DnsLabel = "cpu"
    """ResourceFlavor name; must differ from every GPU pool's."""
    nodes: Count
    """Number of nodes; their CPU and memory are lent to the teams' CPU-only jobs by the root cohort."""
    cpu_per_node: Quantity
    """Allocatable CPU of one node."""
    memory_per_node: Quantity
    """Allocatable memory of one node."""
    node_labels: dict[LabelKey, LabelValue] = {}
    """Labels that select the pool's nodes (ResourceFlavor nodeLabels)."""
    taints: list[Taint] = []
    """Taints of the pool's nodes (ResourceFlavor nodeTaints and tolerations)."""
    team_limit: CpuLimit | None = None
    """At most this much of the pool for one team's CPU-only jobs at a time (the borrowingLimit of
    the pool's flavor in the team's queue); omitted: a team may use the whole pool while others leave
    it idle. A team with `policy.neverPreempted` holds its limit as quota instead (it never borrows),
    and the root cohort lends the rest; such teams together may hold at most the pool."""
    team_limits: dict[DnsLabel, CpuLimit] = {}
    """Per team (team name -> limit), instead of `teamLimit`."""

    def limit_for(self, team: str) -> CpuLimit | None:
        """The most of the pool one team's jobs may hold, if limited."""
        return self.team_limits.get(team, self.team_limit)


PROVISIONING_CLASSES: dict[str, str] = {
    # k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240830133931-adfbe7e45277
    # provisioningrequest/autoscaling.x-k8s.io/v1/types.go:200,203 (the cluster autoscaler's own classes).
    "check-capacity.autoscaling.x-k8s.io": "the cluster autoscaler admits the job once its pods fit on the "
                                           "nodes that exist; it reserves nothing and scales nothing up",
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io": "the cluster autoscaler adds the nodes for all of the "
                                                        "job's pods at once (or none) before it is admitted",
    # GKE's Dynamic Workload Scheduler (its own autoscaler implements the class).
    "queued-provisioning.gke.io": "GKE's Dynamic Workload Scheduler obtains the nodes, then the job is admitted",
}
"""ProvisioningRequest classes an autoscaler is known to serve -> what happens to a job."""

KUEUE_CONTROLLERS = {"kueue.x-k8s.io/provisioning-request": "declare it with provisioningRequest",
                     "kueue.x-k8s.io/multikueue": "declare `multikueue` in the manager cluster's file"}
"""Controller names Kueue itself serves: not declarable as a plain controllerName."""


class ProvisioningRetry(ConfigModel):
    """How Kueue retries a ProvisioningRequest that failed or whose booking expired (`retryStrategy`)."""

    limit: StrictInt = Field(default=3, ge=0, le=1000)
    """Retries before the job is deactivated (`backoffLimitCount`); 0: the first failure deactivates it."""
    backoff_base_seconds: StrictInt = Field(default=60, ge=1, le=86400)
    """Wait before the first retry; it doubles on every further one (the job's quota is released meanwhile)."""
    backoff_max_seconds: StrictInt = Field(default=1800, ge=1, le=604800)
    """Longest wait between two retries."""

    @model_validator(mode="after")
    def _max_at_least_base(self) -> ProvisioningRetry:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError(f"backoffMaxSeconds ({self.backoff_max_seconds}) is less than backoffBaseSeconds "
                             f"({self.backoff_base_seconds})")
        return self


class ProvisioningRequest(ConfigModel):
    """Ask the cluster autoscaler for the job's nodes before Kueue admits it (Kueue's
    ProvisioningRequest admission check; the cluster needs an autoscaler that serves
    `autoscaling.x-k8s.io` ProvisioningRequests, installed before Kueue starts)."""

    class_name: DnsSubdomain
    """ProvisioningRequest class: `check-capacity.autoscaling.x-k8s.io` (admit once the pods fit on
    existing nodes), `best-effort-atomic-scale-up.autoscaling.x-k8s.io` (scale up for all pods at
    once), `queued-provisioning.gke.io` (GKE Dynamic Workload Scheduler) or your autoscaler's own."""
    parameters: dict[ParameterKey, ParameterValue] = Field(default={}, max_length=100)
    """Parameters of the class, e.g. `ValidUntilSeconds: "3600"` for the atomic scale-up. A job may
    add its own with annotations `provreq.kueue.x-k8s.io/<parameter>`."""
    managed_resources: list[ResourceName] | None = Field(default=None, min_length=1, max_length=100)
    """Resources the autoscaler provisions; a job requesting none of them passes the check at once.
    Omitted: the GPU resources of the check's pools, so CPU-only work never waits for nodes."""
    retry: ProvisioningRetry = ProvisioningRetry()
    """Retries after a failed or expired request (Kueue's defaults: 3, 60 s, 1800 s)."""
    pod_set_merge_policy: Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"] | None = None
    """Merge a job's identical pod groups into one request entry (Kueue's `podSetMergePolicy`);
    omitted: one entry per pod group."""


class AdmissionCheck(ConfigModel):
    """A condition a job must meet, after its quota is reserved, before Kueue admits it (Kueue
    AdmissionCheck). Applied to every team queue with quota in the check's pools."""

    name: DnsLabel
    """AdmissionCheck name (also names its ProvisioningRequestConfig)."""
    pools: list[DnsLabel] | None = Field(default=None, min_length=1)
    """Pools whose jobs need the check (the queue's `onFlavors`); omitted: every GPU pool."""
    teams: list[DnsLabel] | None = Field(default=None, min_length=1)
    """Teams whose queues get the check; omitted: every team with quota in the check's pools, and the
    queues of pools shared by usage among them (a check that lists teams cannot name those)."""
    provisioning_request: ProvisioningRequest | None = None
    """Kueue's own check: a ProvisioningRequest to the cluster autoscaler."""
    controller_name: ControllerName | None = None
    """Or: the controller name of a check run by a controller of your own (e.g.
    `acme.example/budget-approval`), which sets the check's state on each Workload."""

    @model_validator(mode="after")
    def _one_kind(self) -> AdmissionCheck:
        if (self.provisioning_request is None) == (self.controller_name is None):
            raise ValueError("set exactly one of provisioningRequest and controllerName")
        if self.controller_name in KUEUE_CONTROLLERS:
            raise ValueError(f"controllerName {self.controller_name} is Kueue's own: "
                             f"{KUEUE_CONTROLLERS[self.controller_name]}")
        return self

    @property
    def controller(self) -> str:
        """The AdmissionCheck's `controllerName`."""
        return self.controller_name or "kueue.x-k8s.io/provisioning-request"


class Priority(ConfigModel):
    """A Kueue WorkloadPriorityClass."""

    name: DnsSubdomain
    """Priority class name, used in job labels `kueue.x-k8s.io/priority-class`."""
    value: Int32
    """Priority value; higher preempts lower."""
    description: StrictStr | None = None
    """Human description (at most 2048 characters)."""


class CohortQuota(ConfigModel):
    """What an org unit (cohort) holds in one pool beyond its teams' quotas, and its limits."""

    gpus: Count = 0
    """GPUs the cohort itself holds: a shared reserve its teams (and child cohorts) may borrow,
    counted against the pool's capacity like a team's quota."""
    borrowing_limit: Count | None = None
    """At most this many GPUs the cohort's teams together borrow from outside the cohort; omitted:
    no limit."""
    lending_limit: Count | None = None
    """At most this many GPUs of the cohort (its own and its teams') lent outside it; omitted: no
    limit."""


class Cohort(ConfigModel):
    """An org unit in the cluster's cohort tree; teams join one with their `cohort` key."""

    name: DnsLabel
    """Cohort name."""
    parent: DnsLabel | None = None
    """Parent cohort; omitted means the cluster's root cohort (named after the cluster)."""
    fair_sharing_weight: Weight | None = None
    """Fair-sharing weight of the cohort against its siblings."""
    quotas: dict[DnsLabel, CohortQuota] = {}
    """Per pool: GPUs the cohort holds for its teams and limits on what it borrows and lends
    (Kueue Cohort `resourceGroups`; CPU and memory follow in the pool's per-node ratio)."""


class MultiKueue(ConfigModel):
    """This cluster as a MultiKueue manager: teams submit here, and Kueue dispatches each job to a
    worker cluster that admits it (Kueue MultiKueue). A manager has no GPU nodes of its own: its
    pools are its workers' (by name), and a team's quota here bounds how many of its GPUs are
    dispatched at once."""

    role: Literal["manager"]
    """`manager` (workers are ordinary clusters, named here)."""
    workers: list[DnsLabel] = Field(min_length=1)
    """Clusters of this fleet that run the dispatched jobs; a team's jobs go to those where it has quota."""
    worker_lost_timeout: GoDuration = "15m"
    """How long a job admitted on a worker the manager lost contact with stays admitted here."""
    gc_interval: GoDuration = "1m"
    """How often the manager deletes what it created on workers and no longer needs."""

    @field_validator("workers")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        twice = sorted({w for w in value if value.count(w) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed more than once")
        return value

    def workers_for(self, quota_clusters: Iterable[str]) -> list[str]:
        """The workers a team's jobs are dispatched to: those among the clusters it has quota in."""
        have = set(quota_clusters)
        return [w for w in self.workers if w in have]

    @staticmethod
    def check_name(team: str) -> str:
        """The AdmissionCheck (and MultiKueueConfig) that dispatches one team's jobs."""
        return f"multikueue-{team}"

    @staticmethod
    def secret(worker: str) -> str:
        """The kubeconfig Secret (in kueue-system on the manager) for one worker, created out of band."""
        return f"multikueue-{worker}"


TEAM_PLACEHOLDER = "{team}"
DEFAULT_NAMESPACE_PATTERN = "{team}(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?"
_PURPOSE = re.compile(DEFAULT_NAMESPACE_PATTERN.removeprefix(TEAM_PLACEHOLDER))
"""The default pattern after its leading `{team}`: a regular expression of its own, compiled once."""


class NamespacePolicy(ConfigModel):
    """Which namespaces team files may claim here. A name must match `pattern` (with the team's
    name for `{team}`) or be in `allowed`; the built-in list of platform and add-on namespaces
    (kube-*, gatekeeper-system, kyverno, calico-system, karpenter, ...) is refused whatever this says."""

    pattern: StrictStr = Field(default=DEFAULT_NAMESPACE_PATTERN, max_length=256)
    """Regular expression a whole namespace name must match; `{team}` stands for the team's name.
    The default admits the team's name and `<team>-<purpose>`."""
    allowed: list[DnsLabel] = []
    """Further exact names a team may claim (each by one team only), e.g. a shared `notebooks`."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value.replace(TEAM_PLACEHOLDER, "team"))
        except re.error as exc:
            raise ValueError(f"is not a regular expression: {exc}") from None
        return value

    def admits(self, team: str, namespace: str) -> bool:
        """Does the policy let `team` claim `namespace`?"""
        if namespace in self.allowed:
            return True
        if self.pattern == DEFAULT_NAMESPACE_PATTERN:  # the team's name, then the rest: no pattern per team
            return namespace.startswith(team) and _PURPOSE.fullmatch(namespace, len(team)) is not None
        return re.fullmatch(self.pattern.replace(TEAM_PLACEHOLDER, re.escape(team)), namespace) is not None


PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
POD_SECURITY_ORDER: dict[str, int] = {"restricted": 0, "baseline": 1, "privileged": 2}


class Egress(ConfigModel):
    """Where team pods may connect outside their own namespaces (besides cluster DNS)."""

    allow: list[StrictStr] = ["0.0.0.0/0", "::/0"]
    """CIDRs team pods may reach (NetworkPolicy ipBlock); `[]` allows nothing beyond the namespace and DNS.
    No NetworkPolicy in a team namespace may allow egress beyond it (`fleetgen-team-egress`)."""
    deny: list[StrictStr] = ["169.254.169.254/32", "fd00:ec2::254/128"]
    """CIDRs carved out of `allow` (ipBlock except): by default the cloud metadata endpoints, which
    hand out node credentials. Add the cluster's pod and service CIDRs to keep team pods from
    reaching other namespaces through a CNI that matches pod IPs by ipBlock. A member's own
    NetworkPolicy allowing any of it is refused; the CNI's cluster-wide policies (AdminNetworkPolicy,
    Cilium's or Calico's) are the second wall (docs/how-to/tenancy.md)."""

    @field_validator("allow", "deny")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        import ipaddress

        for value in values:
            try:
                ipaddress.ip_network(value, strict=True)
            except ValueError as exc:
                raise ValueError(f"{value!r} is not a CIDR: {exc}") from None
        return values


class Network(ConfigModel):
    """NetworkPolicies of the team namespaces: deny by default, then what jobs need."""

    isolate: StrictBool = True
    """Render the policy: traffic only within the namespace (rendezvous, NCCL bootstrap), to the
    cluster DNS, and out to `egress`. Enforced by the cluster's CNI (one that implements NetworkPolicy)."""
    egress: Egress = Egress()
    """Where team pods may connect outside the cluster."""


class Tenancy(ConfigModel):
    """What team files may grant in this cluster, beyond their own people."""

    namespaces: NamespacePolicy = NamespacePolicy()
    """Which namespaces teams may claim (and be granted `edit` in)."""
    pod_security: Literal["baseline", "restricted"] = "baseline"
    """Pod Security Standard enforced on every team namespace (`baseline`: no privileged pods, host
    namespaces, host paths or added capabilities; `restricted`: also non-root, no privilege escalation).
    Pods are also warned and audited against `restricted`."""
    pod_security_exceptions: dict[DnsLabel, PodSecurityLevel] = {}
    """Per team, another level for its namespaces, e.g. `{infra-tests: privileged}`: the only way a
    team gets a looser level, and it lives in the cluster file, which the platform team owns."""
    network: Network = Network()
    """Network isolation of the team namespaces."""
    default_container_requests: dict[Literal["cpu", "memory"], Quantity] = {"cpu": "100m", "memory": "256Mi"}
    """LimitRange default requests for containers that state none, so Kueue and the scheduler count them."""
    allowed_system_subjects: list[SubjectName] = []
    """`system:` users and groups that team files may list as members here, exactly as written
    (e.g. `system:serviceaccount:ci:runner`). Every other `system:` subject is refused: they name
    Kubernetes itself (`system:authenticated` is everyone with a login, `system:nodes` every kubelet)."""
    members_read_nodes: StrictBool = False
    """Let team members get, list and watch Nodes and RuntimeClasses, cluster-wide: SkyPilot needs both (its
    `sky check` lists the Nodes to find GPUs and turns Kubernetes off without; `sky launch` lists
    RuntimeClasses before it makes a pod). RBAC cannot narrow a read to some fields: members then see every
    Node's name, labels, capacity and allocatable, taints, conditions and addresses, and from its status the
    images of the pods that ran there (other teams' registries and tags) and the volumes attached, though not
    the pods themselves; and the names of the container runtimes (docs/reference/member-rights.md)."""
    publish_fleet: bool = True
    """Publish the fleet files this cluster is rendered from in the ConfigMap `kube-public/fleetgen-fleet`,
    readable by every authenticated user (`system:authenticated`), so that the job SDK can define and
    check jobs from a notebook without a checkout of the fleet repository. It holds the cluster file and,
    for each team with a quota here, its file with only this cluster's quotas and profiles and without
    its members: names of teams, namespaces, owners, quotas, priorities and job profiles (images and
    commands included). `false` publishes nothing; the SDK then needs a checkout (`root=`)."""


class ClusterConfig(ConfigModel):
    """A GPU cluster: node pools, priorities and the Kueue policy applied to every team queue."""

    name: DnsLabel
    """Cluster name; must equal the file name without `.yaml`."""
    kubernetes_version: KubernetesVersion
    """Kubernetes minor version of the cluster's API server, e.g. "1.36", 1.30 or later: picks the
    built-in object schemas, the Pod Security version and whether team defaults can be applied by a
    MutatingAdmissionPolicy (1.36 on)."""
    kueue: Kueue = Kueue()
    """Kueue release and queueing policy."""
    overcommit: float = Field(default=1.0, gt=0, le=100)
    """Per pool, the sum of team GPU quotas may be at most the pool's GPUs times this factor."""
    node_pools: list[NodePool] = []
    """GPU node pools; the order is Kueue's flavor preference order. Required, except on a
    MultiKueue manager, whose pools are its workers'."""
    cpu_pool: CpuPool | None = None
    """Nodes without GPUs where the teams' CPU-only jobs run first (a flavor of every team's queue)."""
    priorities: list[Priority] = []
    """Workload priority classes of the cluster."""
    cohorts: list[Cohort] = []
    """Optional cohort tree below the root cohort (for nested org units)."""
    gitops: GitOps
    """How platform components are installed (Argo CD or Flux), and from which repository. Required."""
    images: Images | None = None
    """Where fleetgen's own images come from; required where the cluster runs them (the health reconciler,
    a journald kernel-log collector)."""
    monitoring: Monitoring = Monitoring()
    """GPU observability stack, alerts and dashboards."""
    health: Health = Health()
    """GPU health reconciler deployment and policy."""
    tenancy: Tenancy = Tenancy()
    """Limits on what team files may grant in this cluster."""
    admission_checks: list[AdmissionCheck] = []
    """Checks a job must pass before admission (e.g. a ProvisioningRequest for its nodes), per pool."""
    multikueue: MultiKueue | None = None
    """Make this cluster a MultiKueue manager over worker clusters of the fleet."""
    operators: Operators = Operators()
    """Job operators the platform installs (KubeRay, Kubeflow Trainer), beyond JobSet."""
    versions: dict[StrictStr, Release] = {}
    """The release of a platform component this cluster runs, where it is not the fleet's default
    (`generator/versions.yaml`), by component: `jobset`, `kubeflow-trainer`, `kuberay-operator`, `lws`
    (Kueue's is `kueue.version`). Each must be a release in fleetgen's table (`generator/releases.yaml`,
    docs/reference/releases.md) that works with the cluster's other releases and Kubernetes minor; the
    render names those that would, and the preview gives each change its own risk line."""
    _managers: dict[str, tuple[tuple[str, ...] | None, Operators]] = PrivateAttr(default_factory=dict)
    """MultiKueue managers that list this cluster as a worker, each with what decides the Kueue
    integrations it dispatches: its `kueue.integrations` and its operators (set when the fleet is loaded;
    generator.kinds.dispatched_frameworks reads them)."""

    @field_validator("versions")
    @classmethod
    def _pinnable(cls, value: dict[str, str]) -> dict[str, str]:
        if "kueue" in value:
            raise ValueError("Kueue's release is kueue.version: move it there")
        unknown = sorted(set(value) - set(PINNABLE))
        if unknown:
            raise ValueError(f"no component is named {', '.join(map(repr, unknown))}: a cluster file pins "
                             f"{', '.join(PINNABLE)} here")
        return value

    def pin(self, component_name: str) -> str:
        """The release of `component_name` this cluster runs: its file's, else the fleet default; spelled as
        fleetgen's table spells it (`v0.9.0` for LeaderWorkerSet, whose chart keeps the `v`), where it knows it."""
        if component_name == "kueue":
            return self.kueue.version
        version = self.versions.get(component_name, component(component_name).version)
        known = releases.release(component_name, version)
        return known.version if known else version

    @property
    def managers(self) -> tuple[str, ...]:
        """MultiKueue managers dispatching to this cluster, sorted."""
        return tuple(sorted(self._managers))

    def dispatched_by(self, manager: str) -> tuple[tuple[str, ...] | None, Operators]:
        """What decides the Kueue integrations `manager` dispatches here: its `kueue.integrations` (None:
        unset) and its operators."""
        return self._managers.get(manager, ((), Operators()))

    def with_managers(self, managers: dict[str, tuple[tuple[str, ...] | None, Operators]]) -> ClusterConfig:
        """A copy that knows the managers dispatching to it, and what each dispatches."""
        copy = self.model_copy()
        copy._managers = dict(sorted(managers.items()))
        return copy

    @property
    def runs_own_images(self) -> list[str]:
        """What in this cluster runs fleetgen's own images (so needs `images`)."""
        out = []
        if self.monitoring.enabled and self.health.enabled:
            out.append("the health reconciler")
        if self.monitoring.enabled and self.monitoring.kernel_logs.source == "journald":
            out.append("the journald kernel-log collector")
        return out

    @model_validator(mode="after")
    def _images_where_needed(self) -> ClusterConfig:
        users = self.runs_own_images
        if self.images is None and users:
            raise ValueError(f"images is required: {' and '.join(users)} {'run' if len(users) > 1 else 'runs'} "
                             "fleetgen's own images; "
                             "set images.registry to where .github/workflows/images.yml pushes them, e.g. "
                             "ghcr.io/<your-org>")
        return self

    @model_validator(mode="after")
    def _pools_or_workers(self) -> ClusterConfig:
        if self.multikueue is None and not self.node_pools:
            raise ValueError("nodePools is required: list the cluster's GPU node pools")
        if self.multikueue is not None:
            for key, value in (("nodePools", self.node_pools), ("cpuPool", self.cpu_pool),
                               ("admissionChecks", self.admission_checks)):
                if value:
                    raise ValueError(f"a MultiKueue manager has no {key}: its jobs run on its workers' pools")
        return self

    def pool(self, name: str) -> NodePool | None:
        """The node pool called `name`, if any."""
        return next((p for p in self.node_pools if p.name == name), None)

    @property
    def shared_pools(self) -> list[str]:
        """Pools shared by usage (`kueue.admissionFairSharing.pools`), in pool order."""
        afs = self.kueue.admission_fair_sharing
        listed = set(afs.pools) if afs else set()
        return [p.name for p in self.node_pools if p.name in listed]

    def queue_pools(self, pools: Iterable[str]) -> list[str]:
        """Of a team's pools here, those in its own ClusterQueue (not shared by usage)."""
        shared = set(self.shared_pools)
        return [p for p in pools if p not in shared]

    @property
    def cpu_pool_topology_aware(self) -> bool:
        """Whether the CPU pool's flavor is topology-aware (one level, the host): when every GPU pool
        is. Kueue places a job that asks for no topology by topology only in a ClusterQueue whose
        flavors are all topology-aware (kueue v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go:
        198-220); one flavor without a topology in such a queue leaves those jobs no GPU pool at all."""
        return self.cpu_pool is not None and bool(self.node_pools) and \
            all(p.topology_levels is not None for p in self.node_pools)

    def cpu_flavor_for(self, pools: list[str]) -> bool:
        """Whether the CPU pool's flavor goes into the queue of a team with quota in `pools`: not when
        it would be the one flavor without a topology in a queue that is otherwise topology-aware."""
        if self.cpu_pool is None:
            return False
        mine = [p for p in self.node_pools if p.name in pools]
        return self.cpu_pool_topology_aware or not mine or any(p.topology_levels is None for p in mine)

    @property
    def mutating_policies(self) -> bool:
        """Whether the API server serves MutatingAdmissionPolicy (admissionregistration.k8s.io/v1): GA and
        on by default from Kubernetes 1.36, off by default before (kubernetes v1.36.3
        pkg/features/kube_features.go:2270-2274)."""
        return self._minor >= MUTATING_POLICY_KUBERNETES

    @property
    def cel_cidr(self) -> bool:
        """Whether the cluster's admission policies may use CEL's CIDR library (CEL_CIDR_KUBERNETES)."""
        return self._minor >= CEL_CIDR_KUBERNETES

    @property
    def _minor(self) -> tuple[int, int]:
        major, minor = (int(x) for x in self.kubernetes_version.split("."))
        return major, minor

    def cpu_pool_passed_over(self) -> str:
        """Why CPU-only jobs skip the CPU pool under `whenCanBorrow: TryNextFlavor`, in one sentence
        for warnings and `explain`."""
        pool = self.cpu_pool.name if self.cpu_pool is not None else "cpu"
        return (f"CPU-only jobs prefer the CPU share of the team's GPU quota to cpuPool {pool}: all of the CPU "
                "pool is borrowed, and whenCanBorrow: TryNextFlavor looks for a flavor without borrowing first")

    def checks_for(self, team: str, pools: list[str]) -> list[tuple[AdmissionCheck, list[str] | None]]:
        """The admission checks of a team's queue with quota in `pools`: (check, the pools it runs
        for, in the cluster's pool order; None for all of the queue's pools)."""
        out: list[tuple[AdmissionCheck, list[str] | None]] = []
        for check in self.admission_checks:
            if check.teams is not None and team not in check.teams:
                continue
            if check.pools is None:
                out.append((check, None))
                continue
            on = [p.name for p in self.node_pools if p.name in pools and p.name in check.pools]
            if on:
                out.append((check, on))
        return out

    def shared_pool_checks(self, pool: str) -> list[AdmissionCheck]:
        """The admission checks of a pool shared by usage: those for every team (`teams` omitted) on it."""
        return [c for c in self.admission_checks if c.teams is None and (c.pools is None or pool in c.pools)]

    def check_reaches(self, check: AdmissionCheck, team: str, pools: list[str]) -> bool:
        """Whether `check` is on the queue of a team with quota in `pools`."""
        return any(c is check for c, _ in self.checks_for(team, pools))

    def check_resources(self, check: AdmissionCheck) -> list[str]:
        """The resources a ProvisioningRequest check manages: its own list, else its pools' GPUs."""
        request = check.provisioning_request
        if request is not None and request.managed_resources is not None:
            return list(dict.fromkeys(request.managed_resources))
        return list(dict.fromkeys(p.gpu.resource for p in self.node_pools
                                  if check.pools is None or p.name in check.pools))
