#!/usr/bin/env bash
# One-off: assemble the carried 1.5B GGUF pieces, SFT on golden-outcome (fp32 + TF32), bring back split files.
set -uo pipefail
mkdir -p /tmp/parts && cp .xfer/p17 /tmp/parts/
ls -l /tmp/parts | awk '{s+=$5} END {print NR-1, "parts", s, "bytes"}'
cat /tmp/parts/p{00..17} > /tmp/m.gguf
h=$(sha256sum /tmp/m.gguf | cut -c1-64); echo "sha $h"
[ "$h" = cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ] || { ls -l /tmp/parts; echo BAD-SHA; exit 3; }
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
n=sft-outcome-1p5b; start=$(date +%s); export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
train() {  # extra --set pairs; same recipe as the 0.5B outcome run (effective batch 8, fp32 + TF32)
  timeout "$1" python3 -c 'import sys; from routerag.cli.main import main; sys.argv[0] = "routerag"; main()' \
    train routerag-sft --config configs/train/routerag-sft-gpu.yaml --set model.name=/tmp/m.gguf \
    --set sft.golden_set=docs/results/golden-outcome --set 'sft.extra={bf16: false, tf32: true}' \
    --set grpo.save_steps=60 "${@:2}" --out /tmp/$n > /tmp/$n.log 2>&1
}
train "${TRAIN_S:-520}" --set sft.per_device_train_batch_size=4 --set sft.gradient_accumulation_steps=2
rc=$?; echo "rc=$rc $(( $(date +%s) - start )) s"
if [ "$rc" != 0 ] && grep -q "OutOfMemory" /tmp/$n.log; then
  mv /tmp/$n.log /tmp/$n-oom.log; rm -rf /tmp/$n
  train $(( ${TRAIN_S:-520} - ($(date +%s) - start) )) --set sft.per_device_train_batch_size=2 --set sft.gradient_accumulation_steps=4 --set sft.gradient_checkpointing=true
  echo "retry rc=$? $(( $(date +%s) - start )) s"
fi
nvidia-smi --query-gpu=memory.used --format=csv,noheader
grep -E "train_runtime|trained|Error|error" /tmp/$n.log | tail -4
cd /tmp/$n || exit 4
tar czf "$OUT/small.tgz" ../$n.log sft_summary.json sft_data_stats.json sft/metrics.jsonl config.resolved.yaml training_curves.png final/adapter_config.json 2>/dev/null
[ -f adapter.gguf ] && split -b 15000000 -d adapter.gguf "$OUT/adapter.gguf."
if [ -f final/adapter_model.safetensors ]; then split -b 15000000 -d final/adapter_model.safetensors "$OUT/final.st."
else ck=$(ls -d sft/checkpoint-* 2>/dev/null | sort -t- -k2 -n | tail -1)
  [ -n "$ck" ] && tar cf /tmp/ck.tar "$ck/adapter_model.safetensors" "$ck/adapter_config.json" "$ck/trainer_state.json" && split -b 15000000 -d /tmp/ck.tar "$OUT/ck.tar."
fi
sha256sum adapter.gguf final/adapter_model.safetensors 2>/dev/null
ls -l "$OUT"
