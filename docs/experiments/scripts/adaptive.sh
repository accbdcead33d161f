#!/usr/bin/env bash
# The `adaptive` strategy (Adaptive-RAG) end to end, in three resumable steps:
#   STEP=label-runs bash docs/experiments/scripts/adaptive.sh   # rule, direct, vanilla, routerag + the shipped policy on 2wiki-train (the
#                                              # 2Wiki questions outside 2wiki:100; $LIMIT evenly spaced, default 60;
#                                              # spread order, so a stopped run is a fair subset). Not HotpotQA train100
#                                              # or the distractor training split: the shipped policy was trained on
#                                              # their golden trajectories (strategy-labels refuses such runs)
#   STEP=router bash docs/experiments/scripts/adaptive.sh       # strategy labels from those runs (questions all four answered),
#                                              # then the shipped `strategy` router (grouped CV picks the inputs
#                                              # - the features alone or with the embedding - and C)
#   STEP=eval bash docs/experiments/scripts/adaptive.sh         # adaptive on 2Wiki-100 and MuSiQue-50: rule (no model), direct and
#                                              # vanilla on the base model, routerag on the shipped policy (params.adapters)
# Runs go to $OUT (label runs: runs/strategy-labels); lanes, threads and logs as in scripts/lanes.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
POLICY=${POLICY:-policy:routerag-sft-qwen2.5-coder-0.5b}
LABEL_RUNS=${LABEL_RUNS:-runs/strategy-labels}
LIMIT=${LIMIT:-60}
STEP=${STEP:?set STEP to label-runs, router or eval}

case "$STEP" in
  label-runs)
    OUT=$LABEL_RUNS
    source scripts/lanes.sh
    jobs() {
      echo "2wiki-train-routerag 2wiki-train routerag $LIMIT model.lora_path=$POLICY label=routerag-shipped"
      echo "2wiki-train-direct 2wiki-train direct $LIMIT"
      echo "2wiki-train-vanilla 2wiki-train vanilla $LIMIT"
      echo "2wiki-train-rule 2wiki-train rule $LIMIT"
    }
    run_lanes
    ;;
  router)
    routerag router strategy-labels --run "rule=$LABEL_RUNS/2wiki-train-rule" --run "direct=$LABEL_RUNS/2wiki-train-direct" \
      --run "vanilla=$LABEL_RUNS/2wiki-train-vanilla" --run "routerag=$LABEL_RUNS/2wiki-train-routerag"
    routerag router train --name strategy --inputs features --inputs embedding+features --C 1 --C 0.1 --C 0.01 --C 0.001
    ;;
  eval)
    source scripts/lanes.sh
    jobs() {
      local ds
      for ds in "2wiki 100" "musique 50"; do
        set -- $ds
        echo "$1-adaptive $1 adaptive $2 params.adapters.routerag=$POLICY"
      done
    }
    run_lanes
    ;;
  *) echo "unknown STEP $STEP (label-runs, router, eval)" >&2; exit 2 ;;
esac
