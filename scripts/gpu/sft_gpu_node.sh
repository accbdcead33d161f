#!/usr/bin/env bash
# SFT of RouteRAG policies on a GPU node whose Python has torch + transformers + peft but not
# routerag: routerag runs from this checkout's src/ (PYTHONPATH), its other needs (trl, datasets,
# pydantic, gguf, ...) installed beside it. One run per spec NAME=GOLDEN_SET[;KEY=VALUE...] (each
# KEY=VALUE one more --set of that run), each packed as OUT/sft-<name>.tgz (resolved config, adapter
# config, metrics, summary, curve, log) as soon as it ends, with the adapter GGUF beside it as 15 MB pieces
# OUT/sft-<name>.adapter.gguf.NN (a device returns no file over 16 MB: the 1.5B's adapter is 18.5 MB;
# join them with `cat sft-<name>.adapter.gguf.* > adapter.gguf`) and, with PEFT=1, the PEFT weights
# likewise (OUT/sft-<name>.peft.safetensors.NN). At most 8 files come back from a call: two runs fit
# without PEFT=1, one with it.
#   bash scripts/gpu/sft_gpu_node.sh GGUF OUT outcome=docs/results/golden-outcome planned=docs/results/golden-planned
#   UNTIL_OK=1 bash scripts/gpu/sft_gpu_node.sh GGUF OUT \
#     'outcome-fp32=docs/results/golden-outcome;sft.extra={bf16: false, tf32: true}' \
#     'outcome-lr1e-4=docs/results/golden-outcome;sft.learning_rate=1.0e-4'
#   PEFT=1 bash scripts/gpu/sft_gpu_node.sh QWEN-1.5B.gguf OUT \
#     'outcome-1p5b=docs/results/golden-outcome;sft.extra={bf16: false, tf32: true};sft.per_device_train_batch_size=4;sft.gradient_accumulation_steps=2'
#   (the 1.5B in batches of 8 would not fit in 80 GB: 4 x 2 accumulated, docs/experiments/2026-11-27-sft-outcome-1p5b.md)
# A run after the first is given at most $LATER_S seconds (default 240), so a slow node still
# brings the first run back; with UNTIL_OK=1 the runs after the first that succeeds are skipped.
set -uo pipefail
cd "$(dirname "$0")/../.."
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
  (cd /tmp && tar czf "$out/$name.tgz" --ignore-failed-read "$name.log" "$name/final/adapter_config.json" \
    "$name/sft_summary.json" "$name/sft_data_stats.json" "$name/sft/metrics.jsonl" "$name/config.resolved.yaml" \
    "$name/training_curves.png" 2>/dev/null)
  [ -f "/tmp/$name/adapter.gguf" ] && split -b 15000000 -d "/tmp/$name/adapter.gguf" "$out/$name.adapter.gguf."
  if [ "${PEFT:-0}" = 1 ] && [ -f "/tmp/$name/final/adapter_model.safetensors" ]; then
    split -b 15000000 -d "/tmp/$name/final/adapter_model.safetensors" "$out/$name.peft.safetensors."
  fi
  (cd "/tmp/$name" && sha256sum adapter.gguf final/adapter_model.safetensors 2>/dev/null)
  [ "$rc" = 0 ] && [ "${UNTIL_OK:-0}" = 1 ] && break
done
