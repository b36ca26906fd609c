"""The rendered JobSet's own command and environment, run by the real torchrun on two local nodes.

Each node is one process standing in for one pod: its argv is the container's command and args with
Kubernetes' $(VAR) expansion, its environment the container's env (the completion index that the
Job controller injects, the rank read from the pod's annotation). Only what a laptop cannot have is
replaced: MASTER_ADDR (JobSet's pod hostname; its match with the pod is checked on the real API
server in test_e2e_fleet) becomes 127.0.0.1, MASTER_PORT a free port, and NPROC_PER_NODE 2 CPU
ranks for 8 GPUs. The program is a gloo all-reduce across every rank.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.compile.jobs import CONTAINER
from generator.jobs import Job
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
    if not pyenvs.current("torch"):
        message = "torch is not installed: python3 tests/upstream/pyenvs.py build"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield pyenvs.python("torch").parent


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command and args: $$ is a literal $, unknown names stay."""
    return REFERENCE.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def pods(body: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(replicated job, completion index, container) of every pod the JobSet makes."""
    for rjob in body["spec"]["replicatedJobs"]:
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


def run_nodes(body: dict[str, Any], bin_dir: Path, extra: dict[str, str] | None = None,
              timeout: float = 240) -> list[subprocess.CompletedProcess[str]]:
    port = free_port()
    started = []
    for _, index, container in pods(body):
        argv, env = pod_process(container, index, bin_dir, port, extra or {})
        started.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for proc in started:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in started:
                other.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def two_node_job(team: str, profile: str, script: Path, out: Path) -> dict[str, Any]:
    """The profile resized to two nodes, its program replaced, as `fleetgen job new -- CMD` does."""
    job = Job.from_profile(team, profile, root=REPO, nodes=2,
                           command=["python", str(script), str(out), "--lr", "3e-4", "--note", "a b;c"])
    return job.body


@pytest.mark.parametrize("team,profile,first", [("ml-research", "pretrain-4node", "workers"),
                                                 ("llm-pretrain", "pretrain-70b", "leader")])
def test_two_nodes_rendezvous_and_all_reduce(torch_bin: Path, tmp_path: Path, team: str, profile: str,
                                             first: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    body = two_node_job(team, profile, script, tmp_path)
    assert [name for name, _, _ in pods(body)][0] == first  # a leader job ranks before its workers
    results = run_nodes(body, torch_bin)
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
    [result] = run_nodes(job.body, torch_bin, {"FAIL_RANK": "1"})
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
    [result] = run_nodes(job.body, torch_bin)
    assert result.returncode != 0
    assert "can't open file" in result.stderr and "python" in result.stderr, result.stderr[-2000:]
    assert not list(tmp_path.glob("rank*.json"))
