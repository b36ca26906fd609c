"""The README's notebook session, run as written on prod-east's fleet twin (issue 32).

The twin is prod-east as rendered (its published fleet files included) on the real API server with
Kueue, JobSet, the Job controller, kube-scheduler, kwok and the real KubeRay operator
(tests/test_ray.py). kwok also plays the kubelets' log endpoint, serving one file as every
container's log. The session's `connect(context="prod-east")` reads a kubeconfig whose one context is
named so, for a member of ml-research, from a folder with no fleet repository: it needs the cluster
alone. The block is taken from README.md and executed unchanged; what it prints is checked here.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO
from tests.upstream.cluster import Stack
from tests.upstream.fleet import custom
from tests.upstream.operators import ray_all_gone, ray_crds, start_kuberay
from tests.upstream.processes import wait_for
from tests.upstream.twin import LOG, operator_twin

pytestmark = pytest.mark.upstream

MARKER = "<!-- notebook session: tests/test_readme_notebook.py runs this block as written -->\n```python\n"


def session() -> str:
    """The README's notebook block, exactly as a reader copies it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(MARKER) + len(MARKER)
    return text[start:text.index("\n```\n", start) + 1]


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet]]:
    with operator_twin("prod-east", upstream_etcd, tmp_path_factory.mktemp("notebook-prod-east"), ray_crds(),
                       start_kuberay) as (stack, fleet, _):
        yield stack, fleet


def test_the_readme_notebook_session_runs_as_written(twin: tuple[Stack, Fleet], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    stack, fleet = twin
    team = fleet.teams["ml-research"].config
    who = stack.identity("notebook@acme.com", (team.members.groups[0],))
    config = yaml.safe_load(who.kubeconfig.read_text())
    (context,) = config["contexts"]
    context["name"] = config["current-context"] = "prod-east"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.chdir(tmp_path)  # no fleet repository here

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(session(), "README.md", "exec"), {"__name__": "__notebook__"})  # noqa: S102 - our README
    lines = printed.getvalue().splitlines()

    assert lines[0] == ("ml-research: queue ml-research in ml-research: h100 (NVIDIA-H100-80GB-HBM3) on prod-east: "
                        "64 guaranteed + 32 borrowable; 0 in use, 64 free, up to 96 if the cohort is idle"), lines
    # Running once its pod runs on an H100 node; kwok may have ended the pod (succeeded) by the next look.
    # (JobSet's word then follows: "nb-finetune: succeeded: jobset completed successfully").
    assert lines[1] == "nb-finetune: running on workers -> h100" or lines[1].startswith("nb-finetune: succeeded"), \
        lines
    assert lines[2:4] == LOG.splitlines(), lines
    assert lines[4:] == ["http://nb-ray-head-svc.ml-research.svc:8265", *LOG.splitlines()], lines

    objects = custom(stack)

    def gone() -> bool:
        jobsets = objects.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "ml-research", "jobsets")
        return not jobsets["items"] and ray_all_gone(stack, "ml-research")

    assert wait_for(gone, 90), "the session's job or Ray cluster is still there"
