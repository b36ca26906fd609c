"""The rendered job's own command and environment (a JobSet's or a batch Job's), run by the real
torchrun on two local nodes.

Each node is one process standing in for one pod: its argv is the container's command and args with
Kubernetes' $(VAR) expansion, its environment the container's env (the completion index that the
Job controller injects, the rank read from the pod's annotation). Only what a laptop cannot have is
replaced: MASTER_ADDR (the pod hostname; its match with the pod is checked on the real API server in
test_e2e_fleet and test_twin_scheduling) becomes 127.0.0.1, MASTER_PORT a free port, and NPROC_PER_NODE 2 CPU
ranks for 8 GPUs. The program is a gloo all-reduce across every rank.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.jobs import Job
from generator.kinds.podspec import CONTAINER
from tests.conftest import REPO
from tests.upstream import pyenvs
from tests.upstream.processes import free_port

pytestmark = pytest.mark.upstream

PROGRAM = '''
import json, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
if os.environ.get("FAIL_RANK") == str(rank):
    # os._exit: sys.exit ran gloo's teardown at interpreter exit, which sometimes aborted
    # (SIGABRT) before the exit status 3 reached torchrun.
    os._exit(3)
record = {"rank": rank, "world": world, "sum": total.item(), "argv": sys.argv[2:],
          "node": int(os.environ["GROUP_RANK"]), "unbuffered": os.environ.get("PYTHONUNBUFFERED")}
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as out:
    json.dump(record, out)
dist.destroy_process_group()
'''
REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


@pytest.fixture(scope="module")
def torch_bin() -> Iterator[Path]:
    yield pyenvs.required("torch", "torch").parent


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command and args: $$ is a literal $, unknown names stay."""
    return REFERENCE.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def pods(body: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(replicated job, completion index, container) of every pod the JobSet (or batch Job: `job`) makes."""
    rjobs = body["spec"]["replicatedJobs"] if body["kind"] == "JobSet" else [{"name": "job", "template": body}]
    for rjob in rjobs:
        job = rjob["template"]["spec"]
        container = next(c for c in job["template"]["spec"]["containers"] if c["name"] == CONTAINER)
        for index in range(int(job["completions"])):
            yield rjob["name"], index, container


def pod_process(container: dict[str, Any], index: int, bin_dir: Path, port: int,
                extra: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """argv and environment of the container of pod `index`, as the kubelet would start it."""
    env = {"JOB_COMPLETION_INDEX": str(index)}  # injected into every pod of an Indexed Job
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
        else:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == INDEX_FIELD, var
            env[var["name"]] = str(index)
    stand_ins = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NPROC_PER_NODE": "2"}
    assert stand_ins.keys() <= env.keys()
    env.update(stand_ins)
    argv = [expand(part, env) for part in [*container["command"], *container["args"]]]
    tmp = bin_dir.parent / f"tmp-{index}"  # each pod its own /tmp, as in its container (torchelastic's files)
    tmp.mkdir(exist_ok=True)
    process_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "TMPDIR": str(tmp),
                   **env, **extra}
    return argv, process_env


def rendezvous_port() -> int:
    """A free port below the kernel's ephemeral range: a port from free_port() is one the kernel hands
    out, and until node 0 binds it, a listener bound to port 0 (another test's gloo ranks) may get it;
    node 1 then talks to that listener and hangs."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(min(20000, low - 1000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return free_port()


def run_nodes(body: dict[str, Any], bin_dir: Path, logs: Path, extra: dict[str, str] | None = None,
              timeout: float = 240) -> list[subprocess.CompletedProcess[str]]:
    """Every node's torchrun, side by side; each writes to its own files in `logs`, not to a pipe: a pipe
    read one node after the other filled up while the first was waited for (torch's C++ stack traces in
    its store's connection warnings), the second node blocked writing, and the rendezvous stalled for
    minutes, up to the timeout."""
    port = rendezvous_port()
    started = []
    for i, (_, index, container) in enumerate(pods(body)):
        argv, env = pod_process(container, index, bin_dir, port, extra or {})
        with (logs / f"node{i}.out").open("w") as out, (logs / f"node{i}.err").open("w") as err:
            started.append(subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL))
    deadline = time.monotonic() + timeout
    try:
        for proc in started:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for proc in started:
            proc.kill()
            proc.wait()
        tails = "\n".join(f"node {i} ({'still running' if code == -9 else f'exit {code}'}):\n"
                          f"{(logs / f'node{i}.err').read_text()[-3000:]}"
                          for i, code in enumerate(p.returncode for p in started))
        pytest.fail(f"torchrun did not finish in {timeout:g} s\n{tails}")
    return [subprocess.CompletedProcess(proc.args, proc.returncode, (logs / f"node{i}.out").read_text(),
                                        (logs / f"node{i}.err").read_text()) for i, proc in enumerate(started)]


def two_node_job(team: str, profile: str, script: Path, out: Path) -> dict[str, Any]:
    """The profile resized to two nodes, its program replaced, as `fleetgen job new -- CMD` does."""
    job = Job.from_profile(team, profile, root=REPO, nodes=2,
                           command=["python", str(script), str(out), "--lr", "3e-4", "--note", "a b;c"])
    return job.body


@pytest.mark.parametrize("team,profile,first", [("ml-research", "pretrain-4node", "workers"),
                                                 ("llm-pretrain", "pretrain-70b", "leader"),
                                                 ("speech", "asr-eval", "job")])
def test_two_nodes_rendezvous_and_all_reduce(torch_bin: Path, tmp_path: Path, team: str, profile: str,
                                             first: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    body = two_node_job(team, profile, script, tmp_path)
    assert [name for name, _, _ in pods(body)][0] == first  # a leader job ranks before its workers
    results = run_nodes(body, torch_bin, tmp_path)
    for result in results:
        assert result.returncode == 0, f"{result.args}\n{result.stderr[-3000:]}"
    records = sorted((json.loads(p.read_text()) for p in tmp_path.glob("rank*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in records] == [0, 1, 2, 3]
    assert {r["world"] for r in records} == {4} and {r["sum"] for r in records} == {10.0}
    # Node ranks: pod 0 (the leader, or worker 0) is node 0; the next pod is node 1 -- for a
    # leader's workers computed as completion index + 1 by the fixed shell script.
    assert [r["node"] for r in records] == [0, 0, 1, 1]
    assert all(r["argv"] == ["--lr", "3e-4", "--note", "a b;c"] for r in records)  # argv, never shell text
    assert {r["unbuffered"] for r in records} == {"1"}


def test_torchrun_exits_1_whatever_the_program_exit_code(torch_bin: Path, tmp_path: Path) -> None:
    """Why exit 1 is not a fail-fast code under torchrun: a rank exiting 3 makes torchrun exit 1."""
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    job = Job.from_profile("ml-research", "finetune-1node", root=REPO, command=["python", str(script), str(tmp_path)])
    [result] = run_nodes(job.body, torch_bin, tmp_path, {"FAIL_RANK": "1"})
    assert result.returncode == 1, result.stderr[-2000:]
    assert "exitcode  : 3" in result.stderr or "exitcode: 3" in result.stderr, result.stderr[-2000:]
    codes = job.body["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]
    assert 1 not in codes["values"]


def test_without_no_python_torchrun_runs_python_on_python(torch_bin: Path, tmp_path: Path) -> None:
    """The command as it was rendered before --no-python: every rank ran `python -u python ...`."""
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    job = Job.from_profile("ml-research", "finetune-1node", root=REPO, command=["python", str(script), str(tmp_path)])
    container = job.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["args"].remove("--no-python")
    [result] = run_nodes(job.body, torch_bin, tmp_path)
    assert result.returncode != 0
    assert "can't open file" in result.stderr and "python" in result.stderr, result.stderr[-2000:]
    assert not list(tmp_path.glob("rank*.json"))
