#!/usr/bin/env bash
# The yardstick rows: the no-model rule (both option positions), direct revision 1 (short
# answers) on 2Wiki-100 and MuSiQue-50, and the held-out hotpotqa-distractor test-100 (rule,
# direct, vanilla, routerag untrained, routerag + the shipped SFT policy). Resumable, in lanes:
#   LANES=2 THREADS=1 bash docs/experiments/scripts/yardsticks.sh        # run (or resume) everything
#   ONLY=hotpotqa-distractor bash docs/experiments/scripts/yardsticks.sh  # only the jobs whose run name contains it
# Each job is `routerag eval` into runs/results/<name> (scripts/lanes.sh); rule and direct build no index.
set -euo pipefail
cd "$(dirname "$0")/../../.."
POLICY=${POLICY:-policy:routerag-sft-qwen2.5-coder-0.5b}
source scripts/lanes.sh

jobs() {
  # name dataset strategy limit [extra --set overrides...]; cheapest first
  local ds n
  for ds in "2wiki 100" "musique 50" "hotpotqa-distractor 100"; do
    set -- $ds
    echo "$1-rule $1 rule $2"
    echo "$1-rule-second $1 rule $2 params.option=second label=rule-second-option"
  done
  echo "2wiki-direct 2wiki direct 100"
  echo "musique-direct musique direct 50"
  echo "hotpotqa-distractor-direct hotpotqa-distractor direct 100"
  echo "hotpotqa-distractor-vanilla hotpotqa-distractor vanilla 100"
  echo "sft-hotpotqa-distractor-routerag hotpotqa-distractor routerag 100 model.lora_path=$POLICY label=routerag-sft"
  echo "hotpotqa-distractor-routerag hotpotqa-distractor routerag 100"
}

run_lanes
