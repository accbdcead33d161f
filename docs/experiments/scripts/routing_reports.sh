#!/usr/bin/env bash
# The routing headroom report on four real settings, retrieval only (no model), one at a time:
#   bash docs/experiments/scripts/routing_reports.sh            # run (or resume) all four
#   ONLY=law-med bash docs/experiments/scripts/routing_reports.sh
# Each writes routing-report.md / .json / .png and outcomes.jsonl into $OUT/<setting> (resumable:
# a second run searches only the questions not done).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-runs/routing-report}
ONLY=${ONLY:-}

report() {  # setting, then routing-report arguments
  local name=$1; shift
  [[ -n "$ONLY" && "$name" != *"$ONLY"* ]] && return 0
  echo "== $name: routerag routing-report $* (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  /usr/bin/time -f "$name: %e s wall, %U s user, %S s sys" routerag routing-report "$@" --out "$OUT/$name" --no-progress
}

# 2Wiki's one corpus in four modes: dense passages, BM25, the HippoRAG-style graph, their fusion
report 2wiki-modes --dataset 2wiki --components dense,bm25,graph
# 2Wiki's corpus split into the released local / global sources
report 2wiki-local-global --dataset 2wiki-multisource --source-mode bm25
# RealRoute's law-med: U.S. case law and clinical medicine
report law-med --dataset law-med --source-mode bm25
# text + tables: 2Wiki passages and the WikiTableQuestions tables (unseen-table test questions)
report 2wiki-wtq --dataset 2wiki-wtq --source-mode bm25
