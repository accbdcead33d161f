#!/usr/bin/env bash
# The first results table (docs/experiments/2026-11-22-first-results.md): every run of docs/results, resumable, in parallel lanes.
#   LANES=2 THREADS=1 bash docs/experiments/scripts/first_results.sh          # run (or resume) everything, then report
#   ONLY=law-med bash docs/experiments/scripts/first_results.sh               # only the jobs whose run name contains it
# Each job is `routerag eval` into runs/results/<dataset>-<strategy>; an interrupted job resumes
# where it stopped. With the embedded 0.5B model on 2 CPU cores a lane answers a multi-turn
# question in 10-40 s, so the whole table takes many hours: stop it any time and run it again.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lanes.sh

jobs() {
  # Cheapest whole rows first, so that an interrupted run leaves whole rows rather than many
  # partial ones; MuSiQue (50 questions) before 2Wiki (100) for each strategy group.
  # 2Wiki: 100 evenly spaced of the 1,000; MuSiQue-100: 50 evenly spaced, released OpenIE graph.
  local s
  for s in direct vanilla routerag routerag-passage graphrag-r1 ircot; do
    echo "musique-$s musique $s 50"; echo "2wiki-$s 2wiki $s 100"
  done
  for s in routerag-graph routerag-hybrid; do echo "musique-$s musique $s 50"; done
  for s in routerag-graph routerag-hybrid; do echo "2wiki-$s 2wiki $s 100"; done
  for s in r1-router realroute hard-route; do echo "musique-$s musique $s 50"; done
  for s in hard-route r1-router realroute; do echo "2wiki-$s 2wiki $s 100"; done
  # hard routing vs Adaptive Cap; law-med's two sources are dense only
  for s in hard-route realroute; do echo "law-med-$s law-med $s 50 components=[dense]"; done
}

run_lanes
routerag report "$OUT"/*/ --out docs/results
