"""`teams/<name>.yaml`: one ML team, its people, namespaces and GPU quotas per cluster and pool."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, model_validator

from generator.config.base import ConfigModel
from generator.config.cluster import (
    AdmissionFairSharing,
    BorrowWithinCohort,
    ClusterConfig,
    FlavorFungibility,
    Preemption,
    QueueingStrategy,
    ReclaimPolicy,
    WithinQueuePolicy,
)
from generator.config.jobs import JobProfile
from generator.config.types import Count, DnsLabel, DnsSubdomain, ExecutionTime, Owner, SubjectName, Weight
from generator.durations import seconds


class PoolQuota(ConfigModel):
    """A team's GPUs in one node pool of one cluster."""

    gpus: Count
    """Guaranteed GPUs (Kueue nominalQuota). CPU and memory follow in the pool's per-node ratio."""
    borrowing_limit: Count | None = None
    """At most this many GPUs borrowed from idle quota of others; omitted means no limit."""
    lending_limit: Count | None = None
    """At most this many of the team's idle GPUs lent to others; omitted means all may be lent."""
    usage_weight: Weight | None = None
    """In a pool the cluster shares by usage (`kueue.admissionFairSharing`, where `gpus` is 0): the
    team's weight there. Its recent usage is divided by it when Kueue ranks waiting jobs, so weight
    2 may use twice as much as weight 1 before waiting behind it; 0 comes last. Omitted: 1."""

    @model_validator(mode="after")
    def _lend_at_most_own(self) -> PoolQuota:
        if self.lending_limit is not None and self.lending_limit > self.gpus:
            raise ValueError(f"lendingLimit ({self.lending_limit}) is more than gpus ({self.gpus}); "
                             "a team can only lend GPUs it has")
        return self


StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
"""Kueue ClusterQueue `stopPolicy`."""


class QueuePolicy(ConfigModel):
    """The team's own queue policy in every cluster where it has quota, instead of the cluster's;
    each value must be one the cluster's `kueue.teamPolicy` allows."""

    queueing_strategy: QueueingStrategy | None = None
    """`StrictFIFO`: the oldest workload that does not fit blocks the team's later ones (a
    pre-training team's order; Kueue orders by creation time to the second, and those created in
    the same second by UID); `BestEffortFIFO`: later ones that fit go first."""
    reclaim_within_cohort: ReclaimPolicy | None = None
    """How the team takes its lent quota back from other teams' borrowed work."""
    borrow_within_cohort: BorrowWithinCohort | None = None
    """Whether the team preempts other teams' lower-priority work while borrowing."""
    within_cluster_queue: WithinQueuePolicy | None = None
    """Preemption among the team's own workloads."""
    never_preempted: StrictBool = False
    """No workload of the team is ever preempted, by any team or by its own (for serving): its queue
    never borrows (`borrowingLimit` 0 on every resource of every flavor, the CPU pool's included; Kueue
    preempts only workloads of queues above their own quota, kueue v0.19.2
    pkg/scheduler/preemption/preemption.go:636-663) and its own workloads never preempt each other
    (`withinClusterQueue: Never`). The cost: it runs only on what it holds, its GPU quotas and, in a
    cluster with a `cpuPool`, its cpuPool limit there, held for it (others borrow it while idle); with
    no limit for it, none of the CPU pool (its CPU-only pods use the CPU share of its GPU quota).
    Evictions that are not preemption (a node failing, waitForPodsReady, a maximum execution time, a
    HoldAndDrain stop, its quota lowered below what it runs) still happen."""

    max_termination_grace_period_seconds: StrictInt | None = Field(default=None, ge=0, le=86400)
    """The longest `terminationGracePeriodSeconds` a pod in the team's namespaces may have, below the
    cluster's `kueue.maxTerminationGracePeriodSeconds` (never above it): its borrowed GPUs are back
    sooner after a reclaim. Omitted: the cluster's."""

    @property
    def sets_preemption(self) -> bool:
        """Whether it changes the queue's preemption policy from the cluster's."""
        return self.never_preempted or any(v is not None for v in (
            self.reclaim_within_cohort, self.borrow_within_cohort, self.within_cluster_queue))

    @model_validator(mode="after")
    def _never_preempted_within(self) -> QueuePolicy:
        if self.never_preempted and self.within_cluster_queue not in (None, "Never"):
            raise ValueError(f"neverPreempted means withinClusterQueue: Never, not {self.within_cluster_queue}; "
                             "remove withinClusterQueue")
        return self


class Members(ConfigModel):
    """People who get `edit` rights in the team's namespaces."""

    groups: list[SubjectName] = []
    """Identity-provider groups (RBAC Group subjects)."""
    users: list[SubjectName] = []
    """Individual users (RBAC User subjects)."""


class TeamConfig(ConfigModel):
    """An ML team: who owns it, where it runs and how many GPUs it gets in each cluster and pool."""

    name: DnsLabel
    """Team name; must equal the file name without `.yaml`. Names the team's ClusterQueue."""
    owners: list[Owner] = Field(min_length=1)
    """Who approves changes to this file (GitHub @user, @org/team or e-mail)."""
    members: Members = Members()
    """RBAC subjects with edit rights in the team's namespaces."""
    namespaces: list[DnsLabel] | None = Field(default=None, min_length=1)
    """Namespaces of the team; defaults to one namespace named after the team."""
    cohort: DnsLabel | None = None
    """Org unit: a cohort under the cluster's root cohort (or declared in the cluster's `cohorts`)."""
    default_priority: DnsSubdomain | None = None
    """Priority class of the team's workloads that name none: its job profiles, and (in clusters on
    Kubernetes 1.36 or later, by a MutatingAdmissionPolicy) every workload created in its namespaces
    without a `kueue.x-k8s.io/priority-class` label or a pod priorityClassName; before 1.36 those run
    at priority 0 (a warning). Must exist in every cluster the team uses."""
    allowed_priorities: list[DnsSubdomain] | None = Field(default=None, min_length=1)
    """Priority classes the team's jobs may use (label `kueue.x-k8s.io/priority-class`); omitted:
    any. Enforced by a ValidatingAdmissionPolicy on the team's namespaces; defaultPriority and every
    job profile's priority must be among them, and each must exist in every cluster the team uses."""
    fair_sharing_weight: Weight | None = None
    """Fair-sharing weight of the team queue: 0 (no fair share) or 0.001 to 1,000,000."""
    stop_policy: dict[DnsLabel, StopPolicy] = {}
    """Stop the team's queue in a cluster (cluster name -> policy): `Hold` admits nothing new and
    lets admitted jobs finish, `HoldAndDrain` also evicts the admitted ones (they requeue), `None`
    runs normally. For maintenance or a team being wound down; the queue shows as inactive."""
    flavor_order: dict[DnsLabel, list[DnsLabel]] = {}
    """Order in which Kueue tries the team's pools, per cluster (cluster name -> every pool the
    team has quota for there); omitted: the cluster's pool order."""
    flavor_fungibility: FlavorFungibility | None = None
    """The team's own `flavorFungibility` in every cluster, instead of the cluster's `kueue` default."""
    policy: QueuePolicy | None = None
    """The team's own queue policy (queueing strategy, preemption, never being preempted) in every
    cluster, within what each cluster's `kueue.teamPolicy` allows; omitted: the cluster's."""
    quotas: dict[DnsLabel, dict[DnsLabel, PoolQuota]] = {}
    """GPU quotas: cluster name -> pool name -> quota. The team has namespaces and a queue in each
    cluster named here, and in no other; it must name at least one. A cluster with no pools
    (`prod-east: {}`) makes a CPU-only team there: its jobs run on the cluster's `cpuPool` (required),
    and a job asking for GPUs waits. With `policy.neverPreempted` every `borrowingLimit` is 0 (leave it
    out)."""
    max_execution_time: ExecutionTime | None = None
    """Longest any batch job of the team may run once admitted, e.g. `72h`, in every cluster: Kueue
    then evicts and deactivates it (its Workload's `maximumExecutionTimeSeconds`). Applied to every
    Job, JobSet, standalone Pod, Ray job or cluster, Kubeflow job, TrainJob and AppWrapper created in
    the team's namespaces, kubectl's included: on Kubernetes 1.36 or later a MutatingAdmissionPolicy
    labels those without `kueue.x-k8s.io/max-exec-time-seconds` (or with a longer one) with it;
    everywhere a ValidatingAdmissionPolicy refuses a longer label. Servers (Deployments,
    StatefulSets, LeaderWorkerSets, RayServices) are not limited. Each job profile's
    `maxExecutionTime` must be at most this."""
    job_profiles: list[JobProfile] = []
    """Job templates for the team's ML engineers (rendered under rendered/<cluster>/templates/<team>/)."""

    @property
    def max_execution_seconds(self) -> int | None:
        """`maxExecutionTime` in seconds, as Kueue's label takes it."""
        return None if self.max_execution_time is None else int(seconds(self.max_execution_time))

    def grace_cap_in(self, cluster: ClusterConfig) -> int:
        """The longest terminationGracePeriodSeconds of a pod in the team's namespaces in `cluster`:
        the team's own where the cluster lets it choose, never above the cluster's."""
        cap = cluster.kueue.max_termination_grace_period_seconds
        own = self.policy.max_termination_grace_period_seconds if self.policy else None
        if own is None or not cluster.kueue.team_policy.max_termination_grace_period_seconds:
            return cap
        return min(own, cap)

    @model_validator(mode="after")
    def _never_preempted_never_borrows(self) -> TeamConfig:
        if not self.never_preempted:
            return self
        for cluster, pools in sorted(self.quotas.items()):
            for pool, quota in sorted(pools.items()):
                if quota.borrowing_limit:
                    raise ValueError(f"policy.neverPreempted: quotas.{cluster}.{pool} borrows up to "
                                     f"{quota.borrowing_limit} GPUs, and borrowed GPUs are taken back by preemption; "
                                     "remove its borrowingLimit (a team never preempted never borrows)")
                pools[pool] = quota.model_copy(update={"borrowing_limit": 0})
        return self

    @property
    def never_preempted(self) -> bool:
        """Whether the team's `policy.neverPreempted` is set."""
        return self.policy is not None and self.policy.never_preempted

    def preemption_in(self, cluster: ClusterConfig) -> Preemption:
        """The preemption policy of the team's queue in `cluster`: the cluster's, with the team's own
        choices over it."""
        base, own = cluster.kueue.preemption, self.policy
        if own is None:
            return base
        update: dict[str, object] = {}
        if own.reclaim_within_cohort is not None:
            update["reclaim_within_cohort"] = own.reclaim_within_cohort
        if own.borrow_within_cohort is not None:
            update["borrow_within_cohort"] = own.borrow_within_cohort
        if own.within_cluster_queue is not None or own.never_preempted:
            update["within_cluster_queue"] = "Never" if own.never_preempted else own.within_cluster_queue
        return base.model_copy(update=update) if update else base

    def queueing_in(self, cluster: ClusterConfig) -> str:
        """The queueing strategy of the team's queue in `cluster`."""
        own = self.policy.queueing_strategy if self.policy else None
        return own or cluster.kueue.queueing_strategy

    def fungibility_in(self, cluster: ClusterConfig) -> FlavorFungibility | None:
        """The flavorFungibility of the team's queue in `cluster`: the team's own, else the cluster's
        (None: Kueue's defaults)."""
        return self.flavor_fungibility or cluster.kueue.flavor_fungibility

    def queue_for(self, cluster: ClusterConfig, pool: str) -> str:
        """The LocalQueue a job of the team on `pool` names: the team's own, or its queue on a pool
        shared by usage."""
        if pool in cluster.shared_pools:
            return AdmissionFairSharing.local_queue(self.name, pool)
        return self.name

    def usage_weight(self, cluster: str, pool: str) -> float:
        """The team's weight in a pool shared by usage (1 when unset)."""
        weight = self.quotas[cluster][pool].usage_weight
        return 1.0 if weight is None else weight

    @property
    def namespace_names(self) -> list[str]:
        """The team's namespaces, defaulting to the team name."""
        return list(self.namespaces) if self.namespaces else [self.name]
