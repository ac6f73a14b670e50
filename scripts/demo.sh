#!/usr/bin/env bash
# The main job, on an embedded default: compile the Llama-style example model
# (examples/models/llama-tiny.onnx, exported from PyTorch) into a plan, show
# its memory report, and run it on the CPU with zrun: the loss of the first
# batch, next to PyTorch's. (Training with ZeRO comes with the next issues.)
#   scripts/demo.sh          # the demo
#   scripts/demo.sh --ir     # also print the imported training-step IR
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target zcc zrun >/dev/null

model=examples/models/llama-tiny
flags=(--micro-batch 4 --loss cross-entropy --frozen 'inv_freq|lifted_tensor')
mkdir -p build/demo
if [[ "${1:-}" == "--ir" ]]; then
  build/tools/zcc/zcc $model.onnx "${flags[@]}" --emit=mlir \
    --mlir-elide-resource-strings-if-larger=64 --mlir-elide-elementsattrs-if-larger=64
fi
set -x
build/tools/zcc/zcc $model.onnx "${flags[@]}" -o build/demo/llama-tiny.zplan
build/tools/zcc/zcc $model.onnx "${flags[@]}" --emit=report
build/runtime/zrun eval build/demo/llama-tiny.zplan \
  --data input_ids=$model.input_ids.npy --data labels=$model.labels.npy
{ set +x; } 2>/dev/null
/usr/bin/python3 -c "import json; print('PyTorch, step 0: loss:', json.load(open('examples/models/references.json'))['models']['llama-tiny']['trajectories']['plain']['loss'][0])"
