#!/usr/bin/env bash
# The preview's diff, made by the base repository's own fleetgen (the `preview-comment` job runs
# this checkout's code, never the pull request's). The pull request's head and its base are read
# as data: only their teams/, clusters/, fleet.yaml and fleetgen.txt are exported, blob by blob as the commits
# hold them (generator/diff/gitblobs.py: `git archive` would apply the pull request's own
# .gitattributes, whose export-ignore hides a file), and both are compiled by the fleetgen
# installed from this checkout. A pull request that edits the generator is therefore previewed
# as the base's generator renders its inputs, and one that moves the fleet's fleetgen pin
# (fleetgen.txt) gets a `fleetgen-upgraded` line saying where the new release's own diff is: the
# pull request's pin is read, never installed here.
#
#   preview-diff.sh PR_NUMBER BASE_SHA HEAD_SHA OUT_DIR
#
# Exit 0 when OUT_DIR holds comment parts (a diff, or the error comment of a fleet that does not
# load); 2 when the head fetched is not HEAD_SHA (a push raced the run: nothing is written).
set -euo pipefail
number=$1 base=$2 head=$3 out=$4
case "$number" in ''|*[!0-9]*) echo "not a pull request number: $number" >&2; exit 2 ;; esac
for sha in "$base" "$head"; do
  case "$sha" in *[!0-9a-f]*|'') echo "not a commit: $sha" >&2; exit 2 ;; esac
done
git fetch --no-tags --quiet origin "+refs/pull/${number}/head:refs/fleetgen/pr-head" "$base"
if [ "$(git rev-parse refs/fleetgen/pr-head)" != "$head" ]; then
  echo "pull request #$number is no longer at $head: the next run previews it" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for side in base head; do
  sha=$base
  [ "$side" = head ] && sha=$head
  mkdir -p "$work/$side"
  python3 -m generator.diff.gitblobs "$sha" "$work/$side" teams clusters fleet.yaml fleetgen.txt
done
mkdir -p "$out"
set +e
fleetgen diff --from "$work/base" --to "$work/head" --format markdown --output-dir "$out" --head-sha "$head" >/dev/null
code=$?
set -e
if [ "$code" -gt 2 ] || ! ls "$out"/comment-1.md >/dev/null 2>&1; then
  echo "fleetgen diff failed (exit $code) without a comment" >&2
  exit 2
fi
echo "fleetgen diff exit $code: $(ls "$out" | grep -c '^comment-') comment part(s) in $out"
