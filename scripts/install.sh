#!/usr/bin/env bash
# Installs routerag with every extra and its test tools on a fresh machine (Debian + CPython 3.11).
# constraints-cpu.txt picks the local CPU torch (2.13.0) inside pyproject's range.
# `local` runs llama.cpp through xllamacpp, a prebuilt AVX2 wheel: nothing compiles. The full install
# (`train`, in `all`) also compiles llama-cpp-python once (GRPO's rollouts need its raw logits; pip caches the wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
# llama-cpp-python compiles from source. Its default -march=native build died with "Illegal
# instruction" in llama.cpp's LoRA path on virtual machines that advertise AMX / AVX512-FP16
# (seen on this project's machines, 2026-11-26), so it is built for the portable AVX2 baseline
# unless CMAKE_ARGS is set; a native build already installed or in pip's wheel cache is rebuilt once.
# LLAVA_BUILD=OFF skips the multimodal library (mtmd, a quarter of the compile), which routerag never
# loads (docs/experiments/2026-11-29-llama-bindings.md).
PORTABLE_LLAMA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
export CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE_LLAMA}"
EXTRAS=${1:-all,dev}  # `bash scripts/install.sh local`: only what `routerag demo` needs (README's first command), no compile
python3 -m pip install -q -c constraints-cpu.txt -e ".[$EXTRAS]"
if [ "$CMAKE_ARGS" = "$PORTABLE_LLAMA" ] && python3 -c "import sys, llama_cpp
info = llama_cpp.llama_print_system_info().decode()
sys.exit(0 if ('AMX' in info or 'AVX512' in info) else 1)" 2>/dev/null; then
  echo "rebuilding llama-cpp-python for the portable AVX2 baseline (the installed build is -march=native)" >&2
  python3 -m pip cache remove llama_cpp_python >/dev/null 2>&1 || true
  python3 -m pip install -q --force-reinstall --no-deps "llama-cpp-python==$(python3 -c 'import llama_cpp; print(llama_cpp.__version__)')"
fi
# a real headless browser for the web UI tests (Debian's chromium; Playwright drives it)
if [ "$EXTRAS" = "all,dev" ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; browser tests will be skipped" >&2
  fi
fi
