#!/usr/bin/env bash
# Evaluate one RouteRAG policy adapter on the three standard evaluation sets (2Wiki-100,
# MuSiQue-50, the held-out hotpotqa-distractor test-100) with the same settings as the stored
# yardstick rows (docs/experiments/scripts/yardsticks.sh), so that `routerag report` pairs them. Resumable, in
# lanes (scripts/lanes.sh: LANES, THREADS, OUT, ONLY); each job is `routerag eval` into
# $OUT/<label>-<dataset>-routerag:
#   POLICY=runs/train/routerag-sft-gpu/adapter.gguf LABEL=routerag-sft-gpu bash scripts/eval_policy.sh
#   ONLY=hotpotqa-distractor POLICY=... LABEL=... bash scripts/eval_policy.sh   # one set
#   BASE=bundled:qwen2.5-coder-1.5b POLICY=... LABEL=... bash scripts/eval_policy.sh   # a policy of another base
set -euo pipefail
cd "$(dirname "$0")/.."
: "${POLICY:?set POLICY to an adapter GGUF}"
: "${LABEL:?set LABEL to the row label (e.g. routerag-sft-gpu)}"
BASE=${BASE:-}   # the base model the adapter was trained on; empty: the default (bundled 0.5B)
source scripts/lanes.sh

jobs() {
  # the longest first, so that lanes end together
  local ds
  for ds in "2wiki 100" "hotpotqa-distractor 100" "musique 50"; do
    set -- $ds
    echo "$LABEL-$1-routerag $1 routerag $2 model.lora_path=$POLICY label=$LABEL${BASE:+ model.model=$BASE}"
  done
}

run_lanes
