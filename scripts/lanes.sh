# Sourced by the evaluation scripts (yardsticks.sh, eval_policy.sh): resumable `routerag eval`
# jobs in parallel lanes. The script defines `jobs` (one line a job: NAME DATASET STRATEGY LIMIT
# [key=value settings...], a later setting overriding an earlier one) and ends with `run_lanes`. Settings from the environment:
#   LANES (2)  THREADS (1, llama.cpp threads a lane)  OUT (runs/results)  ONLY (grep pattern over
#   the job lines)  ROUTERAG (the command, default routerag)  LOGS (runs/logs).
# Each job is `routerag eval` into $OUT/NAME with the index components of the stored tables
# (dense + BM25 + graph), its log in $LOGS/NAME.log (never beside the runs: a folder of stored runs
# holds run directories only); an interrupted job resumes where it stopped.
LANES=${LANES:-2}
THREADS=${THREADS:-1}
OUT=${OUT:-runs/results}
ONLY=${ONLY:-}
LOGS=${LOGS:-runs/logs}
mkdir -p "$OUT" "$LOGS"
# stopping the script stops its lanes too (an interrupted question is redone on the next run)
trap 'trap - INT TERM; kill 0' INT TERM

run_one() {
  local name=$1 dataset=$2 strategy=$3 limit=$4
  shift 4
  local extra=()
  for kv in "$@"; do extra+=(--set "$kv"); done
  ${ROUTERAG:-routerag} eval --dataset "$dataset" --strategy "$strategy" --limit "$limit" --out "$OUT/$name" \
    --no-progress --set "components=[dense,bm25,graph]" --set "model.n_threads=$THREADS" "${extra[@]}" \
    > "$LOGS/$name.log" 2>&1 || echo "FAILED: $name (see $LOGS/$name.log)"
  echo "done: $name"
}

run_lanes() {
  export -f run_one
  export OUT THREADS ROUTERAG LOGS
  # in the background + wait, so that the INT/TERM trap runs at once
  { jobs | grep -- "$ONLY" || true; } | xargs -r -P "$LANES" -L 1 bash -c 'run_one "$@"' _ &
  wait $!
}
