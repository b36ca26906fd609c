// Runs .github/scripts/preview-comment.js as actions/github-script runs it: `github` is an
// authenticated Octokit (REST methods and paginate), `context` carries the workflow_run payload.
// Input (JSON on stdin): {baseUrl, owner, repo, payload, dir}. Output: {"error": ""} or the error.
import { createRequire } from "node:module";
import fs from "node:fs";
import { Octokit } from "@octokit/rest";

const require = createRequire(import.meta.url);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { baseUrl, owner, repo, payload, dir, script } = JSON.parse(input);
const github = new Octokit({ baseUrl, auth: "test-token", log: { debug() {}, info() {}, warn() {}, error() {} } });
const context = { repo: { owner, repo }, payload };
const logs = [];
const core = { info: (m) => logs.push(m), warning: (m) => logs.push(m), setFailed: (m) => logs.push(m) };
const post = require(script);
try {
  await post({ github, context, core, fs, dir });
  process.stdout.write(JSON.stringify({ error: "", logs }));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: String((err && err.message) || err), logs }));
}
