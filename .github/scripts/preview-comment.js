// Posts the preview's comment parts on the pull request, updating this bot's earlier parts in place.
//
// Runs in the `preview-comment` workflow (workflow_run, with the base repository's code and a
// token that may write). The comment parts are made in that job by the base repository's fleetgen
// (preview-diff.sh); from the `preview` workflow's artifact, made by the pull request's code (a
// fork's included), only the pull request number (checked against the run's head commit) and the
// numbers in checks.json are read. Every run replaces the comment: more parts than GitHub takes
// become a last part that says so, and a failure after the pull request is known replaces the
// earlier comment with a notice, so an old preview never stands for a new push.
"use strict";

const MARKER = "<!-- fleetgen-diff";
const MAX_BODY = 65536; // GitHub refuses longer comment bodies
const MAX_PARTS = 50;
const BOT = "github-actions[bot]";

function readParts(fs, dir) {
  const files = fs.readdirSync(dir).filter((f) => /^comment-\d+\.md$/.test(f))
    .sort((a, b) => parseInt(a.match(/\d+/)[0], 10) - parseInt(b.match(/\d+/)[0], 10));
  if (files.length === 0) throw new Error("the preview made no comment part");
  const parts = files.slice(0, files.length > MAX_PARTS ? MAX_PARTS - 1 : MAX_PARTS)
    .map((f) => fs.readFileSync(`${dir}/${f}`, "utf8"));
  if (files.length > MAX_PARTS) {
    parts.push(`**fleetgen diff: ${files.length - parts.length} more parts not posted** (a pull request takes ` +
      `${MAX_PARTS} from this bot). The whole preview is in the \`fleetgen-diff\` artifact of this run.\n`);
  }
  return parts;
}

function invalidated(sha, reason) {
  return `${MARKER} part 1 -->\n### fleetgen diff: no preview for \`${sha.slice(0, 12)}\`\n\n` +
    `❌ The preview of this push could not be posted (${reason.replace(/[<>`@#\r\n]/g, " ").slice(0, 300)}). ` +
    "The comment that stood here was for an earlier push and has been removed: see the workflow run.\n";
}

function checksLine(fs, dir) {
  let checks = {};
  try {
    checks = JSON.parse(fs.readFileSync(`${dir}/checks.json`, "utf8"));
  } catch (err) {
    return "";
  }
  const lines = [];
  if (checks.render_check === 1) lines.push("⚠️ `rendered/` is stale: run `fleetgen render` and commit the result.");
  if (Number.isInteger(checks.render_check) && checks.render_check > 1) lines.push("❌ `fleetgen render --check` failed: see the workflow run.");
  if (Number.isInteger(checks.validate) && checks.validate !== 0) lines.push("❌ `fleetgen validate` found problems: see the workflow run.");
  return lines.length ? lines.join("\n") + "\n\n" : "";
}

async function pullRequest({ github, context, fs, dir }) {
  const run = context.payload.workflow_run;
  const listed = (run.pull_requests || []).map((p) => p.number);
  const named = parseInt(fs.readFileSync(`${dir}/pr-number`, "utf8").trim(), 10);
  if (!Number.isInteger(named) || named <= 0) throw new Error("the artifact names no pull request");
  if (listed.length && !listed.includes(named)) throw new Error(`the artifact names #${named}, the run is for ${listed}`);
  // A fork's run lists no pull request: trust the number only if that PR's head is the run's commit.
  const { data: pr } = await github.rest.pulls.get({ ...context.repo, pull_number: named });
  if (pr.head.sha !== run.head_sha) {
    throw new Error(`#${named} is at ${pr.head.sha}, the preview was made for ${run.head_sha}: not posting`);
  }
  return { number: named, base: pr.base.sha, head: pr.head.sha };
}

async function ours(github, owner, repo, issue_number) {
  return (await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number, per_page: 100 }))
    .filter((c) => c.user && c.user.login === BOT && c.user.type === "Bot" && c.body && c.body.startsWith(MARKER));
}

async function replace(github, owner, repo, issue_number, mine, bodies) {
  for (let i = 0; i < bodies.length; i++) {
    if (i < mine.length) {
      await github.rest.issues.updateComment({ owner, repo, comment_id: mine[i].id, body: bodies[i] });
    } else {
      await github.rest.issues.createComment({ owner, repo, issue_number, body: bodies[i] });
    }
  }
  for (const stale of mine.slice(bodies.length)) {
    await github.rest.issues.deleteComment({ owner, repo, comment_id: stale.id });
  }
}

async function post({ github, context, core, fs, dir }) {
  const { number: issue_number, head } = await pullRequest({ github, context, fs, dir });
  const { owner, repo } = context.repo;
  const mine = await ours(github, owner, repo, issue_number);
  let bodies;
  try {
    const parts = readParts(fs, dir);
    const warn = checksLine(fs, dir);
    bodies = parts.map((text, i) => {
      const body = `${MARKER} part ${i + 1} -->\n` + (i === 0 ? warn : "") + text;
      if (body.length > MAX_BODY) throw new Error(`part ${i + 1} has ${body.length} characters, over ${MAX_BODY}`);
      return body;
    });
  } catch (err) {
    await replace(github, owner, repo, issue_number, mine, [invalidated(head, String(err.message || err))]);
    throw err;
  }
  await replace(github, owner, repo, issue_number, mine, bodies);
  core.info(`posted ${bodies.length} part(s) on #${issue_number} (${Math.min(mine.length, bodies.length)} updated in place)`);
}

module.exports = post;
module.exports.pullRequest = pullRequest;
