#!/usr/bin/env bash
# Evaluate one policy adapter (RouteRAG's, or another tag strategy's: STRATEGY=graphrag-r1) on the three standard evaluation sets (2Wiki-100,
# MuSiQue-50, the held-out hotpotqa-distractor test-100) with the same settings as the stored
# yardstick rows (docs/experiments/scripts/yardsticks.sh), so that `routerag report` pairs them. Resumable, in
# lanes (scripts/lanes.sh: LANES, THREADS, OUT, ONLY); each job is `routerag eval` into
# $OUT/<label>-<dataset>-<strategy>:
#   POLICY=runs/train/routerag-sft-gpu/adapter.gguf LABEL=routerag-sft-gpu bash scripts/eval_policy.sh
#   ONLY=hotpotqa-distractor POLICY=... LABEL=... bash scripts/eval_policy.sh   # one set
#   BASE=bundled:qwen2.5-coder-1.5b POLICY=... LABEL=... bash scripts/eval_policy.sh   # a policy of another base
#   STRATEGY=graphrag-r1 POLICY=... LABEL=... bash scripts/eval_policy.sh   # a GraphRAG-R1 policy, its default params
set -euo pipefail
cd "$(dirname "$0")/.."
: "${POLICY:?set POLICY to an adapter GGUF}"
: "${LABEL:?set LABEL to the row label (e.g. routerag-sft-gpu)}"
BASE=${BASE:-}   # the base model the adapter was trained on; empty: the default (bundled 0.5B)
STRATEGY=${STRATEGY:-routerag}   # the strategy whose episode the adapter was trained in
source scripts/lanes.sh

jobs() {
  # the longest first, so that lanes end together
  local ds
  for ds in "2wiki 100" "hotpotqa-distractor 100" "musique 50"; do
    set -- $ds
    echo "$LABEL-$1-$STRATEGY $1 $STRATEGY $2 model.lora_path=$POLICY label=$LABEL${BASE:+ model.model=$BASE}"
  done
}

run_lanes
