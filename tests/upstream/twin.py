"""Nodes that take pods, for the test stack: kube-scheduler binds, kwok plays every kubelet.

The Stack runs the API server, Kueue and JobSet; Nodes made from a cluster file (fleet.fake_nodes)
exist only as objects. Here kube-scheduler (the Kubernetes release the API server is) binds pods to
those Nodes by their real fit (GPUs per node, labels, taints, cordons), and kwok, the Kubernetes
SIGs' kubelet simulator, runs each bound pod through its own stages: Running and Ready, then
Succeeded for pods of a Job, after `pod-complete.stage.kwok.x-k8s.io/delay` (default 1 s plus up to
5 s jitter). Stages are the ones kwok v0.8.0 ships (kustomize/stage/node/fast, pod/general), plus
the kubelet's ending of a deleted pod (TERMINATE).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from generator.checks import load_fleet
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet
from generator.config.jobs import JobProfile
from tests.conftest import REPO, SHARED, run
from tests.upstream import pki, tools
from tests.upstream.cluster import Stack
from tests.upstream.fleet import (
    JOB_KINDS,
    condition,
    create_nodes,
    deploy,
    fake_nodes,
    job_object,
    kustomize_build,
    rendered_kueue_config,
    topology_domains,
    workload_of,
)
from tests.upstream.processes import Process, StartError, free_port, spawn, wait_for

MANAGED = "node.fleetgen.io/test-pool"
"""The label every fake Node carries (fleet.fake_nodes): kwok manages the Nodes that have it."""
STAGES = ("node/fast", "pod/general")


TERMINATE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-terminate"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".metadata.finalizers", "operator": "Exists"},
            {"key": ".spec.nodeName", "operator": "Exists"},
            {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]}]},
        # Within the grace period, as pod-delete times its own step; a pod annotated IGNORES_SIGTERM
        # at its end (kwok takes the jitter bound when the delay is not below it).
        "delay": {"durationMilliseconds": 1000,
                  "durationFrom": {
                      "expressionFrom": '.metadata.annotations["pod-terminate.stage.kwok.x-k8s.io/delay"]'},
                  "jitterDurationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
        "next": {"statusTemplate": "\n".join([
            "{{ $now := Now }}",
            "containerStatuses:",
            "{{ range .spec.containers }}",
            "- image: {{ .image | Quote }}",
            "  name: {{ .name | Quote }}",
            "  ready: false",
            "  restartCount: 0",
            "  started: false",
            "  state:",
            "    terminated:",
            "      exitCode: 143",
            "      finishedAt: {{ $now | Quote }}",
            "      reason: Error",
            "{{ end }}",
            "phase: Failed"])}}}
"""What a kubelet does with a deleted pod that has finalizers (a Job's pods carry the job-tracking one):
it stops the containers (SIGTERM: exit 143) and reports the pod Failed before it goes
(pkg/kubelet/kubelet_pods.go:1828-1840 at v1.36.3). kwok v0.8.0's general stages have no such step:
their pod-delete waits for the finalizers to go, and the Job controller, for a Job with a pod failure
policy (every rendered one), keeps them until the pod is terminal, so a deleted pod of a running job
stayed Running forever and its replacement was never created."""

IGNORES_SIGTERM = {"pod-terminate.stage.kwok.x-k8s.io/delay": "86400s",
                   "pod-delete.stage.kwok.x-k8s.io/delay": "86400s"}
"""Annotations for a pod whose program ignores SIGTERM: the kubelet kills it only when its grace period
ends (kubernetes v1.36.3 pkg/kubelet/kuberuntime/kuberuntime_container.go:861-912, StopContainer with
the grace period), so it holds its node's resources until its deletionTimestamp. Without them kwok
ends a deleted pod at a random point within the grace period: kwok v0.8.0 delays a stage by its delay
plus a uniform draw up to its jitter bound (here the deletionTimestamp), or by the bound itself when
the delay is not below it (pkg/utils/lifecycle/lifecycle.go:424-455). Both stages that end a deleted
pod read one: TERMINATE (a pod with finalizers, a Job's) and kwok's pod-delete (one without)."""


LOG = "step 1 loss 2.31\nstep 2 loss 1.97\n"
CRI_LOG = "".join(f"2026-11-26T12:00:0{i}.000000000Z stdout F {line}\n" for i, line in enumerate(LOG.splitlines()))
"""A log for `Twin.start(logs=...)`: LOG as a container runtime writes it (the CRI format kwok reads, as the
kubelet does)."""


def kwok_config(dest: Path, logs: Path | None = None) -> Path:
    """One file of every Stage kwok v0.8.0 ships for Ready nodes and the pod lifecycle, and TERMINATE;
    with `logs`, a ClusterLogs that makes that file every container's log."""
    module = tools.module_dir("kwok")
    documents = []
    for stage in STAGES:
        folder = module / "kustomize" / "stage" / stage
        listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
        documents += [(folder / name).read_text() for name in listed]
    documents.append(yaml.safe_dump(TERMINATE, sort_keys=False))
    if logs is not None:
        documents.append(yaml.safe_dump({
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs", "metadata": {"name": "every-container"},
            "spec": {"logs": [{"logsFile": str(logs), "follow": False}]}}, sort_keys=False))
    dest.write_text("---\n".join(documents))
    return dest


@dataclass
class Twin:
    """kube-scheduler and kwok beside a Stack (stopped with `stop`, before the Stack)."""

    stack: Stack
    processes: dict[str, Process] = field(default_factory=dict)

    @classmethod
    def start(cls, stack: Stack, logs: Path | None = None, kubelets: bool = True) -> Twin:
        """With `logs`, kwok also plays the kubelets' log endpoint: every node's kubelet port is kwok's
        HTTPS server (a certificate of the stack's CA; the API server verifies none without
        --kubelet-certificate-authority), which serves that file as any container's log. Without
        `kubelets`, only kube-scheduler: pods are bound, never run."""
        twin = cls(stack)
        work, kubeconfig = stack.workdir, stack.workdir / "admin.kubeconfig"
        served: list[str] = []
        port = free_port()
        if logs is not None:
            crt, key = pki.issue(stack.ca, "kwok", server=True, ips=("127.0.0.1",), dns=("localhost",)).write(
                work, "kwok-serving")
            served = [f"--node-port={port}", f"--tls-cert-file={crt}", f"--tls-private-key-file={key}"]
        try:
            twin.processes["kube-scheduler"] = spawn("kube-scheduler", [
                str(tools.binary("kube-scheduler")), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                "--secure-port=0"], work / "kube-scheduler.log")
            if kubelets:
                twin.processes["kwok"] = spawn("kwok", [
                    str(tools.binary("kwok")), f"--kubeconfig={kubeconfig}",
                    f"--config={kwok_config(work / 'kwok.yaml', logs)}",
                    f"--manage-nodes-with-label-selector={MANAGED}", "--cidr=10.200.0.0/16", "--node-ip=127.0.0.1",
                    *served], work / "kwok.log")
            # Neither serves a health endpoint here (kube-scheduler's secure port is off): up means not
            # exited at once; the tests then wait for pods to be bound and run.
            for proc in twin.processes.values():
                if not proc.alive():
                    raise StartError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
            if logs is not None:
                # The Nodes were made Ready by fleet.create_nodes, so kwok's node-initialize stage (which
                # would write these) passes them by: their address and kubelet port, as a kubelet reports.
                from kubernetes import client

                core = client.CoreV1Api(stack.client())
                for node in core.list_node(label_selector=MANAGED).items:
                    core.patch_node_status(node.metadata.name, {"status": {
                        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
        except BaseException:
            twin.stop()
            raise
        return twin

    def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{proc.tail(40)}" for name, proc in self.processes.items())


def pods(stack: Stack, namespace: str, selector: str) -> list[Any]:
    from kubernetes import client

    return list(client.CoreV1Api(stack.client()).list_namespaced_pod(namespace, label_selector=selector).items)


def bound_pods(stack: Stack, namespace: str, jobset: str, count: int, seconds: float = 90,
               label: str = "jobset.sigs.k8s.io/jobset-name") -> list[Any]:
    """The job's pods (`label`: the one naming the job on them) once `count` of them are bound to nodes
    (one list per look); [] after `seconds`."""
    def look() -> list[Any]:
        found = [p for p in pods(stack, namespace, f"{label}={jobset}") if p.spec.node_name]
        return found if len(found) == count else []
    return list(wait_for(look, seconds) or [])


# ------------------------------------------------------------------ a rendered cluster's twin


TWIN_CONTROLLERS = ("job-controller", "deployment-controller", "replicaset-controller", "statefulset-controller",
                    "endpointslice-controller")
"""What of kube-controller-manager the twins run beyond the stack's own: Jobs' pods (JobSet's, batch
Jobs), a serving Deployment's ReplicaSet and pods, a LeaderWorkerSet's StatefulSets' pods, and the
EndpointSlices of Services (the records cluster DNS serves, pod hostnames of headless Services included)."""


@contextmanager
def running_twin(name: str, etcd: Any, workdir: Path, crds: tuple[dict[str, Any], ...] = (),
                 logs: Path | None = None, root: Path = REPO,
                 kubelets: bool = True, kueue_tool: str = "kueue") -> Iterator[tuple[Stack, Fleet, Twin]]:
    """Cluster `name` of the fleet at `root` as rendered, its Nodes from its cluster file, kube-scheduler
    and kwok; `crds` are served before Kueue starts (an operator's kinds); `logs`, every container's log;
    without `kubelets`, pods are bound and never run (Twin.start); `kueue_tool`, the Kueue release run."""
    objects = kustomize_build(root / "rendered" / name) + kustomize_build(root / "rendered" / "gitops" / name)
    stack = Stack.start(workdir, etcd, kueue_config=rendered_kueue_config(objects),
                        extra_controllers=TWIN_CONTROLLERS, crds=crds, kueue_tool=kueue_tool)
    try:
        fleet = load_fleet(root)
        cluster = fleet.clusters[name].config
        create_nodes(stack, fake_nodes(cluster))
        refused, _ = deploy(stack, cluster, objects, SHARED / "schemas")
        assert not refused, refused
        running = Twin.start(stack, logs, kubelets)
        try:
            yield stack, fleet, running
        finally:
            running.stop()
    finally:
        stack.stop()


@contextmanager
def operator_twin(name: str, etcd: Any, workdir: Path, crds: tuple[dict[str, Any], ...],
                  start: Callable[[Stack, Path], Process], root: Path = REPO) -> Iterator[tuple[Stack, Fleet, Twin]]:
    """`running_twin` with an operator's CRDs and its process `start`ed on it (stopped after), every
    container's log being CRI_LOG (kwok serves it as each kubelet would)."""
    logs = workdir / "container.log"
    logs.write_text(CRI_LOG)
    with running_twin(name, etcd, workdir, crds=crds, logs=logs, root=root) as running:
        operator = start(running[0], workdir)
        try:
            yield running
        finally:
            operator.stop()


def submit(stack: Stack, fleet: Fleet, name: str, tmp_path: Path, team_name: str, profile: str,
           runs_for: str = "") -> tuple[str, dict[str, Any]]:
    """`fleetgen job new` and `job submit` of a team's profile as a member of the team, named `name`; with
    `runs_for`, kwok keeps its pods running
    that long instead of a few seconds. Both of the pod-complete stage's annotations are needed: kwok
    takes the jitter bound (default 5 s) as the delay when it is not above the delay
    (pkg/utils/lifecycle/lifecycle.go:449-450 at v0.8.0), so `delay` alone still ends pods in 5 s."""
    team = fleet.teams[team_name].config
    who = stack.identity(f"twin-member@{team_name}.test", (team.members.groups[0],))
    path = tmp_path / f"{name}.yaml"
    made = run(REPO, "job", "new", team_name, profile, "--name", name, "-o", str(path))
    assert made.code == 0, made.err
    if runs_for:
        body = yaml.safe_load(path.read_text())
        jobs = [r["template"] for r in body["spec"]["replicatedJobs"]] if body["kind"] == "JobSet" else [body]
        for job in jobs:
            meta = job["spec"]["template"].setdefault("metadata", {})
            meta.setdefault("annotations", {}).update({"pod-complete.stage.kwok.x-k8s.io/delay": runs_for,
                                                       "pod-complete.stage.kwok.x-k8s.io/jitter-delay": runs_for})
        path.write_text(yaml.safe_dump(body))
    submitted = run(REPO, "job", "submit", str(path), "--kubeconfig", str(who.kubeconfig))
    assert submitted.code == 0, submitted.err
    body = yaml.safe_load(path.read_text())
    return body["metadata"]["namespace"], body


DONE = {"JobSet": "Completed", "Job": "Complete"}
"""The condition each kind of job ends well with."""


def completed(stack: Stack, namespace: str, name: str, kind: str = "JobSet") -> bool:
    return condition(job_object(stack, namespace, name, kind), DONE[kind]).get("status") == "True"


def placed_where_kueue_chose(stack: Stack, cluster: ClusterConfig, namespace: str, name: str, profile: JobProfile,
                             logs: Callable[[], str] = str, kind: str = "JobSet") -> list[Any]:
    """The admitted job's pods, once one is bound per node, after checking where: every pod on a node
    of the profile's pool; with topology, on exactly the hosts Kueue's topology-aware scheduling chose,
    all in one domain of its level, or whole slices in each domain of the slice level."""
    label = JOB_KINDS[kind][3]
    selector = f"{label}={name}"
    bound = bound_pods(stack, namespace, name, profile.nodes, 120, label)  # one pod per node
    assert bound, f"{[(p.metadata.name, p.status.phase) for p in pods(stack, namespace, selector)]}\n{logs()}"
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in fake_nodes(cluster)}
    assert {nodes[p.spec.node_name][MANAGED] for p in bound} == {profile.pool}
    if profile.topology is not None:
        assigned = sorted(h for hosts in topology_domains(workload_of(stack, namespace, name, kind),
                                                          "kubernetes.io/hostname").values() for h in hosts)
        hosts = sorted(p.spec.node_name for p in bound)
        assert hosts == assigned, (hosts, assigned)  # one pod per host Kueue chose, and only there
        if profile.topology.slice is None:
            assert len({nodes[h].get(profile.topology.level) for h in hosts}) == 1, hosts
        else:
            per_domain = Counter(nodes[h].get(profile.topology.slice.level) for h in hosts)
            assert all(n % profile.topology.slice.size == 0 for n in per_domain.values()), per_domain
    return bound
