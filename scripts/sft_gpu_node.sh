#!/usr/bin/env bash
# SFT of RouteRAG policies on a GPU node whose Python has torch + transformers + peft but not
# routerag: routerag runs from this checkout's src/ (PYTHONPATH), its other needs (trl, datasets,
# pydantic, gguf, ...) installed beside it. One run per golden set, each packed as
# OUT/<name>.tgz (adapter.gguf, adapter_config.json, metrics, summary, curve, log) as soon as it ends.
#   bash scripts/sft_gpu_node.sh GGUF OUT outcome=docs/results/golden-outcome planned=docs/results/golden-planned
# A run after the first is given at most $LATER_S seconds (default 240), so a slow node still
# brings the first run back.
set -uo pipefail
cd "$(dirname "$0")/.."
gguf=$1 out=$2
shift 2
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
first=1
for spec in "$@"; do
  name=sft-${spec%%=*} golden=${spec#*=}
  limit=()
  [ "$first" = 1 ] || limit=(timeout "${LATER_S:-240}")
  first=0
  start=$(date +%s)
  "${limit[@]}" python3 -c 'import sys; from routerag.cli.main import main; sys.argv[0] = "routerag"; main()' \
    train routerag-sft --config configs/train/routerag-sft-gpu.yaml --set "model.name=$gguf" \
    --set "sft.golden_set=$golden" --out "/tmp/$name" > "/tmp/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc, $(( $(date +%s) - start )) s"
  grep -E "train_runtime|trained" "/tmp/$name.log" | tail -2
  (cd /tmp && tar czf "$out/$name.tgz" --ignore-failed-read "$name.log" "$name/adapter.gguf" "$name/final/adapter_config.json" \
    "$name/sft_summary.json" "$name/sft_data_stats.json" "$name/sft/metrics.jsonl" "$name/config.resolved.yaml" \
    "$name/training_curves.png" 2>/dev/null)
done
