#!/usr/bin/env bash
# Downloads the wheels a GPU node without network lacks (it has PyTorch, and its own transformers and
# peft, which these replace so that the node runs the versions this machine tested), for its Python,
# at the versions installed here, into DIR. The lent nodes have pandas and pyarrow (the H200 of 2026-11-27 ran
# datasets, which imports both, from a kit that carried neither);
# a node without them needs EXTRA="pandas pyarrow python-dateutil six" (+55 MB). A rehearsal here in
# a Python 3.12.1 venv holding only torch, transformers and peft got past the imports with EXTRA, then
# failed in datasets' fingerprinting ("Can't pickle <class 'MonthDayNano'>", pyarrow 21 and 26 alike):
# that Python differs from the node's, on which these versions ran.
#   bash scripts/gpu/gpu_wheels.sh DIR [PYTHON_VERSION]        # default 3.12, the lent nodes' Python
# then: bash scripts/gpu/gpu_kit.sh KIT_DIR 60000000 DIR     (scripts/gpu/grpo_gpu_node.sh installs them with
# pip --no-index --no-deps into /tmp/site, so the list must hold every dependency the node lacks).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$1 py=${2:-3.12}
PACKAGES=(
  trl datasets peft transformers tokenizers huggingface_hub safetensors hf-xet accelerate  # training stack
  dill multiprocess xxhash fsspec                                                          # datasets' own
  pydantic pydantic_core typing-inspection annotated-types                                  # routerag's models
  gguf                                                                                      # adapter export
  faiss-cpu bm25s PyStemmer igraph python-igraph texttable                                  # the training index
  ${EXTRA:-}
)
pins=()
for name in "${PACKAGES[@]}"; do
  version=$(python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name") \
    || { echo "error: $name is not installed here (bash scripts/install.sh first)" >&2; exit 1; }
  pins+=("$name==$version")
done
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --dest "$dest" \
  --python-version "$py" --implementation cp --abi "cp${py/./}" --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any "${pins[@]}"
ls "$dest" | wc -l | xargs echo "wheels in $dest:"
