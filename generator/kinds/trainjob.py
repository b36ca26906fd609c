"""`kind: trainjob`: a Kubeflow Trainer TrainJob on the platform's `torch-distributed` runtime, which makes a
JobSet of `nodes` pods and sets torchrun's PET_* variables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.errors import UsageError
from generator.kinds.base import Body, Kind, Operator, Refused, ended_by_condition, status
from generator.kinds.jobset import pod_name_problems, pods
from generator.kinds.podspec import job_labels, pod_template, program_env, resized

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_NODE = "node"
"""The runtime's replicated job and its container, which the Torch plugin fills from `spec.trainer`
(kubeflow/trainer v2.2.1 pkg/constants/constants.go:69)."""
TRAINER_PATCH_MANAGER = "fleetgen.io/profile"
"""Who owns the runtime patch fleetgen writes (Trainer requires a domain-prefixed manager; Kueue writes
its own beside it at admission: kueue v0.19.2 pkg/controller/jobs/trainjob/trainjob_controller.go:76)."""
TRAINER_RESERVED_ENV = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                                  "PET_MASTER_PORT"})
"""torchrun's settings the Torch plugin writes and Trainer's webhook refuses in `env` (constants.go:286-287)."""


TRAINER = Operator(key="trainer", title="Kubeflow Trainer", api_groups=("trainer.kubeflow.org",),
                   member_resources=("trainjobs",), instead="jobset", release="kubeflow-trainer",
                   member_reads=("trainingruntimes",), member_cluster_reads=("clustertrainingruntimes",),
                   reads_why="Kubeflow's Trainer SDK lists and reads the runtimes a TrainJob names before it "
                             "submits or follows one (`TrainerClient.list_runtimes`, `get_job`), as Trainer's "
                             "own user roles allow")
"""TrainJobs only: members read runtimes but may not write TrainingRuntimes, whose pod templates would
bypass the profiles' rules, nor ClusterTrainingRuntimes, which are the platform's. A MultiKueue manager may
turn it on and dispatch TrainJobs:
Kubeflow Trainer v2.2.1's controller reads no spec.managedBy (pkg/controller/trainjob_controller.go), so a
manager gets Trainer's CRDs and runtimes without its controller (compile/platform.py)."""


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """A TrainJob's JobSet is named after it, with one replicated job, `node`."""
    return pod_name_problems(name, [(TRAINER_NODE, profile.nodes)])


def trainjob(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
             nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The Kubeflow Trainer TrainJob for a `kind: trainjob` profile, on the platform's `torch-distributed`
    runtime: image, program, nodes and per-node resources in `spec.trainer` (Trainer writes torchrun's
    PET_* settings, rank 0 at `<job>-node-0-0.<job>`), and the pool, topology and /dev/shm as a runtime
    patch of the node pods, the only way the TrainJob API reaches them."""
    from generator.config.platform import TRAINER_RUNTIME

    profile = resized(profile, nodes, image, command)
    name = name or profile.name
    pool = cluster.pool(profile.pool)
    assert pool is not None
    env = [{"name": k, "value": v} for k, v in program_env(profile).items()]
    template = pod_template(team, cluster, profile, [], None, None, grouped=False, container_name=TRAINER_NODE)
    pod, (container,) = template["spec"], template["spec"].pop("containers")
    program = [*profile.command, *profile.args]
    # torchrun reads its flags from the PET_* variables; --no-python as for a JobSet (see launch).
    launched = ["torchrun", "--no-python", *program] if profile.launcher == "torchrun" else program
    patch_pod = {k: pod[k] for k in ("securityContext", "nodeSelector", "tolerations", "volumes") if k in pod}
    patch_pod["containers"] = [{"name": TRAINER_NODE, "volumeMounts": container["volumeMounts"],
                                **({"securityContext": container["securityContext"]}
                                   if "securityContext" in container else {})}]
    node_template: dict[str, Any] = {"spec": patch_pod}
    if "metadata" in template:
        node_template = {"metadata": template["metadata"], **node_template}
    return {
        "apiVersion": TRAINER_API, "kind": "TrainJob",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": job_labels(team, cluster, profile)},
        "spec": {
            "runtimeRef": {"name": TRAINER_RUNTIME},
            "trainer": {"image": profile.image, "command": launched[:1], "args": launched[1:], "env": env,
                        "numNodes": profile.nodes, "numProcPerNode": profile.gpus_in(pool),
                        "resourcesPerNode": container["resources"]},
            "runtimePatches": [{"manager": TRAINER_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": TRAINER_NODE, "template": {"spec": {"template": node_template}}}]}}}}],
        },
    }


def _rank(body: dict[str, Any], name: str, rank: int) -> str:
    """A TrainJob's ranks are the completion indexes of its JobSet's one replicated job, `node`."""
    nodes = int(((body.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1)
    if rank >= nodes:
        raise UsageError(f"rank {rank} is out of range: the job has {nodes} nodes")
    return (f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=node,"
            f"batch.kubernetes.io/job-completion-index={rank}")


def _pod_groups(body: Body) -> list[tuple[int, Body]]:
    """numNodes pods, each with resourcesPerNode (the runtime's container)."""
    trainer = (body.get("spec") or {}).get("trainer") or {}
    per_node = {"spec": {"containers": [{"resources": trainer.get("resourcesPerNode") or {}}]}}
    return [(int(trainer.get("numNodes") or 1), per_node)]


def _services(body: Body) -> list[tuple[str, str]]:
    """Trainer makes a JobSet of the TrainJob's name (trainer v2.2.1 pkg/runtime/framework/plugins/jobset/
    jobset.go:308) whose subdomain is the runtime's, else that name (lines 233-237)."""
    return [(str((body.get("metadata") or {}).get("name") or ""), "the headless Service of the JobSet Trainer makes "
             "for it (unless its runtime names another subdomain)")]


# The pods of the JobSet Kubeflow Trainer makes, named after it (kubeflow/trainer v2.2.1 pkg/runtime/
# framework/plugins/jobset/jobset.go), in the runtime's container `node`. Its status counts the
# JobSet's jobs, not restarts: the platform's runtime sets no failure policy, so a failure ends it.
KIND = Kind(
    name="trainjob", what="a TrainJob", kind="TrainJob", group="trainer.kubeflow.org", version="v1alpha1",
    plural="trainjobs", operator=TRAINER, frameworks=("trainer.kubeflow.org/trainjob",), build=trainjob,
    name_problems=name_problems,
    refused=Refused(fields=(("fail_fast_exit_codes", "failFastExitCodes"), ("max_restarts", "maxRestarts"),
                            ("master_port", "masterPort"),
                            ("termination_grace_period_seconds", "terminationGracePeriodSeconds")),
                    why="its training runtime (torch-distributed) decides it",
                    fix=", or use kind: jobset to choose it"),
    leader_refused=("a TrainJob's nodes all run the same program (rank 0 is node 0)",
                    "remove leader, or use kind: jobset"),
    reserved_env=TRAINER_RESERVED_ENV, reserved_by="by Kubeflow Trainer for torchrun", skypilot=True,
    own_grace=False, pods=pods, ended=ended_by_condition("Complete"),
    active=lambda o: sum(int(j.get("active") or 0) for j in status(o).get("jobsStatus") or [] if isinstance(j, dict)),
    rank=_rank, log_container="node",
    shape=("spec.trainer?.numNodes?:int", "spec.trainer?.resourcesPerNode?.requests?{}:quantity",
           "spec.trainer?.resourcesPerNode?.limits?{}:quantity"),
    pod_groups=_pod_groups, operator_services=_services, owners=("TrainJob", "JobSet"),
    doc="`trainjob`: a Kubeflow Trainer TrainJob (the cluster file needs `operators.trainer`) on the platform's\n"
        "`torch-distributed` runtime, which makes a JobSet of `nodes` pods and sets torchrun's PET_*\n"
        "variables (rank 0 listens on 29500); its runtime decides restarts and grace period (no `leader`,\n"
        "`failFastExitCodes`, `maxRestarts`, `masterPort` or `terminationGracePeriodSeconds`).")
