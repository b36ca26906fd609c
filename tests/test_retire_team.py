"""Issue 57: retiring a team, as docs/operations/retire-a-team.md says it, step by step in the preview.

First its queue stops taking work (`stopPolicy: Hold`: admitted jobs finish, nothing new is admitted;
the real Kueue's side of a stop is tests/test_e2e_fleet.py's drained-queue story); then its file goes,
which is one high line: its namespaces are deleted with everything in them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import edit, risks_between


def test_a_team_is_stopped_then_removed_each_in_one_line(repo: Path, tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    shutil.copytree(repo, stopped)
    edit(stopped, "teams/recsys.yaml", "quotas:\n", "stopPolicy: {prod-west: Hold}\nquotas:\n")
    first = risks_between(repo, stopped)
    assert first == {"queue-stopped": ["medium: prod-west: ClusterQueue recsys stopPolicy None -> Hold: admits "
                                       "nothing new; admitted workloads run to completion"]}, first

    removed = tmp_path / "removed"
    shutil.copytree(stopped, removed)
    (removed / "teams" / "recsys.yaml").unlink()
    second = risks_between(stopped, removed)
    (line,) = second.pop("team-removed")
    assert line.startswith("high: prod-west: team recsys leaves:") and \
        "namespace recsys deleted with every object and running job" in line, line
    assert "quota-reduced" not in second and "namespace-deleted" not in second, second
