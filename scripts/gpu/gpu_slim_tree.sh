#!/usr/bin/env bash
# A device call carries the working tree and at most 64 MiB in all: with the ~30 MB of tracked docs,
# tests and shipped policies, a 60 MB kit piece does not fit. This cuts the tree to what a GPU node
# runs (src/ without the shipped policies, configs/, scripts/, pyproject.toml: ~2.3 MB) on a
# temporary branch, and puts it back:
#   bash scripts/gpu/gpu_slim_tree.sh on [POLICY...]   # branch gpu-xfer; POLICY: shipped policies to keep
#   bash scripts/gpu/gpu_slim_tree.sh keep POLICY...   # put shipped policies back into the slim tree (e.g.
#                                                  # routerag-sft-qwen2.5-coder-0.5b, 8.8 MB, a run's start:
#                                                  # for the training call, after the kit's 60 MB pieces)
#   bash scripts/gpu/gpu_slim_tree.sh off              # back to the branch it started from; gpu-xfer deleted
# It refuses to start with uncommitted changes to tracked files (they would be lost on the way back).
set -euo pipefail
cd "$(dirname "$0")/../.."
BRANCH=gpu-xfer
STATE=.git/gpu-slim-from
keep_policies() {  # shipped policies back into the slim tree, from the branch it started from
  for policy in "$@"; do
    git checkout -q "$(cat "$STATE")" -- "src/routerag/data/policies/$policy"
  done
}
case "${1:-}" in
  on)
    shift
    if ! git diff --quiet HEAD; then
      echo "error: commit or stash your changes first (git status); the slim branch removes tracked files" >&2
      exit 1
    fi
    if git rev-parse --verify -q "$BRANCH" > /dev/null; then
      echo "error: branch $BRANCH exists (a slim tree is on: bash scripts/gpu/gpu_slim_tree.sh off)" >&2
      exit 1
    fi
    git rev-parse --abbrev-ref HEAD > "$STATE"
    git checkout -q -b "$BRANCH"
    git rm -r -q docs tests benchmarks src/routerag/data/policies
    keep_policies "$@"
    git commit -q -m "temporary: the tree a GPU node needs (scripts/gpu/gpu_slim_tree.sh)"
    echo "on branch $BRANCH: $(git ls-files | wc -l) tracked files, $(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1)"
    ;;
  keep)
    shift
    keep_policies "$@"
    ;;
  off)
    if [ "$(git rev-parse --abbrev-ref HEAD)" != "$BRANCH" ]; then
      echo "error: not on $BRANCH (no slim tree is on); nothing changed" >&2
      exit 1
    fi
    git reset -q --hard  # only on the temporary branch: the policies `keep` put back
    from=$(cat "$STATE" 2>/dev/null || echo main)
    git checkout -q "$from"
    git branch -q -D "$BRANCH"
    rm -f "$STATE"
    echo "back on $from"
    ;;
  *)
    echo "usage: bash scripts/gpu/gpu_slim_tree.sh on [POLICY...] | keep POLICY... | off" >&2
    exit 2
    ;;
esac
