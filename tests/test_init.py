"""Issue 29: `fleetgen init` turns a copy of this repository into a fleet of one's own, which passes its
own checks: render, validate with kubeconform, a diff on a branch, its workflows under actionlint and
its own tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from generator import __version__
from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from generator.scaffold.init import GENERATOR
from tests.conftest import REPO, checkout_copy
from tests.init_runs import INIT_ARGS, tree_state

SPEC = {flag.removeprefix("--").replace("-", "_"): int(value) if flag in ("--gpus-per-node", "--nodes") else value
        for flag, value in zip(INIT_ARGS[1::2], INIT_ARGS[2::2], strict=True)}
"""INIT_ARGS as FleetSpec's fields, for the tests that call init_fleet itself."""


def fleetgen(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "generator", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=root)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = checkout_copy(tmp_path_factory.mktemp("new") / "fleet")
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 0, result.stderr
    return root


def test_init_replaces_the_example_with_a_documented_skeleton(fleet: Path) -> None:
    assert sorted(p.name for p in (fleet / "teams").iterdir()) == ["research.yaml"]
    assert sorted(p.name for p in (fleet / "clusters").iterdir()) == ["prod.yaml"]
    assert sorted(p.name for p in (fleet / "rendered").iterdir()) == ["gitops", "prod"]
    assert sorted(p.name for p in (fleet / "tests").iterdir()) == ["run", "test_fleet.py", "upstream"]
    assert not (fleet / "benchmarks").exists() and (fleet / "schemas").is_dir()
    # fleetgen is a pinned dependency (issue 57): none of its own tree stays, one line names its release
    for rel in GENERATOR:
        assert not (fleet / rel).exists() or rel == "README.md", rel
    assert (fleet / "fleetgen.txt").read_text().splitlines()[-1] == (
        f"fleetgen @ git+https://github.com/gpuco/fleetgen.git@v{__version__}")
    assert "fleetgen.txt" in (fleet / "README.md").read_text()
    assert yaml.safe_load((fleet / "fleet.yaml").read_text())["platformOwners"] == ["@gpuco/platform"]
    assert "@gpuco/platform" in (fleet / ".github/CODEOWNERS").read_text()
    assert "acme" not in (fleet / ".github/CODEOWNERS").read_text()
    cluster_text = (fleet / "clusters/prod.yaml").read_text()
    cluster = yaml.safe_load(cluster_text)
    assert cluster["gitops"] == {"engine": "argocd", "repoUrl": "https://github.com/gpuco/fleet.git"}
    assert cluster["images"] == {"registry": "ghcr.io/gpuco"}
    assert cluster["nodePools"][0]["gpu"] == {"product": "NVIDIA-H100-80GB-HBM3", "perNode": 8}
    team = yaml.safe_load((fleet / "teams/research.yaml").read_text())
    assert team["quotas"] == {"prod": {"h100": {"gpus": 128}}}
    # every key of the models is there, set or commented with its meaning
    for model, text in ((ClusterConfig, cluster_text), (TeamConfig, (fleet / "teams/research.yaml").read_text())):
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert f"\n{key}:" in text or f"\n# {key}:" in text, key
        assert all(len(line) <= 100 for line in text.splitlines())
    assert "# kueue:\n  # Kueue release" in cluster_text
    assert "  # - key:   # required" in cluster_text  # a commented example item of a list
    assert (fleet / "tests/run").stat().st_mode & 0o111
    # what it replaced is kept, not deleted: the example fleet (or the user's own files in it) stays at hand
    [kept] = (fleet / ".fleetgen").glob("init-*/previous")
    for rel in ("teams/ml-research.yaml", "clusters/dev.yaml", "tests/test_init.py", "fleet.yaml",
                ".github/CODEOWNERS", "generator/render.py", "README.md", "pyproject.toml"):
        assert (kept / rel).read_bytes() == (REPO / rel).read_bytes(), rel
    assert not (kept / "tests/upstream").exists() and not (kept.parent / "new").exists()


def test_the_new_fleet_renders_and_validates(fleet: Path, kubeconform_on_path: Path, shared_schemas: Path,
                                             shared_crds: Path) -> None:
    assert fleetgen(fleet, "render", "--check").returncode == 0
    result = fleetgen(fleet, "validate", "--offline", "--schema-location", str(shared_schemas), "--crd-location",
                      str(shared_crds))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kubeconform not on PATH" not in result.stderr  # kubeconform -strict ran, and passed


def test_its_own_tests_pass(fleet: Path, kubeconform_on_path: Path, shared_schemas: Path, shared_crds: Path) -> None:
    env = {**os.environ, "FLEETGEN_SCHEMA_LOCATION": str(shared_schemas), "FLEETGEN_CRD_LOCATION": str(shared_crds)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fleet.py"],
                          cwd=fleet, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_change_on_a_branch_diffs(fleet: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(fleet, work, ignore=shutil.ignore_patterns(".fleetgen"))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "init")
    git(work, "checkout", "-qb", "smaller")
    path = work / "teams/research.yaml"
    path.write_text(path.read_text().replace("gpus: 128", "gpus: 96"))
    assert fleetgen(work, "render").returncode == 0
    git(work, "commit", "-qam", "research gives back 32 GPUs")
    result = fleetgen(work, "diff", "--base", "main")
    assert result.returncode == 1, result.stderr
    assert "research" in result.stdout and "128" in result.stdout and "96" in result.stdout, result.stdout


def test_its_workflows_pass_actionlint(fleet: Path) -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.fail("actionlint is part of the test extras")
    workflows = sorted(str(p) for p in (fleet / ".github/workflows").glob("*.yml"))
    assert len(workflows) >= 4
    proc = subprocess.run([actionlint, *workflows], capture_output=True, text=True, cwd=fleet)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for workflow in workflows:  # nothing they run was removed with the example
        text = Path(workflow).read_text()
        for token in ("tests/logql", "tests/preview", "benchmarks/", "pip install", "docs/"):
            assert token not in text, (workflow, token)


def test_init_refuses_an_existing_fleet_and_bad_values_change_nothing(fleet: Path, tmp_path: Path) -> None:
    again = fleetgen(fleet, *INIT_ARGS, "--force")
    assert again.returncode == 2 and "is a fleet already (fleetgen.txt pins its fleetgen)" in again.stderr
    assert "fleetgen add cluster" in again.stderr and "Traceback" not in again.stderr
    fresh = checkout_copy(tmp_path / "fresh")
    def tree() -> list[str]:  # the repository's files; not the work area or Python's bytecode caches
        return sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*")
                      if ".fleetgen" not in p.parts and "__pycache__" not in p.parts)

    before = tree()
    bad = [*INIT_ARGS]
    bad[bad.index("ghcr.io/gpuco")] = "registry.example.com/gpuco"
    result = fleetgen(fresh, *bad)
    assert result.returncode == 2 and "images.registry" in result.stderr and "reserved for examples" in result.stderr
    assert "Traceback" not in result.stderr
    assert tree() == before


def test_init_outside_a_fleetgen_copy_is_a_usage_error(tmp_path: Path) -> None:
    result = fleetgen(tmp_path, *INIT_ARGS)
    assert result.returncode == 2 and "not a copy of the fleetgen repository" in result.stderr


def test_the_fleet_files_it_writes_are_package_data() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert "scaffold/files/*" in text


@pytest.mark.slow
def test_the_readme_pre_commit_hook_guards_the_new_fleet(fleet: Path, tmp_path: Path) -> None:
    """pre-commit runs the README's hook (the fleet's own ./fleetgen, in its .venv) and refuses a stale tree."""
    from tests.doc_blocks import reviews_yaml_block
    from tests.fleetgen_releases import release_repository, url

    work = tmp_path / "work"
    shutil.copytree(fleet, work, ignore=shutil.ignore_patterns(".fleetgen"))
    bare, _ = release_repository(tmp_path / "releases")  # the pin, at a release this machine can fetch
    pin = work / "fleetgen.txt"
    pin.write_text(pin.read_text().replace("https://github.com/gpuco/fleetgen.git", url(bare)))
    (work / ".pre-commit-config.yaml").write_text(reviews_yaml_block("- [pre-commit](https://pre-commit.com) hooks"))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    ok = subprocess.run(["pre-commit", "run", "--all-files"], cwd=work, capture_output=True, text=True, env=env,
                        timeout=900)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    path = work / "teams/research.yaml"
    path.write_text(path.read_text().replace("gpus: 128", "gpus: 64"))
    stale = subprocess.run(["pre-commit", "run", "--all-files"], cwd=work, capture_output=True, text=True, env=env,
                           timeout=300)
    shutil.rmtree(work / ".venv", ignore_errors=True)  # 300 MB, and pytest keeps three runs' folders
    assert stale.returncode == 1 and "fleetgen render --check" in stale.stdout and "Failed" in stale.stdout


def test_a_malformed_fleet_file_is_a_located_error_not_a_crash(tmp_path: Path) -> None:
    fresh = checkout_copy(tmp_path / "fresh")
    (fresh / "fleet.yaml").write_text("- not\n- a mapping\n")
    result = fleetgen(fresh, *INIT_ARGS)
    assert result.returncode == 2 and "fleet.yaml" in result.stderr and "Traceback" not in result.stderr
    assert "fleetgen bug" not in result.stderr, result.stderr
    assert (fresh / "teams/ml-research.yaml").is_file()  # nothing replaced


# --- Issue 52: init's arguments and the copy it writes are hostile input -------------------------------------

def _with(args: list[str], flag: str, value: str) -> list[str]:
    out = [*args]
    out[out.index(flag) + 1] = value
    return out


@pytest.mark.parametrize(("flag", "value"), [("--team", "../../../../victim"), ("--cluster", "../.."),
                                             ("--cluster", "../../../victim"), ("--team", "/tmp/victim")])
def test_a_name_that_leaves_the_repository_is_refused_before_anything_is_written(tmp_path: Path, flag: str,
                                                                                  value: str) -> None:
    """The findings: `--team ../../../../victim` overwrote an outside victim.yaml and exited 0; `--cluster ../..`
    wrote before it said "nothing was written"."""
    root = checkout_copy(tmp_path / "a/b/c/copy")
    (tmp_path / "victim.yaml").write_text("precious\n")
    (tmp_path / "a/victim.yaml").write_text("precious\n")
    before = tree_state(tmp_path)
    result = fleetgen(root, *_with(INIT_ARGS, flag, value))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"'{flag}'" in result.stderr and "must be a DNS-1123 label" in result.stderr, result.stderr
    assert "give a" in result.stderr and "Traceback" not in result.stderr
    assert tree_state(tmp_path) == before  # nothing written, inside the copy or outside it (not even .fleetgen/)


@pytest.mark.parametrize("field", ["team", "cluster"])
def test_the_python_api_checks_the_names_too(tmp_path: Path, field: str) -> None:
    """init_fleet, called without the command line's checks, refuses the same names the same way."""
    from generator.errors import UsageError
    from generator.scaffold.init import FleetSpec, init_fleet

    root = checkout_copy(tmp_path / "a/b/c/copy")
    before = tree_state(tmp_path)
    with pytest.raises(UsageError, match=f"--{field}: '../../../../victim' must be a DNS-1123 label"):
        init_fleet(root, FleetSpec(**{**SPEC, field: "../../../../victim"}))  # type: ignore[arg-type]
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("rel", ["tests", "clusters", "rendered", ".github", ".fleetgen", "teams/ml-research.yaml",
                                 "tests/upstream"])
def test_a_link_anywhere_in_the_copy_is_refused_before_anything_is_written(tmp_path: Path, rel: str) -> None:
    """The findings: a copy whose tests/, clusters/ or rendered/ is a link out was emptied or written through."""
    root = checkout_copy(tmp_path / "copy")
    outside = tmp_path / "outside"
    target = root / rel
    if target.exists():
        shutil.move(target, outside)  # the link points at what was there: a plausible mistake, and what it protects
    else:
        outside.mkdir()
        (outside / "keep.txt").write_text("precious\n")
    target.symlink_to(outside, target_is_directory=outside.is_dir())
    before = tree_state(tmp_path)
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and f"{rel} is a symbolic link" in result.stderr, result.stderr
    assert tree_state(tmp_path) == before


def test_the_links_of_a_developer_checkout_do_not_stop_init(tmp_path: Path) -> None:
    """A virtual environment and the npm packages tests/run installs are made of links: git ignores them,
    init never reads or writes into them, so they are no reason to refuse."""
    root = checkout_copy(tmp_path / "copy")
    for rel, to in ((".venv/bin/python", sys.executable), ("tests/preview/node_modules/.bin/marked", "../marked/x.js")):
        (root / rel).parent.mkdir(parents=True)
        (root / rel).symlink_to(to)
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 0, result.stderr
    assert os.readlink(root / ".venv/bin/python") == sys.executable
    [kept] = (root / ".fleetgen").glob("init-*/previous")
    assert os.readlink(kept / "tests/preview/node_modules/.bin/marked") == "../marked/x.js"


@pytest.mark.parametrize("fault", [OSError(28, "No space left on device"), KeyboardInterrupt()],
                         ids=["full-disk", "ctrl-c"])
def test_an_error_while_switching_the_new_fleet_in_leaves_the_old_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       fault: BaseException) -> None:
    """A full disk or Ctrl-C after the new fleet is built: the repository stays exactly the old one."""
    from generator import render
    from generator.scaffold.init import FleetSpec, init_fleet

    root = checkout_copy(tmp_path / "copy")
    before = tree_state(root, ("__pycache__", ".fleetgen"))
    calls = {"armed": 0}
    real_write, real_rename, real_copy2 = render.write, os.rename, shutil.copy2

    def write(*args: object, **kwargs: object) -> object:
        result = real_write(*args, **kwargs)  # type: ignore[arg-type]
        calls["armed"] = 1
        return result

    def failing(real: object) -> object:
        def call(*args: object, **kwargs: object) -> object:
            if calls["armed"]:
                calls["armed"] += 1
                if calls["armed"] == 4:  # the third write into the repository after the build
                    raise fault
            return real(*args, **kwargs)  # type: ignore[operator]
        return call

    monkeypatch.setattr(render, "write", write)
    monkeypatch.setattr(os, "rename", failing(real_rename))
    monkeypatch.setattr(shutil, "copy2", failing(real_copy2))
    with pytest.raises(type(fault)):
        init_fleet(root, FleetSpec(**SPEC))  # type: ignore[arg-type]
    assert calls["armed"] >= 4
    assert tree_state(root, ("__pycache__", ".fleetgen")) == before
    assert not list((root / ".fleetgen").glob("init-*"))  # and no stage left behind


HOSTILE = ["", ".", "..", "../x", "../../../../victim", "/etc/passwd", "a/b", "x/../../y", "a\x00b", "a\nb", "\udcff",
           "--force", "-", "x" * 64, "\u202e", "\uff41", "~", "$(id)", "%s%n", "{team}", "a b", ".fleetgen", ".git",
           "prod.yaml", "0", "-1", "99999999999999999999", "1e999", "NaN", "1.99", "@x/../y", "file:///etc"]
"""Values a careless or hostile caller passes: paths out, control and invisible characters, numbers
out of range, undecodable bytes as Python reads them from argv (U+DCFF), option look-alikes."""
VALID = dict(zip(INIT_ARGS[1::2], INIT_ARGS[2::2], strict=True))


@pytest.fixture(scope="module")
def hostile_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("hostile")
    (base / "victim.yaml").write_text("precious\n")
    checkout_copy(base / "a/b/c/copy")
    return base


PATHS = st.tuples(st.integers(0, 8), st.lists(st.sampled_from([".", "", "victim", "a"]), max_size=3)).map(
    lambda up: "/".join([".."] * up[0] + up[1]))
"""Relative and absolute paths out of the copy, at every depth (`../../../../victim`, `/victim`)."""
ANY = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=70), PATHS)
NAMES = ("--team", "--cluster")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.fixed_dictionaries({flag: st.one_of(st.just(VALID[flag]), ANY) for flag in NAMES}),
       st.dictionaries(st.sampled_from(sorted(set(VALID) - set(NAMES))), ANY, max_size=2))
def test_hostile_arguments_give_a_clear_error_and_write_nothing_outside(hostile_copy: Path, names: dict[str, str],
                                                                      hostile: dict[str, str]) -> None:
    """The names, and up to two other arguments, hostile or valid (so the later checks are reached too):
    exit 0 or 2, never a traceback; nothing outside the copy changes, and inside it nothing unless init
    succeeded."""
    values = {**VALID, **names, **hostile}
    from click.testing import CliRunner

    from generator.cli import cli

    root = hostile_copy / "a/b/c/copy"
    outside, inside = tree_state(hostile_copy, ("copy",)), tree_state(root, ("__pycache__", ".fleetgen"))
    args = ["init", *(f"{flag}={value}" for flag, value in values.items())]
    result = CliRunner().invoke(cli, ["--root", str(root), *args])
    assert result.exit_code in (0, 2), (args, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output and "fleetgen bug" not in result.output, (args, result.output)
    assert tree_state(hostile_copy, ("copy",)) == outside, args
    if result.exit_code == 0:  # a valid fleet: start the next example from a fresh copy
        shutil.rmtree(root)
        checkout_copy(root)
    else:
        assert tree_state(root, ("__pycache__", ".fleetgen")) == inside, args
        assert not list((root / ".fleetgen").glob("init-*")), args


def test_a_move_through_the_file_layer_never_replaces_nor_follows(tmp_path: Path) -> None:
    """repofiles.move, which init switches with: a path in the way, or a link on either side, is refused
    and nothing moves."""
    from generator import repofiles

    (tmp_path / "new").mkdir()
    (tmp_path / "new/teams").mkdir()
    (tmp_path / "teams").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    before = tree_state(tmp_path)
    for source, target, said in (("new/teams", "teams", "teams is in the way"),
                                 ("new/teams", "linked/teams", "linked is a symbolic link"),
                                 ("linked", "elsewhere/x", "linked is a symbolic link"),
                                 ("new/teams", "../teams", "leaves the repository")):
        with pytest.raises(repofiles.UnsafePath, match=said):
            repofiles.move(tmp_path, source, target)
    assert tree_state(tmp_path) == before
    repofiles.move(tmp_path, "new/teams", "new/kept")
    assert (tmp_path / "new/kept").is_dir() and not (tmp_path / "new/teams").exists()


def test_a_switch_killed_half_way_that_cannot_be_proven_is_named_not_switched_over(tmp_path: Path) -> None:
    """A stage with new/ and previous/ whose proof the cache folder does not hold (a checkout copied
    elsewhere, or a folder made by hand): the next init says where each part is, and writes nothing.
    (fleetgen's own killed switch it finishes: tests/test_crash_safety.py.)"""
    root = checkout_copy(tmp_path / "copy")
    stage = root / ".fleetgen/init-k1lled"
    for part in ("new/teams", "previous/clusters"):
        (stage / part).mkdir(parents=True)
    before = tree_state(root, ("__pycache__",))
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "was stopped before it finished" in result.stderr and "cannot prove" in result.stderr, result.stderr
    assert ".fleetgen/init-k1lled/previous/" in result.stderr and result.stderr.count("\n") == 1
    assert tree_state(root, ("__pycache__",)) == before


SIGTERM_DURING_SWITCH = """
import os, signal, sys
from generator import cli, render
real_write, real_rename, calls = render.write, os.rename, []
def write(*args, **kwargs):
    result = real_write(*args, **kwargs)
    calls.append("built")
    return result
def rename(*args, **kwargs):
    if calls:
        calls.append("rename")
        if len(calls) == 4:  # the third rename in the repository after the build: as `kill` would
            os.kill(os.getpid(), signal.SIGTERM)
    return real_rename(*args, **kwargs)
render.write, os.rename = write, rename
sys.argv = ["fleetgen", *sys.argv[1:]]
cli.main()
"""


def test_sigterm_while_switching_leaves_the_old_tree(tmp_path: Path) -> None:
    """A CI cancel (SIGTERM) mid-switch: exit 2 and the old tree, not a process killed half-way."""
    root = checkout_copy(tmp_path / "copy")
    before = tree_state(root, ("__pycache__", ".fleetgen"))
    result = subprocess.run([sys.executable, "-c", SIGTERM_DURING_SWITCH, "--root", str(root), *INIT_ARGS],
                            capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert tree_state(root, ("__pycache__", ".fleetgen")) == before
    assert not list((root / ".fleetgen").glob("init-*"))


# --- Issue 57: init never destroys; a new cluster starts in dry run ---------------------------------------------

OWN_FLEET = {
    "an edited team, the example's owners kept": ("teams/vision.yaml", "gpus: 32", "gpus: 30",
                                                  "teams/vision.yaml (changed)"),
    "a team of one's own added": ("teams/speech.yaml", None, "teams/nlp.yaml", "teams/nlp.yaml (not the example's)"),
    "an example cluster removed": ("clusters/dev.yaml", None, None, "clusters/dev.yaml (the example's, removed)"),
    "CODEOWNERS edited": (".github/CODEOWNERS", "@acme", "@someone", ".github/CODEOWNERS (changed)"),
    "a test of one's own": ("tests/test_init.py", None, "tests/test_mine.py", "tests/test_mine.py (not the example's)"),
}
"""Fleets that are not the untouched example although fleet.yaml still names the example's owners,
which is all the old guard looked at: (file, text to replace or None, its replacement or a new file's
name or None to delete, the line init names it by)."""


def _own_fleet(root: Path, case: tuple[str, str | None, str | None, str]) -> None:
    rel, old, new, _ = case
    path = root / rel
    if old is not None:
        assert old in path.read_text(), (rel, old)
        path.write_text(path.read_text().replace(old, new or "", 1))
    elif new is not None:
        shutil.copy(path, root / new)
    else:
        path.unlink()


@pytest.mark.parametrize("case", OWN_FLEET.values(), ids=OWN_FLEET.keys())
def test_init_refuses_anything_but_the_untouched_example_and_writes_nothing(tmp_path: Path,
                                                                          case: tuple[str, str | None, str | None, str]
                                                                          ) -> None:
    root = checkout_copy(tmp_path / "copy")
    _own_fleet(root, case)
    assert yaml.safe_load((root / "fleet.yaml").read_text())["platformOwners"] == ["@acme/gpu-platform"]
    before = tree_state(root, ("__pycache__", ".fleetgen"))  # fleetgen's git-ignored work area: its lock
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 2, result.stderr
    assert "not the untouched example fleet" in result.stderr and case[3] in result.stderr, result.stderr
    assert "--force" in result.stderr and "Traceback" not in result.stderr
    assert tree_state(root, ("__pycache__", ".fleetgen")) == before


def test_init_with_force_names_what_it_moves_aside_first_and_keeps_it(tmp_path: Path) -> None:
    root = checkout_copy(tmp_path / "copy")
    for case in OWN_FLEET.values():
        _own_fleet(root, case)
    own = (root / "teams/nlp.yaml").read_bytes()
    result = fleetgen(root, *INIT_ARGS, "--force")
    assert result.returncode == 0, result.stderr
    named = result.stderr[:result.stderr.index("wrote ") if "wrote " in result.stderr else len(result.stderr)]
    for case in OWN_FLEET.values():
        assert f"  {case[3]}\n" in named, result.stderr
    assert result.stdout.startswith("wrote "), result.stdout  # named before anything was written
    [kept] = (root / ".fleetgen").glob("init-*/previous")
    assert (kept / "teams/nlp.yaml").read_bytes() == own


def test_a_crlf_checkout_of_the_example_is_still_the_example(tmp_path: Path) -> None:
    from generator.scaffold import example

    root = checkout_copy(tmp_path / "copy")
    assert example.departures(root) == []
    for path in (root / "teams").iterdir():
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert example.departures(root) == []
    (root / "teams/vision.yaml").write_bytes(b"#" + (root / "teams/vision.yaml").read_bytes())
    assert example.departures(root) == ["teams/vision.yaml (changed)"]


def test_the_record_of_the_example_is_current() -> None:
    """`generator/scaffold/files/example.sha256` matches teams/, clusters/, fleet.yaml and CODEOWNERS
    (rewrite it with `python -m generator.scaffold.example --write`)."""
    from generator.scaffold import example

    assert example.departures(REPO) == [], "run python -m generator.scaffold.example --write"


def test_a_new_cluster_starts_in_dry_run_and_the_next_steps_build_the_images(tmp_path: Path) -> None:
    root = checkout_copy(tmp_path / "copy")
    result = fleetgen(root, *INIT_ARGS)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load((root / "clusters/prod.yaml").read_text())["health"] == {"dryRun": True}
    steps = result.stdout[result.stdout.index("next:"):]
    images, bootstrap, dry = (steps.index(s) for s in ("`images` workflow", "rendered/gitops/prod", "dryRun: false"))
    assert images < bootstrap < dry, steps
    assert "ghcr.io/gpuco/fleetgen:" in steps
    config = yaml.safe_load((root / "rendered/prod/health/configmap-fleetgen-health.yaml").read_text())
    assert json.loads(config["data"]["policy.json"])["dryRun"] is True  # what the reconciler reads at start
