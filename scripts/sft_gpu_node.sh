#!/usr/bin/env bash
# SFT of RouteRAG policies on a GPU node whose Python has torch + transformers + peft but not
# routerag: routerag runs from this checkout's src/ (PYTHONPATH), its other needs (trl, datasets,
# pydantic, gguf, ...) installed beside it. One run per spec NAME=GOLDEN_SET[;KEY=VALUE...] (each
# KEY=VALUE one more --set of that run), each packed as OUT/sft-<name>.tgz (adapter.gguf, the PEFT
# adapter, metrics, summary, curve, log) as soon as it ends.
#   bash scripts/sft_gpu_node.sh GGUF OUT outcome=docs/results/golden-outcome planned=docs/results/golden-planned
#   UNTIL_OK=1 bash scripts/sft_gpu_node.sh GGUF OUT \
#     'outcome-fp32=docs/results/golden-outcome;sft.extra={bf16: false, tf32: true}' \
#     'outcome-lr1e-4=docs/results/golden-outcome;sft.learning_rate=1.0e-4'
# A run after the first is given at most $LATER_S seconds (default 240), so a slow node still
# brings the first run back; with UNTIL_OK=1 the runs after the first that succeeds are skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
gguf=$1 out=$2
shift 2
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
first=1
for spec in "$@"; do
  name=sft-${spec%%=*} rest=${spec#*=}
  golden=${rest%%;*} sets=()
  if [ "$rest" != "$golden" ]; then
    IFS=';' read -ra pairs <<< "${rest#*;}"
    for pair in "${pairs[@]}"; do sets+=(--set "$pair"); done
  fi
  limit=()
  [ "$first" = 1 ] || limit=(timeout "${LATER_S:-240}")
  first=0
  start=$(date +%s)
  "${limit[@]}" python3 -c 'import sys; from routerag.cli.main import main; sys.argv[0] = "routerag"; main()' \
    train routerag-sft --config configs/train/routerag-sft-gpu.yaml --set "model.name=$gguf" \
    --set "sft.golden_set=$golden" "${sets[@]}" --out "/tmp/$name" > "/tmp/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc, $(( $(date +%s) - start )) s"
  grep -E "train_runtime|trained" "/tmp/$name.log" | tail -2
  (cd /tmp && tar czf "$out/$name.tgz" --ignore-failed-read "$name.log" "$name/adapter.gguf" "$name/final/adapter_config.json" "$name/final/adapter_model.safetensors" \
    "$name/sft_summary.json" "$name/sft_data_stats.json" "$name/sft/metrics.jsonl" "$name/config.resolved.yaml" \
    "$name/training_curves.png" 2>/dev/null)
  [ "$rc" = 0 ] && [ "${UNTIL_OK:-0}" = 1 ] && break
done
