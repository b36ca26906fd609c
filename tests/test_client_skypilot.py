"""Issue 56, the tools ML engineers already use: SkyPilot 0.14.1's own CLI as a team member on prod-east's twin.

prod-east as rendered (tests/upstream/twin.py: the API server with RBAC, Kueue, kube-scheduler, kwok) and
SkyPilot run as a member runs it: its CLI against a local API server of its own (a temporary HOME, a free port,
the member's kubeconfig), with fleetgen's rendered `skypilot-config.yaml` and task and nothing granted by hand.
A member of ml-research checks Kubernetes and launches `pretrain-8node-slices` (8 nodes of 8 H100s, a preferred
zone in slices of 4 per block) up to the first step that needs a running container (kwok's pods have none, so
SkyPilot's `kubectl exec` into the head pod is where it stops): Kueue admits the task's pods as one Workload on
the team's queue, kube-scheduler binds them to H100 nodes where topology-aware scheduling placed them, and each
carries the topology annotations and the CPU and memory the JobSet of the same profile does. A member of
llm-pretrain with the same config is refused.

What the machine lacks for SkyPilot's client, and the test supplies:
- `socat`, `nc` and `rsync`, which SkyPilot only probes for (`socat -V`, `nc -h`, `rsync --version`:
  skypilot 0.14.1 sky/provision/kubernetes/utils.py:3844-3900, sky/backends/backend_utils.py:4438-4455) before
  it uses them for SSH over port-forward and file sync, steps after a container runs. Stand-ins at the end of
  PATH answer the probe and refuse anything else.
- SkyPilot's accelerator catalog, which it downloads from GitHub when absent (sky/catalog/common.py:194-290,
  read at sky/utils/accelerator_registry.py:38): a file naming the task's accelerator, as the real one does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO
from tests.upstream import pyenvs, tools
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes, topology_domains
from tests.upstream.processes import Process, free_port, spawn, wait_for
from tests.upstream.twin import MANAGED, Twin, pods, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER, PROFILE = "prod-east", "ml-research", "llm-pretrain", "pretrain-8node-slices"
TEMPLATES = REPO / "rendered" / CLUSTER / "templates"
CONFIG, TASK = TEMPLATES / TEAM / "skypilot-config.yaml", TEMPLATES / TEAM / f"{PROFILE}.sky.yaml"
PROBED = {"socat": "-V", "nc": "-h", "rsync": "--version"}
"""Programs SkyPilot's client probes for, and the argument it probes with."""
NEEDS_A_CONTAINER = "Failed to get ssh user for pod"
"""Where a launch on kwok stops: the first command in the head pod's container (sky/provision/kubernetes/
instance.py:3056-3071, through `kubectl exec`)."""
@dataclass
class SkyClient:
    """SkyPilot's CLI for one person: its own HOME, API server (on a free port) and kubeconfig."""

    home: Path
    env: dict[str, str]
    server: Process

    @classmethod
    def start(cls, home: Path, kubeconfig: Path, accelerators: list[str]) -> SkyClient:
        """Spawn `sky api start --foreground` (it dies with the test) for `kubeconfig`; wait with
        `up_or_exited`."""
        sky_bin = pyenvs.python("skypilot").parent
        stand_ins = home / "stand-ins"
        stand_ins.mkdir(parents=True)
        for program, probe in PROBED.items():
            path = stand_ins / program
            path.write_text(f'#!/bin/sh\n[ "$1" = {probe} ] && exit 0\necho "{program}: a stand-in" >&2\nexit 1\n')
            path.chmod(0o755)
        catalog = home / ".sky" / "catalogs" / "v8" / "common" / "accelerators.csv"
        catalog.parent.mkdir(parents=True)
        catalog.write_text("AcceleratorName,Clouds\n" + "".join(f"{a},Kubernetes\n" for a in accelerators))
        env = {"HOME": str(home), "KUBECONFIG": str(kubeconfig), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
               # the pinned kubectl first: SkyPilot runs `kubectl exec` into its pods
               "PATH": os.pathsep.join([str(tools.binary("kubectl").parent), str(sky_bin), os.environ["PATH"],
                                        str(stand_ins)])}
        return cls(home, env, _spawn_server(home, env))

    def ready(self, timeout: float = 180) -> bool:
        """Wait until the API server answers. Its queue manager's port lies in the kernel's ephemeral range,
        so a connection elsewhere on the machine can take it between our check and SkyPilot's: then start
        again on other ports (at most twice more)."""
        for _ in range(3):
            if not wait_for(self.up_or_exited, timeout):
                return False
            if self.server.alive():
                return True
            if PORT_TAKEN not in self.server.tail():
                return False
            self.server.stop()
            self.server = _spawn_server(self.home, self.env)
        return False

    def up_or_exited(self) -> bool:
        """Whether the API server answers its health check, or has exited (then there is no use waiting)."""
        if not self.server.alive():
            return True
        port = self.env["SKYPILOT_API_SERVER_LOCAL_PORT"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def sky(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(pyenvs.python("skypilot").parent / "sky"), *args], capture_output=True,
                              text=True, env=self.env, cwd=self.home, timeout=timeout, check=False)

    def provision_logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.home.glob("sky_logs/*/provision.log")))

    def stop(self) -> None:
        """The server and its workers (one process group: its executors ignore SIGTERM and outlive the
        server unless killed), then no process left serving its port."""
        self.server.stop()
        port = self.env["SKYPILOT_API_SERVER_LOCAL_PORT"]
        assert wait_for(lambda: not _serving(port), 20), f"a SkyPilot API server on port {port} outlived the test"
        assert wait_for(lambda: not self.server.group(), 20), f"SkyPilot's {self.server.group()} outlived the test"


PORT_TAKEN = "is already in use by another process"
"""How SkyPilot's API server exits when its queue manager's port is taken (sky/server/requests/queues/base.py:
177-180)."""
QUEUE_PORT_BASE, QUEUE_PORT_DEFAULT, SERVER_PORT_DEFAULT = 50000, 50011, 46580
"""SkyPilot derives its queue manager's port from the API server's (sky/server/requests/queues/mp_queue.py:15-30,
sky/server/common.py:64)."""


def _ports() -> tuple[int, int]:
    """A free API server port whose queue manager port is free too."""
    for _ in range(50):
        port = free_port()
        queue = QUEUE_PORT_BASE + (QUEUE_PORT_DEFAULT - QUEUE_PORT_BASE + port - SERVER_PORT_DEFAULT) % 10000
        if port != SERVER_PORT_DEFAULT and _bindable(queue):
            return port, queue
    raise AssertionError("no free pair of ports for SkyPilot's API server and queue manager in 50 tries")


def _bindable(port: int) -> bool:
    """Whether `port` binds on localhost as SkyPilot checks it (SO_REUSEADDR: sky/utils/common_utils.py:1133-1153)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("localhost", port))
        except OSError:
            return False
        return True


def _spawn_server(home: Path, env: dict[str, str]) -> Process:
    """`sky api start --foreground` (it dies with the test) on a fresh pair of ports, recorded in `env`."""
    env["SKYPILOT_API_SERVER_LOCAL_PORT"] = str(_ports()[0])
    return spawn("sky-api-server", [str(pyenvs.python("skypilot").parent / "sky"), "api", "start", "--foreground"],
                 home / "api-server.log", env=env, cwd=home)


def _serving(port: str) -> list[int]:
    """Processes whose command line is SkyPilot's API server on `port` (as `sky api stop` finds them)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sky.server.server" in b" ".join(argv) and f"--port={port}".encode() in argv:
            found.append(int(proc.name))
    return found


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    pyenvs.required("skypilot", "SkyPilot")
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"sky-{CLUSTER}")) as running:
        yield running


@pytest.fixture(scope="module")
def clients(twin: tuple[Stack, Fleet, Twin], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, SkyClient]]:
    """A member of the team and a member of another team, each with SkyPilot's CLI and API server (started
    together: each takes tens of seconds)."""
    stack, fleet, _ = twin
    accelerators = [yaml.safe_load(TASK.read_text())["resources"]["accelerators"].split(":")[0]]
    started: dict[str, SkyClient] = {}
    try:
        for team in (TEAM, OTHER):
            who = stack.identity(f"sky@{team}.test", (fleet.teams[team].config.members.groups[0],))
            started[team] = SkyClient.start(tmp_path_factory.mktemp(f"sky-{team}"), who.kubeconfig, accelerators)
        for client in started.values():
            assert client.ready(), client.server.tail()
        yield started
    finally:
        for client in started.values():
            client.stop()


def _jobset_pod(profile: str) -> dict[str, Any]:
    """The pod template of the JobSet fleetgen renders for the same profile."""
    body = yaml.safe_load((TEMPLATES / TEAM / f"{profile}.jobset.yaml").read_text())
    template: dict[str, Any] = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return template


def test_a_members_launch_is_one_admitted_gang_on_h100_with_the_profiles_topology_and_share(
        twin: tuple[Stack, Fleet, Twin], clients: dict[str, SkyClient]) -> None:
    """`sky check kubernetes` enables Kubernetes for the member with the team's config (it lists pods in the
    namespace and Nodes: sky/provision/kubernetes/utils.py:3028-3034); `sky launch -y --config <config> <task>`
    then creates the task's pods, which Kueue admits as one Workload on the team's queue (the task's
    `kueue.local_queue_name`), one pod set of 8 with the profile's topology request, charged 64 H100s to the
    team; kube-scheduler binds them to the hosts Kueue chose, whole slices of 4 per block; every pod carries
    the JobSet's topology annotations and its CPU and memory. `sky down` removes them."""
    stack, fleet, _ = twin
    member = clients[TEAM]
    team, cluster = fleet.teams[TEAM].config, fleet.clusters[CLUSTER].config
    profile = next(p for p in team.job_profiles if p.name == PROFILE)
    assert profile.topology is not None and profile.topology.slice is not None
    ns = team.namespace_names[0]
    checked = member.sky("check", "kubernetes", "-o", "json", "--config", str(CONFIG))
    assert checked.returncode == 0 and json.loads(checked.stdout) == {"default": {"Kubernetes": ["compute"]}}, \
        checked.stdout + checked.stderr
    try:
        launched = member.sky("launch", "-y", "-c", "sky-slices", "--config", str(CONFIG), str(TASK))
        said = launched.stdout + launched.stderr
        assert launched.returncode != 0 and NEEDS_A_CONTAINER in said, said[-3000:] + member.provision_logs()[-3000:]

        workloads = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads")["items"]
        assert len(workloads) == 1, [w["metadata"]["name"] for w in workloads]  # one gang, not one per pod
        (workload,) = workloads
        assert condition(workload, "Admitted").get("status") == "True", workload.get("status")
        assert workload["spec"]["queueName"] == team.queue_for(cluster, profile.pool)
        (podset,) = workload["spec"]["podSets"]
        assert podset["count"] == profile.nodes and podset["topologyRequest"]["preferred"] == profile.topology.level
        assert (podset["topologyRequest"]["podSetSliceRequiredTopology"], podset["topologyRequest"][
            "podSetSliceSize"]) == (profile.topology.slice.level, profile.topology.slice.size), podset
        admission = workload["status"]["admission"]
        (assigned,) = admission["podSetAssignments"]
        assert admission["clusterQueue"] == team.name and assigned["flavors"]["nvidia.com/gpu"] == profile.pool
        assert assigned["resourceUsage"]["nvidia.com/gpu"] == str(profile.nodes * 8), assigned

        group = f"kueue.x-k8s.io/pod-group-name={workload['metadata']['name']}"

        def placed() -> list[Any]:
            found = pods(stack, ns, group)
            return found if len(found) == profile.nodes and all(p.spec.node_name for p in found) else []
        bound = wait_for(placed, 60)
        assert bound, [(p.metadata.name, p.spec.node_name) for p in pods(stack, ns, group)]
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in fake_nodes(cluster)}
        hosts = sorted(p.spec.node_name for p in bound)
        assert {nodes[h][MANAGED] for h in hosts} == {profile.pool}
        assert hosts == sorted(h for found in topology_domains(workload, "kubernetes.io/hostname").values()
                               for h in found)
        per_block = Counter(nodes[h][profile.topology.slice.level] for h in hosts)
        assert all(n % profile.topology.slice.size == 0 for n in per_block.values()), per_block

        jobset = _jobset_pod(PROFILE)
        jobset_resources = jobset["spec"]["containers"][0]["resources"]
        for pod in bound:
            annotations = pod.metadata.annotations or {}
            assert jobset["metadata"]["annotations"].items() <= annotations.items(), annotations
            (container,) = [c for c in pod.spec.containers if c.name == "ray-node"]
            requests, limits = container.resources.requests, container.resources.limits
            assert {k: requests[k] for k in ("cpu", "memory")} == {
                k: jobset_resources["requests"][k] for k in ("cpu", "memory")}, requests
            assert limits["memory"] == jobset_resources["limits"]["memory"], limits
            assert pod.metadata.labels["kueue.x-k8s.io/priority-class"] == team.default_priority
            assert pod.spec.service_account_name == "default"  # the config's remote_identity
    finally:
        down = member.sky("down", "-a", "-y")
        assert down.returncode == 0, down.stdout + down.stderr
    assert wait_for(lambda: not pods(stack, ns, "parent=skypilot"), 60)


def test_another_teams_member_cannot_launch_into_the_namespace(twin: tuple[Stack, Fleet, Twin],
                                                               clients: dict[str, SkyClient]) -> None:
    """A member of llm-pretrain with ml-research's config: the API server refuses them the namespace's pods
    (SkyPilot's credential probe), so SkyPilot disables Kubernetes for them and refuses the launch; nothing
    of theirs is written."""
    stack, fleet, _ = twin
    outsider = clients[OTHER]
    ns = fleet.teams[TEAM].config.namespace_names[0]
    checked = outsider.sky("check", "kubernetes", "--config", str(CONFIG))
    said = checked.stdout + checked.stderr
    assert f'cannot list resource \\"pods\\" in API group \\"\\" in the namespace \\"{ns}\\"' in said, said
    launched = outsider.sky("launch", "-y", "-c", "intruder", "--config", str(CONFIG), str(TASK))
    assert launched.returncode != 0 and "NoCloudAccessError" in launched.stdout + launched.stderr, \
        launched.stdout + launched.stderr
    user = f"sky@{OTHER}.test"
    writes = [(e["verb"], e.get("objectRef"), e["responseStatus"]["code"]) for e in stack.audit()
              if e["user"]["username"] == user and e["verb"] not in ("get", "list", "watch")]
    assert all(code >= 400 for _, _, code in writes), writes
