"""Issue 52: every command that takes a team, cluster, pool, profile, job or namespace name holds it to
its rule before it reads, writes or connects to anything: names become paths (`teams/<team>.yaml`)
and parts of the API URL."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from generator.errors import UsageError
from generator.jobs import Job, RayCluster
from tests.conftest import REPO, run

BAD = "../../etc/x"
COMMANDS = [  # (arguments, how the error names the argument)
    (["render", "--cluster", BAD], "'--cluster'"),
    (["render", "--check", "--cluster", "dev", "--cluster", BAD], "'--cluster'"),
    (["validate", "--offline", "--cluster", BAD], "'--cluster'"),
    (["explain", "team", BAD], "'NAME'"),
    (["explain", "cluster", BAD], "'NAME'"),
    (["job", "new", BAD, "pretrain"], "'TEAM'"),
    (["job", "new", "ml-research", BAD], "'PROFILE'"),
    (["job", "submit", BAD, "pretrain"], "TEAM:"),
    (["job", "submit", "ml-research", BAD], "PROFILE:"),
    (["job", "status", "x", "--team", BAD], "'--team'"),
    (["job", "logs", "x", "--team", BAD], "'--team'"),
    (["job", "cancel", "x", "--team", BAD], "'--team'"),
    (["job", "wait", "x", "--team", BAD], "'--team'"),
    (["job", "list", "--team", BAD], "'--team'"),
    (["job", "queues", "--team", BAD], "'--team'"),
    (["health", "once", "--cluster", BAD], "'--cluster'"),
    (["health", "status", "--cluster", BAD], "'--cluster'"),
    (["health", "run", "--cluster", BAD], "'--cluster'"),
    (["health", "reset-breaker", "--cluster", "dev", "--pool", BAD], "'--pool'"),
    # a job or namespace of `.` or `..` is a dot segment of the API URL, resolved away by the client
    (["job", "cancel", ".", "--namespace", "ml-research"], "'NAME'"),
    (["job", "status", "..", "--namespace", "ml-research"], "'NAME'"),
    (["job", "logs", "x", "--namespace", ".."], "'--namespace'"),
    (["job", "wait", "x", "-n", "."], "'-n' / '--namespace'"),
    (["job", "list", "--namespace", ".."], "'-n' / '--namespace'"),
]


@pytest.mark.parametrize(("args", "named"), COMMANDS, ids=[" ".join(a[:2]) + f" {n}" for a, n in COMMANDS])
def test_a_name_argument_is_checked_before_anything_else(args: list[str], named: str,
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # a command that got as far as connecting says so
    result = run(REPO, *args)
    assert result.code == 2, result.out + result.err
    assert named in result.err and "must be a DNS-1" in result.err and "such as" in result.err, result.err
    assert "kubeconfig" not in result.err and "unknown" not in result.err, result.err


def test_a_profile_name_is_held_to_the_profile_rule() -> None:
    """Profiles are DNS-1035 labels (they name JobSets): `1abc` is no profile, `ml-research` is a team."""
    result = run(REPO, "job", "new", "ml-research", "1abc")
    assert result.code == 2 and "'PROFILE'" in result.err and "DNS-1035" in result.err, result.err


@pytest.mark.parametrize(("what", "example"), [("team", "research"), ("cluster", "prod")])
def test_explain_names_the_kind_it_was_asked_for(what: str, example: str) -> None:
    result = run(REPO, "explain", what, "Dev")
    assert result.code == 2 and f"give a {what} name such as {example}" in result.err, result.err


@pytest.mark.parametrize(("make", "said"), [
    (lambda: Job.on_cluster(None, ".", "ml-research"), "name '.'"),
    (lambda: Job.on_cluster(None, "x", ".."), "namespace '..'"),
    (lambda: Job({"kind": "JobSet", "metadata": {"name": "x", "namespace": "../kube-system"}}), "namespace '../"),
    (lambda: RayCluster.on_cluster(object(), "..", "ml-research"), "name '..'"),
    (lambda: RayCluster(None, object(), body={"kind": "RayCluster", "metadata": {"name": "x", "namespace": "."}}),
     "namespace '.'"),
], ids=["job-name", "job-namespace", "job-file", "ray-name", "ray-file"])
def test_the_python_api_refuses_dot_names_too(make: Callable[[], object], said: str) -> None:
    """Every handle on a job (the SDK's on_cluster, a job file, a profile) is made by two constructors;
    both hold the name and namespace that will be parts of the request URL."""
    with pytest.raises(UsageError, match=re.escape(said)):
        make()
