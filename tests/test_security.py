"""Issue 11: what an attacker editing only a team file (or committing a link) found, one test each.

Every test here failed on the code before the fix: the subject policy, namespaces derived from
the fleet, the safe file layer, the error boundary, escaped output and the diff's risk rules.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator import emit
from tests.conftest import REPO, add_tenancy, edit, risks_between, run, run_process, snapshot

# --- subjects ----------------------------------------------------------------------------------

SYSTEM_SUBJECTS = [
    ("groups", "system:authenticated", "everyone who can log in"),
    ("groups", "system:unauthenticated", "every anonymous request"),
    ("groups", "system:serviceaccounts", "every ServiceAccount of every namespace"),
    ("groups", "system:nodes", "every kubelet"),
    ("groups", "system:serviceaccounts:kube-system", "every ServiceAccount of namespace kube-system"),
    ("users", "system:anonymous", "every anonymous request"),
    ("users", "system:serviceaccount:kube-system:default", "the ServiceAccount kube-system:default"),
    ("users", "SYSTEM:Masters", "cluster administrators"),
]


@pytest.mark.parametrize("key,subject,meaning", SYSTEM_SUBJECTS, ids=[s[1] for s in SYSTEM_SUBJECTS])
def test_system_subjects_are_refused_by_render_and_diff(fleet_root: Path, key: str, subject: str,
                                                        meaning: str) -> None:
    edit(fleet_root, "teams/speech.yaml", "members: {groups: [speech]}", f'members: {{{key}: ["{subject}"]}}')
    before = snapshot(fleet_root / "rendered")
    result = run(fleet_root, "render")
    assert result.code == 2
    first = result.err.splitlines()[0]
    assert first.startswith(f"teams/speech.yaml:5: members.{key}[0]: {subject!r} is {meaning}"), first
    assert snapshot(fleet_root / "rendered") == before
    # the diff can no longer say "Risks: None found" about it: it refuses the fleet
    preview = run(fleet_root, "diff", "--from", str(REPO), "--to", str(fleet_root))
    assert preview.code == 2 and "members" in preview.err


def test_a_cluster_may_allow_one_exact_system_subject(fleet_root: Path) -> None:
    ci = "system:serviceaccount:ci:runner"
    edit(fleet_root, "teams/speech.yaml", "members: {groups: [speech]}",
         f'members: {{groups: [speech], users: ["{ci}"]}}')
    add_tenancy(fleet_root, "dev", f'  allowedSystemSubjects: ["{ci}"]\n')
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    binding = yaml.safe_load((fleet_root / "rendered/dev/teams/speech/speech/rolebinding-speech-members.yaml")
                             .read_text())
    assert {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ci} in binding["subjects"]
    # another system subject is still refused, naming the cluster that does not allow it
    edit(fleet_root, "teams/speech.yaml", f'users: ["{ci}"]', f'users: ["{ci}", "system:anonymous"]')
    result = run(fleet_root, "render")
    assert result.code == 2 and "(not allowed in dev)" in result.err


# --- namespaces the platform renders into ------------------------------------------------------

MOVED = [
    ("clusters/prod-east.yaml", "monitoring:\n", "monitoring:\n  namespace: observability\n", "observability",
     "monitoring ("),
    ("clusters/prod-east.yaml", "gitops:\n", "gitops:\n  namespace: gitops-ctl\n", "gitops-ctl", "platform ("),
    ("clusters/prod-west.yaml", "health:\n", "health:\n  namespace: gpu-health\n", "gpu-health", "health ("),
]


@pytest.mark.parametrize("cluster,old,new,namespace,component", MOVED, ids=[m[3] for m in MOVED])
def test_a_moved_platform_namespace_cannot_be_claimed(fleet_root: Path, cluster: str, old: str, new: str,
                                                      namespace: str, component: str) -> None:
    edit(fleet_root, cluster, old, new)
    assert run(fleet_root, "render").code == 0  # the move itself is fine
    edit(fleet_root, "teams/speech.yaml", "members:", f"namespaces: [{namespace}]\nmembers:")
    before = snapshot(fleet_root / "rendered")
    result = run(fleet_root, "render")
    assert result.code == 2
    first = result.err.splitlines()[0]
    assert first.startswith(f"teams/speech.yaml:5: namespaces[0]: namespace {namespace!r} belongs to the platform: "
                            f"{component}"), first
    assert f"from {cluster}:" in first
    assert snapshot(fleet_root / "rendered") == before


def test_compiled_team_objects_outside_their_namespaces_are_findings(monkeypatch: pytest.MonkeyPatch,
                                                                      fleet_root: Path) -> None:
    """The output-level guard holds even if a compiler goes wrong (tenancy_rules)."""
    from generator.compile import tenancy

    real = tenancy.role_bindings

    def leaky(cluster, team):  # type: ignore[no-untyped-def]
        out = real(cluster, team)
        for m in out:
            m.body["subjects"] = [*m.body["subjects"], {"kind": "Group", "name": "system:authenticated",
                                                         "apiGroup": "rbac.authorization.k8s.io"}]
            m.body["metadata"]["namespace"] = "kube-system"
        return out

    monkeypatch.setattr(tenancy, "role_bindings", leaky)
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "namespace 'kube-system' is not one of team" in result.err
    assert "Group 'system:authenticated' is not a member of team" in result.err and "[tenancy]" in result.err


# --- links -------------------------------------------------------------------------------------

@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("password: hunter2\n")
    return folder


def test_render_never_writes_through_a_linked_cluster_folder(fleet_root: Path, outside: Path) -> None:
    shutil.rmtree(fleet_root / "rendered/dev")
    (fleet_root / "rendered/dev").symlink_to(outside, target_is_directory=True)
    result = run(fleet_root, "render")
    assert result.code == 2 and "rendered/dev is a symbolic link" in result.err
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_render_never_writes_codeowners_through_a_linked_folder(fleet_root: Path, outside: Path) -> None:
    shutil.copy(REPO / "fleet.yaml", fleet_root / "fleet.yaml")
    (fleet_root / ".github").symlink_to(outside, target_is_directory=True)
    result = run(fleet_root, "render")
    assert result.code == 2 and ".github is a symbolic link" in result.err
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_input_links_are_refused_and_never_echoed(fleet_root: Path, outside: Path) -> None:
    (fleet_root / "teams/evil.yaml").symlink_to(outside / "secret.txt")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert result.err.splitlines()[:2] == [
        "teams/evil.yaml: is a symbolic link; fleetgen does not follow links in the repository (one could read or "
        "write outside it)", "    fix: replace it with the real file or folder"]
    assert "hunter2" not in result.err + result.out


def test_a_link_inside_rendered_is_refused_by_check(fleet_root: Path, outside: Path) -> None:
    target = fleet_root / "rendered/dev/kueue/kustomization.yaml"
    target.unlink()
    target.symlink_to(outside / "secret.txt")
    result = run(fleet_root, "render", "--check")
    assert result.code == 2 and "rendered/dev/kueue/kustomization.yaml is a symbolic link" not in result.out
    assert "kueue/kustomization.yaml is a symbolic link" in result.err and "hunter2" not in result.err


def test_schema_write_refuses_a_linked_schemas_folder(fleet_root: Path, outside: Path) -> None:
    (fleet_root / "schemas").symlink_to(outside, target_is_directory=True)
    result = run(fleet_root, "schema", "--write")
    assert result.code == 2 and "schemas is a symbolic link" in result.err
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_diff_output_dir_never_writes_through_links(fleet_root: Path, outside: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    (fleet_root / "preview").symlink_to(outside, target_is_directory=True)
    result = run(fleet_root, "diff", "--from", str(REPO), "--to", str(fleet_root), "--output-dir",
                 str(fleet_root / "preview"))
    assert result.code == 2 and "preview is a symbolic link" in result.err
    # a link outside the repository, named as the output folder: refused too
    (fleet_root.parent / "preview-link").symlink_to(outside, target_is_directory=True)
    result = run(fleet_root, "diff", "--from", str(REPO), "--to", str(fleet_root), "--output-dir",
                 str(fleet_root.parent / "preview-link"))
    assert result.code == 2 and "preview-link is a symbolic link" in result.err, result.err
    assert "internal error" not in result.err
    # a real folder holding a planted link: refused by name, its target untouched
    out = fleet_root.parent / "out"
    out.mkdir()
    (out / "diff.txt").symlink_to(outside / "secret.txt")
    result = run(fleet_root, "diff", "--from", str(REPO), "--to", str(fleet_root), "--output-dir", str(out))
    assert result.code == 2 and result.err.startswith("diff.txt is a symbolic link"), result.err
    assert (outside / "secret.txt").read_text() == "password: hunter2\n"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


def test_diff_base_with_a_committed_absolute_link_is_a_clear_error(fleet_root: Path, outside: Path) -> None:
    _git(fleet_root, "init", "-q")
    (fleet_root / "teams/evil.yaml").symlink_to(outside / "secret.txt")
    _git(fleet_root, "add", "-A")
    _git(fleet_root, "commit", "-q", "-m", "base")
    (fleet_root / "teams/evil.yaml").unlink()
    result = run(fleet_root, "diff", "--base", "HEAD")
    assert result.code == 2
    assert result.err.startswith("HEAD holds symbolic links among the inputs (teams/evil.yaml)"), result.err
    assert "hunter2" not in result.err


@pytest.mark.parametrize("linked", ["fleet.yaml", "teams"])
@pytest.mark.parametrize("rendered", [False, True], ids=["compiled", "committed"])
def test_diff_base_with_a_linked_top_level_input_is_a_clear_error(fleet_root: Path, outside: Path, linked: str,
                                                                  rendered: bool) -> None:
    """A top-level input that is a link in the base (a file or a whole folder) is refused by name,
    and nothing it points at is read."""
    if linked == "teams":
        shutil.move(fleet_root / "teams", fleet_root.parent / "teams")
        (fleet_root / "teams").symlink_to(outside, target_is_directory=True)
    else:
        (fleet_root / "fleet.yaml").symlink_to(outside / "secret.txt")
    _git(fleet_root, "init", "-q")
    _git(fleet_root, "add", "-A")
    _git(fleet_root, "commit", "-q", "-m", "base")
    (fleet_root / linked).unlink()
    if linked == "teams":
        shutil.move(fleet_root.parent / "teams", fleet_root / "teams")
    result = run(fleet_root, "diff", "--base", "HEAD", *(["--rendered"] if rendered else []))
    assert result.code == 2
    assert result.err.startswith(f"HEAD holds symbolic links among the inputs ({linked})"), result.err
    assert "hunter2" not in result.err


# --- the error boundary ------------------------------------------------------------------------

def test_a_full_disk_while_staging_leaves_the_old_tree(fleet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    before = snapshot(fleet_root / "rendered")

    def full(folder: Path, files: dict[str, bytes], strip: str = "") -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(folder))

    monkeypatch.setattr(emit, "_write_files", full)
    result = run(fleet_root, "render")
    assert result.code == 2
    error = result.err[result.err.index("error: "):].splitlines()  # after the notes and warnings
    assert error[0].startswith("error: render failed: No space left on device"), result.err
    assert error[1].startswith("    fix: the disk is full") and len(error) == 2
    assert snapshot(fleet_root / "rendered") == before
    assert not list((fleet_root / ".fleetgen").glob("stage-*"))


def test_a_read_only_tree_is_rolled_back(fleet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second rename fails (EROFS): the first is undone, the journal dropped, the tree old."""
    edit(fleet_root, "clusters/dev.yaml", "retention: 7d", "retention: 8d")
    edit(fleet_root, "clusters/prod-east.yaml", "scrapeInterval: 15s", "scrapeInterval: 20s")
    before = snapshot(fleet_root / "rendered")
    real, calls = os.rename, [0]

    def read_only(src: object, dst: object, **where: int) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(errno.EROFS, "Read-only file system", str(src))
        real(src, dst, **where)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", read_only)
    result = run(fleet_root, "render")
    monkeypatch.undo()
    assert result.code == 2 and "fix: the file system is read-only" in result.err, result.err
    assert snapshot(fleet_root / "rendered") == before
    assert not (fleet_root / ".fleetgen/journal.json").exists()
    assert run(fleet_root, "render").code == 0


def test_an_unreadable_input_is_a_finding(fleet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from generator import repofiles

    real = repofiles.read_bytes

    def denied(root: Path, rel: object) -> bytes:
        if str(rel) == "teams/speech.yaml":
            raise PermissionError(errno.EACCES, "Permission denied", str(rel))
        return real(root, rel)  # type: ignore[arg-type]

    monkeypatch.setattr(repofiles, "read_bytes", denied)
    result = run(fleet_root, "render", "--check")
    assert result.code == 2
    assert result.err.splitlines()[0] == "teams/speech.yaml: cannot read file: Permission denied"


def test_a_second_render_waits_then_says_why(fleet_root: Path) -> None:
    with emit.locked(fleet_root):
        proc = run_process(fleet_root, "render", "--lock-timeout", "1")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"another fleetgen render is running in this repository (pid {os.getpid()})")
    assert run(fleet_root, "render").code == 0  # released


def test_a_non_utf8_locale_renders_and_prints_escapes(fleet_root: Path) -> None:
    """LC_ALL=C without Python's UTF-8 coercion: files are still read as UTF-8, and text the
    terminal's encoding cannot hold is printed as escapes, not a UnicodeEncodeError."""
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    command = [sys.executable, "-m", "generator", "--root", str(fleet_root), "render", "--check"]
    proc = subprocess.run(command, capture_output=True, env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    edit(fleet_root, "teams/speech.yaml", "groups: [speech]", 'groups: ["sp\u00e9ech-\u0430dmin"]')
    proc = subprocess.run(command, capture_output=True, env={**env, "PYTHONIOENCODING": "latin-1"}, check=False,
                          timeout=300)
    err = proc.stderr.decode("latin-1")
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "members.groups[0]: contains '\\u0430' (U+0430 CYRILLIC)" in err


@pytest.mark.parametrize("verb", [["health", "once"], ["health", "status"], ["health", "reset-breaker"],
                                  ["job", "logs", "nope", "-n", "speech"], ["job", "status", "nope", "-n", "speech"]])
def test_an_unreachable_cluster_is_one_line_and_exit_2(verb: list[str]) -> None:
    extra = ["--cluster", "dev"] if verb[0] == "health" else []
    proc = run_process(REPO, *verb, *extra, "--server", "https://127.0.0.1:9", "--token", "x",
                       "--request-timeout", "2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2, proc.stderr
    assert "cannot reach the cluster" in proc.stderr


def test_sigterm_while_staging_leaves_the_old_tree_and_no_leftovers(fleet_root: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    before = snapshot(fleet_root / "rendered")
    script = ("import os, sys, time\nimport generator.emit as e\norig = e._write_files\n"
              "def slow(folder, files, strip=''):\n    orig(folder, dict(list(files.items())[:5]), strip)\n"
              "    open(os.environ['MARK'], 'w').close()\n    time.sleep(60)\n"
              "e._write_files = slow\nfrom generator.cli import main\n"
              "sys.argv = ['fleetgen', '--root', sys.argv[1], 'render']\nmain()\n")
    mark = fleet_root.parent / "mark"
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-c", script, str(fleet_root)], env={**os.environ, "MARK": str(mark)},
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "\nerror: render interrupted; rendered/ is either" in err, err
    assert snapshot(fleet_root / "rendered") == before
    assert not list((fleet_root / ".fleetgen").glob("stage-*"))


def test_fleetgen_work_area_is_invisible_to_git(fleet_root: Path) -> None:
    _git(fleet_root, "init", "-q")
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    emit.work_dir(fleet_root)
    (fleet_root / ".fleetgen/stage-leftover").mkdir()  # as a kill -9 would leave it
    status = subprocess.run(["git", "-C", str(fleet_root), "status", "--porcelain"], capture_output=True, text=True,
                            check=True).stdout
    assert ".fleetgen" not in status


# --- output that cannot drive a terminal or a CI log -------------------------------------------

def test_a_newline_in_a_key_cannot_write_a_workflow_command(fleet_root: Path) -> None:
    (fleet_root / "teams/speech.yaml").write_text(
        'name: speech\nowners: ["@acme/speech"]\nquotas:\n  "dev\\n::error file=x::pwned":\n    l4: {gpus: 1}\n')
    result = run(fleet_root, "render")
    assert result.code == 2
    assert not [line for line in result.err.splitlines() if line.lstrip().startswith("::")], result.err
    assert "dev\\x0a::error file=x::pwned" in result.err


def test_a_newline_in_a_file_name_cannot_write_a_workflow_command(fleet_root: Path) -> None:
    (fleet_root / "teams/x\n::error::pwned.yaml").write_text("name: x\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert not [line for line in result.err.splitlines() if line.lstrip().startswith("::")], result.err
    assert "teams/x\\x0a::error::pwned.yaml" in result.err


def test_team_text_with_hidden_characters_is_refused_on_input(fleet_root: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "args: [--config, configs/asr-small.yaml]",
         'args: [--config, "\\e]52;c;cm0gLXJmIH4=\\a"]')
    result = run(fleet_root, "render")
    assert result.code == 2
    assert result.err.splitlines()[0] == (
        "teams/speech.yaml:19: jobProfiles[0].args[1]: contains the control or invisible character U+001B (a control "
        "character), "
        "which terminals, logs and reviewers do not show as it is")


def test_diff_prints_escape_sequences_as_text(tmp_path: Path) -> None:
    """Two rendered trees (any folder can be compared): values are printed escaped."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(REPO / "rendered", before)
    shutil.copytree(REPO / "rendered", after)
    path = after / "dev/teams/speech/speech/localqueue-default.yaml"
    body = yaml.safe_load(path.read_text())
    body["metadata"]["annotations"] = {"note": "\x1b]52;c;cm0gLXJmIH4=\x07 \r overwrite \u202e txt.exe"}
    from generator.yamltext import to_yaml

    path.write_text(to_yaml(body))
    result = run(REPO, "diff", "--from", str(before), "--to", str(after), "--format", "text", "--color")
    assert result.code == 1
    for raw in ("\x1b]", "\r", "\u202e", "\x07"):
        assert raw not in result.out, repr(raw)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in result.out and "\\u202e" in result.out
    assert "\x1b[" in result.out  # fleetgen's own colours are kept with --color


# --- the diff's risk rules ---------------------------------------------------------------------

def _risks(fleet_root: Path) -> dict[str, list[str]]:
    return risks_between(REPO, fleet_root)


@pytest.mark.parametrize("old,new,expected", [
    ("groups: [speech]", "groups: [speech, contractors]",
     {"members-added": ["medium: dev: team speech adds Group 'contractors': roles edit, fleetgen-team-member in "
                        "namespace speech; role fleetgen-members-speech cluster-wide"]}),
    ("groups: [speech]", "groups: [speech-ops]",
     {"members-added": ["medium: dev: team speech adds Group 'speech-ops': roles edit, fleetgen-team-member in "
                        "namespace speech; role fleetgen-members-speech cluster-wide"],
      "members-removed": ["low: dev: team speech removes Group 'speech': roles edit, fleetgen-team-member in "
                          "namespace speech; role fleetgen-members-speech cluster-wide"]}),
    ("members: {groups: [speech]}", "members: {groups: [speech], users: [alice@acme.com]}",
     {"members-added": ["medium: dev: team speech adds User 'alice@acme.com': roles edit, fleetgen-team-member in "
                        "namespace speech; role fleetgen-members-speech cluster-wide"]}),
])
def test_every_member_change_is_named_once(fleet_root: Path, old: str, new: str,
                                           expected: dict[str, list[str]]) -> None:
    """Who holds a team's rights is the one thing a team file decides alone: every subject is named,
    once per team and direction (not once per RoleBinding), medium when someone gains rights."""
    edit(fleet_root, "teams/speech.yaml", old, new)
    assert _risks(fleet_root) == expected


def test_a_member_of_a_team_on_four_clusters_is_one_line(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "groups: [vision, vision-contractors]",
         "groups: [vision, vision-contractors], users: [gina@acme.com]")
    assert _risks(fleet_root) == {"members-added": [
        "medium: dev, hub, prod-east, prod-west: team vision adds User 'gina@acme.com': roles edit, "
        "fleetgen-team-member in namespaces vision, vision-eval; role fleetgen-members-vision cluster-wide"]}


def test_a_fair_sharing_weight_jump_over_4x_is_high(fleet_root: Path) -> None:
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 1.5", "fairSharingWeight: 7")
    found = _risks(fleet_root)["fair-sharing-weight-jump"]
    assert found and all(f.startswith("high: ") and "1.5 → 7 (more than 4x)" in f for f in found), found


def test_a_weight_change_within_4x_is_not_flagged(fleet_root: Path) -> None:
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 1.5", "fairSharingWeight: 5")
    assert "fair-sharing-weight-jump" not in _risks(fleet_root)


def test_a_teams_new_namespace_is_one_low_line(fleet_root: Path) -> None:
    """A name the cluster's namespace policy lets the team claim is the team's own: its members'
    rights there are the line, not one line per object the namespace holds."""
    edit(fleet_root, "teams/speech.yaml", "members:", "namespaces: [speech, speech-eval]\nmembers:")
    assert _risks(fleet_root) == {"namespace-added": [
        "low: dev: team speech gets namespace speech-eval: Group 'speech' get roles edit, fleetgen-team-member there"]}


def test_a_namespace_taken_from_another_team_is_high(fleet_root: Path, tmp_path: Path) -> None:
    for cluster in ("dev", "prod-east", "prod-west"):  # where ml-research has quota
        add_tenancy(fleet_root, cluster, "  namespaces: {allowed: [shared-eval]}\n")
    edit(fleet_root, "teams/ml-research.yaml", "namespaces: [ml-research]", "namespaces: [ml-research, shared-eval]")
    base = tmp_path / "base"
    shutil.copytree(fleet_root, base)
    edit(fleet_root, "teams/ml-research.yaml", "namespaces: [ml-research, shared-eval]", "namespaces: [ml-research]")
    edit(fleet_root, "teams/speech.yaml", "members:", "namespaces: [speech, shared-eval]\nmembers:")
    found = risks_between(base, fleet_root)
    assert found["namespace-claimed"] == ["high: dev: team 'speech' claims namespace 'shared-eval' (was team "
                                          "'ml-research''s): its members get edit rights there"], found


def test_member_reads_move_with_the_cluster_file_in_one_line_each_way(fleet_root: Path) -> None:
    """`tenancy.membersReadNodes` off, then on again: every team's `fleetgen-members-<team>` changes alike, and
    the preview says so once per direction, naming the reads and the teams (issue 56), not once per role with
    a generic 'may grant more rights'."""
    edit(fleet_root, "clusters/prod-east.yaml", "tenancy: {membersReadNodes: true}",
         "tenancy: {membersReadNodes: false}")
    teams = "teams llm-pretrain, ml-research, platform-ci, vision"
    assert risks_between(REPO, fleet_root) == {"member-reads-narrowed": [
        f"low: prod-east: members of {teams} lose cluster-wide reads of nodes, runtimeclasses.node.k8s.io "
        "(fleetgen-members-<team>)"]}
    assert risks_between(fleet_root, REPO) == {"member-reads-widened": [
        f"medium: prod-east: members of {teams} gain cluster-wide reads of nodes, runtimeclasses.node.k8s.io "
        "(fleetgen-members-<team>)"]}
    render = run(fleet_root, "render")
    assert render.code == 0, render.err
    role = yaml.safe_load((fleet_root / "rendered/prod-east/teams/ml-research/"
                           "clusterrole-fleetgen-members-ml-research.yaml").read_text())
    # the default: no Node or RuntimeClass read, the team's own pending list and the Trainer runtimes only
    assert [(r["apiGroups"], r["resources"], r["verbs"], r.get("resourceNames")) for r in role["rules"]] == [
        (["visibility.kueue.x-k8s.io"], ["clusterqueues/pendingworkloads"], ["get"], ["ml-research"]),
        (["trainer.kubeflow.org"], ["clustertrainingruntimes"], ["get", "list", "watch"], None)]
