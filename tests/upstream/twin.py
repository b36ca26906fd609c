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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.upstream import pki, tools
from tests.upstream.cluster import Stack
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
