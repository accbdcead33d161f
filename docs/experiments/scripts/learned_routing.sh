#!/usr/bin/env bash
# End to end: the learned mode router (`learned`, the shipped `mode` model) where routing
# happens, against the stored rows of the same strategies (docs/experiments/scripts/yardsticks.sh, eval_policy.sh):
#   routerag + the shipped policy with `mode_router=learned` (the policy writes the query, the router
#   chooses passage / bm25 / graph / hybrid), paired with `routerag-sft-gpu-<set>-routerag`;
#   hard-route with `router=learned` over the four modes the router knows (the LLM-routed stored
#   row mounts triples too; it never chose it: bm25 99 / hybrid 4 calls on MuSiQue-50), paired
#   with `<set>-hard-route`;
#   realroute with `router=learned` choosing the preferred source of the Adaptive Cap over the same
#   four modes, paired with realroute over the same four modes routed by the LLM (the stored
#   `<set>-realroute` row mounts triples too, which the learned router does not know).
# Resumable, in lanes (scripts/lanes.sh: LANES, THREADS, OUT, ONLY, LOGS):
#   bash docs/experiments/scripts/learned_routing.sh
#   ONLY=musique bash docs/experiments/scripts/learned_routing.sh
#   ONLY=2wiki-realroute bash docs/experiments/scripts/learned_routing.sh   (the 2Wiki realroute pair)
set -euo pipefail
cd "$(dirname "$0")/../../.."
POLICY=${POLICY:-policy:routerag-sft-qwen2.5-coder-0.5b}
MARGIN=${MARGIN:-0}
source scripts/lanes.sh

jobs() {
  # the longest first, so that lanes end together
  echo "2wiki-routerag-learned-mode 2wiki routerag 100 model.lora_path=$POLICY params.mode_router=learned params.mode_router_margin=$MARGIN label=routerag-policy-learned-mode"
  echo "musique-routerag-learned-mode musique routerag 50 model.lora_path=$POLICY params.mode_router=learned params.mode_router_margin=$MARGIN label=routerag-policy-learned-mode"
  echo "2wiki-hard-route-learned 2wiki hard-route 100 params.router=learned params.router_margin=$MARGIN modes=[passage,bm25,graph,hybrid] label=hard-route-learned"
  echo "musique-hard-route-learned musique hard-route 50 params.router=learned params.router_margin=$MARGIN modes=[passage,bm25,graph,hybrid] label=hard-route-learned"
  echo "musique-realroute-learned musique realroute 50 params.router=learned params.router_margin=$MARGIN modes=[passage,bm25,graph,hybrid] label=realroute-learned"
  echo "musique-realroute-4modes musique realroute 50 modes=[passage,bm25,graph,hybrid] label=realroute-4modes"
  echo "2wiki-realroute-learned 2wiki realroute 100 params.router=learned params.router_margin=$MARGIN modes=[passage,bm25,graph,hybrid] label=realroute-learned"
  echo "2wiki-realroute-4modes 2wiki realroute 100 modes=[passage,bm25,graph,hybrid] label=realroute-4modes"
}

run_lanes
