#!/usr/bin/env bash
# The main job, on an embedded default: compiles the Llama-style example model
# (examples/models/llama-tiny.onnx, exported from PyTorch) and prints its
# training step's IR. Later versions of zcc train it with ZeRO here.
#   scripts/demo.sh [MODEL.onnx] [zcc options...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target zcc >/dev/null

model=${1:-examples/models/llama-tiny.onnx}
shift || true
if [[ $# -eq 0 ]]; then
  set -- --micro-batch 4 --frozen 'inv_freq|lifted_tensor'
fi
# Weights (hex blobs at the end) and large constants are elided on the terminal.
build/tools/zcc/zcc "$model" --emit=mlir --mlir-elide-resource-strings-if-larger=64 \
  --mlir-elide-elementsattrs-if-larger=64 "$@"
