"""What team members may do beyond `edit`, as one table: every right fleetgen grants them, who gets it, when,
and why, and the rights withheld on purpose. The RBAC objects and docs/reference/member-rights.md are both
made from it, so the page cannot drift from what a cluster grants.

A namespaced right goes into `fleetgen-team-member`, one ClusterRole per cluster that each team's RoleBindings
bind in the team's namespaces only. A cluster-wide right goes into `fleetgen-members-<team>`, a ClusterRole and
ClusterRoleBinding per team holding only what that team's members may read outside their namespaces; a right on
the team's own cluster-scoped objects names them (`resourceNames`), so no team sees another's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from generator.kinds import OPERATORS
from generator.kinds.base import MEMBER_VERBS, Operator

READ = ("get", "list", "watch")
Scope = Literal["namespace", "cluster", "everyone"]
"""Where a right holds: the team's namespaces, cluster-wide for the team's members, or cluster-wide for every
authenticated user."""
Rule = dict[str, list[str]]
"""An RBAC PolicyRule as data."""


def _always(cluster: ClusterConfig) -> bool:
    return True


def _nodes_readable(cluster: ClusterConfig) -> bool:
    return cluster.tenancy.members_read_nodes


def _own_cluster_queue(cluster: ClusterConfig, team: TeamConfig) -> list[str]:
    """The team's own ClusterQueue (compile/kueue.py `cluster_queue`): only the team's namespaces feed it (its
    namespaceSelector, and fleetgen puts LocalQueues on it nowhere else), so its pending list holds only the
    team's work. Not the queues of pools shared by usage, whose lists hold other teams' Workloads."""
    return [team.name]


@dataclass(frozen=True, kw_only=True)
class Right:
    """One RBAC rule members get, with why, and the cluster-file setting it depends on."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    scope: Scope
    why: str
    when: Callable[[ClusterConfig], bool] = _always
    when_text: str = ""
    """The setting `when` reads, for the docs ("" where every cluster grants it)."""
    names: Callable[[ClusterConfig, TeamConfig], list[str]] | None = None
    """The team's own objects a cluster-wide right is limited to (`resourceNames`); None for all of them."""

    def rule(self, cluster: ClusterConfig, team: TeamConfig | None = None) -> Rule:
        out: Rule = {"apiGroups": [self.api_group], "resources": list(self.resources), "verbs": list(self.verbs)}
        if self.names is not None and team is not None:
            out["resourceNames"] = sorted(self.names(cluster, team))
        return out


BASE_RIGHTS: tuple[Right, ...] = (
    Right(api_group="jobset.x-k8s.io", resources=("jobsets",), verbs=MEMBER_VERBS, scope="namespace",
          why="Submit, follow and cancel the team's JobSets (JobSet's chart aggregates no role to `edit`); "
              "no update: a job is replaced, not edited in place"),
    Right(api_group="jobset.x-k8s.io", resources=("jobsets/status",), verbs=("get",), scope="namespace",
          why="Read where a JobSet stands"),
    Right(api_group="kueue.x-k8s.io", resources=("workloads", "localqueues"), verbs=READ, scope="namespace",
          why="See the team's Workloads (admitted, waiting, evicted, and why) and its LocalQueues"),
    Right(api_group="visibility.kueue.x-k8s.io", resources=("localqueues/pendingworkloads",), verbs=("get",),
          scope="namespace", why="Kueue's visibility API: the team's waiting workloads, in order, per LocalQueue"),
    # kueuectl v0.19.2 stop|resume workload: GET, then a merge PATCH of spec.active
    # (cmd/kueuectl/app/options/update_workload_activation_options.go:99-117).
    Right(api_group="kueue.x-k8s.io", resources=("workloads",), verbs=("patch",), scope="namespace",
          why="Stop and resume the team's own jobs in the queue (`kueuectl stop workload` and `resume workload` "
              "set the Workload's `spec.active`; Kueue undoes a suspend set on the job itself). "
              "`fleetgen-team-workloads` refuses any other change, and resuming a Workload Kueue deactivated itself"),
    # kueuectl v0.19.2 list workload: for a waiting Workload, GET of its ClusterQueue's pending list, where any
    # error but NotFound ends the command (cmd/kueuectl/app/list/list_workload.go:455-459).
    Right(api_group="visibility.kueue.x-k8s.io", resources=("clusterqueues/pendingworkloads",), verbs=("get",),
          scope="cluster", names=_own_cluster_queue,
          why="`kueuectl list workload` reads the pending list of the ClusterQueue for a waiting workload's place, "
              "and fails without it. Only the team's own ClusterQueue, which only its namespaces feed; not a "
              "pool shared by usage, whose list holds other teams' work"),
    Right(api_group="", resources=("nodes",), verbs=READ, scope="cluster", when=_nodes_readable,
          when_text="`tenancy.membersReadNodes: true`",
          why="SkyPilot lists Nodes to find GPUs and turns Kubernetes off without. Exposes every Node's name, "
              "labels, capacity, taints, conditions and addresses, and from its status the images of the pods that "
              "ran there (other teams' registries and tags) and the volumes attached; not the pods themselves"),
    Right(api_group="node.k8s.io", resources=("runtimeclasses",), verbs=READ, scope="cluster", when=_nodes_readable,
          when_text="`tenancy.membersReadNodes: true`",
          why="SkyPilot lists RuntimeClasses (to pick `nvidia`) before it makes a pod, and a 403 ends its launch. "
              "Exposes the names and handlers of the cluster's container runtimes"),
    Right(api_group="kueue.x-k8s.io", resources=("workloadpriorityclasses",), verbs=READ, scope="everyone",
          why="The job SDK tells a priority that exists from one that does not before it submits; names and "
              "values are already published in `kube-public/fleetgen-fleet`"),
)
"""The rights every cluster's table starts with; operators add theirs (operator_rights)."""


def operator_rights(operator: Operator) -> tuple[Right, ...]:
    """What members get for an operator's kinds where the cluster runs it (generator/kinds)."""
    group, when = operator.api_groups[0], operator.runs_in
    when_text = f"`operators.{operator.key}: true`"
    out = [Right(api_group=group, resources=operator.member_resources, verbs=MEMBER_VERBS, scope="namespace",
                 when=when, when_text=when_text,
                 why=f"Submit, follow and cancel the team's jobs of {operator.title} (its chart aggregates no role "
                     "to `edit`)"),
           Right(api_group=group, resources=tuple(f"{r}/status" for r in operator.member_resources),
                 verbs=("get",), scope="namespace", when=when, when_text=when_text,
                 why=f"Read where a job of {operator.title} stands")]
    if operator.member_reads:
        out.append(Right(api_group=group, resources=operator.member_reads, verbs=READ, scope="namespace",
                         when=when, when_text=when_text, why=operator.reads_why))
    if operator.member_cluster_reads:
        out.append(Right(api_group=group, resources=operator.member_cluster_reads, verbs=READ, scope="cluster",
                         when=when, when_text=when_text, why=operator.reads_why))
    return tuple(out)


RIGHTS: tuple[Right, ...] = BASE_RIGHTS + tuple(r for operator in OPERATORS for r in operator_rights(operator))
"""Every right fleetgen may grant members, in the order their rules are rendered."""


def rules(cluster: ClusterConfig, scope: Scope, team: TeamConfig | None = None) -> list[Rule]:
    """The rules of `scope` the cluster grants (for `team`, where a right names the team's own objects)."""
    return [right.rule(cluster, team) for right in RIGHTS if right.scope == scope and right.when(cluster)]


@dataclass(frozen=True, kw_only=True)
class Withheld:
    """A right members do not get, on purpose, and what to do instead."""

    what: str
    why: str


WITHHELD: tuple[Withheld, ...] = (
    Withheld(what="Create, change or delete LocalQueues, ClusterQueues, Cohorts, ResourceFlavors or priority "
                  "classes (`kueuectl create localqueue`, `stop localqueue`, `resume localqueue`)",
             why="Queues and quotas are the platform's, changed by a reviewed pull request to the fleet "
                 "repository; `kueuectl stop localqueue` would also hold every teammate's work"),
    Withheld(what="Change a Workload beyond stopping and resuming it (`spec.active`), or resume one Kueue "
                  "deactivated itself",
             why="Kueue owns it: its priority, queue and pod sets are what admission decided on, and Kueue forgets "
                 "how long a Workload ran when it deactivates it for its maximum execution time; change or "
                 "resubmit the job (`fleetgen-team-workloads`)"),
    Withheld(what="Read other teams' objects, ClusterQueues or pending lists",
             why="A team sees its own queues and work; the fleet's quotas are in the fleet repository and in "
                 "`kube-public/fleetgen-fleet`"),
    Withheld(what="Create Roles or RoleBindings (SkyPilot's `remote_identity: SERVICE_ACCOUNT`)",
             why="`edit` holds no RBAC; a member's role could grant what fleetgen does not"),
    Withheld(what="Create or change TrainingRuntimes and ClusterTrainingRuntimes",
             why="A runtime's pod template would pass by the team's job profiles and the pool rules"),
    Withheld(what="Bind pods to nodes, add ephemeral containers, or tolerate a node fleetgen holds",
             why="Placement is Kueue's and the scheduler's (`fleetgen-team-pod-placement`)"),
    Withheld(what="Cordon, label or otherwise change Nodes; reach a node's kubelet (`nodes/proxy`)",
             why="Nodes are the platform's and the health reconciler's"),
    Withheld(what="Remove or loosen fleetgen's objects in a team namespace (isolation, quotas, bindings)",
             why="`fleetgen-team-objects` refuses it; they change with the fleet repository"),
)
"""What docs/reference/member-rights.md lists as refused, each with why."""
