#!/usr/bin/env bash
# Evaluate one RouteRAG policy adapter on the three evaluation sets of issue 14 (2Wiki-100,
# MuSiQue-50, the held-out hotpotqa-distractor test-100) with the same settings as the stored
# yardstick rows (scripts/yardsticks.sh, scripts/first_results.sh), so `routerag report` pairs them.
# Resumable (each job is `routerag eval` into $OUT/<label>-<dataset>-routerag), in lanes:
#   POLICY=runs/train/routerag-sft-gpu/adapter.gguf LABEL=routerag-sft-gpu bash scripts/eval_policy.sh
#   ONLY=hotpotqa-distractor POLICY=... LABEL=... bash scripts/eval_policy.sh   # one set
set -euo pipefail
cd "$(dirname "$0")/.."
: "${POLICY:?set POLICY to an adapter GGUF}"
: "${LABEL:?set LABEL to the row label (e.g. routerag-sft-gpu)}"
LANES=${LANES:-2}
THREADS=${THREADS:-1}
OUT=${OUT:-runs/results}
ONLY=${ONLY:-}
mkdir -p "$OUT"
trap 'trap - INT TERM; kill 0' INT TERM

jobs() {
  # name dataset limit; the longest first so that lanes end together
  echo "$LABEL-2wiki-routerag 2wiki 100"
  echo "$LABEL-hotpotqa-distractor-routerag hotpotqa-distractor 100"
  echo "$LABEL-musique-routerag musique 50"
}

run_one() {
  local name=$1 dataset=$2 limit=$3
  ${ROUTERAG:-routerag} eval --dataset "$dataset" --strategy routerag --limit "$limit" --out "$OUT/$name" \
    --no-progress --set "components=[dense,bm25,graph]" --set "model.n_threads=$THREADS" \
    --set "model.lora_path=$POLICY" --set "label=$LABEL" \
    > "$OUT/$name.log" 2>&1 || echo "FAILED: $name (see $OUT/$name.log)"
  echo "done: $name"
}
export -f run_one
export OUT THREADS ROUTERAG POLICY LABEL

jobs | grep -- "$ONLY" | xargs -P "$LANES" -L 1 bash -c 'run_one "$@"' _ &
wait $!
