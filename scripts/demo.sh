#!/usr/bin/env bash
# The main job, on an embedded default: compile the Llama-style example model
# (examples/models/llama-tiny.onnx, exported from PyTorch) into a ZeRO-3
# training plan for 2 data-parallel ranks (overlapped communication), show
# its memory report, and train it with zrun — 2 in-process ranks on the CPU,
# or on the GPU where one is usable — : 20 AdamW steps with warmup and cosine
# decay, each loss next to PyTorch's (one process, global batch 4).
#   scripts/demo.sh          # the demo
#   scripts/demo.sh --ir     # also print the imported IR
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target zcc zrun >/dev/null

model=examples/models/llama-tiny
flags=(--micro-batch 2 --loss cross-entropy --frozen 'inv_freq|lifted_tensor'
       --lr 2e-3 --weight-decay 0.1 --grad-clip 1.0
       --zero-stage 3 --world-size 2 --overlap-comm --stage3-param-persistence-threshold 1000)
backend=cpu
if build/runtime/zrun devices >/dev/null 2>&1; then backend=cuda; fi
mkdir -p build/demo
if [[ "${1:-}" == "--ir" ]]; then
  build/tools/zcc/zcc $model.onnx "${flags[@]}" --emit=mlir \
    --mlir-elide-resource-strings-if-larger=64 --mlir-elide-elementsattrs-if-larger=64
fi
set -x
build/tools/zcc/zcc $model.onnx "${flags[@]}" -o build/demo/llama-tiny.zplan
build/tools/zcc/zcc $model.onnx "${flags[@]}" --emit=report
build/runtime/zrun train build/demo/llama-tiny.zplan --steps 20 --backend $backend \
  --lr-schedule warmup-cosine --warmup-steps 5 --total-steps 20 \
  --data input_ids=$model.input_ids.npy --data labels=$model.labels.npy \
  --metrics build/demo/metrics.jsonl
{ set +x; } 2>/dev/null
/usr/bin/python3 - <<'PY'
import json
ref = json.load(open("examples/models/references.json"))["models"]["llama-tiny"]["trajectories"]["sched"]
rows = [json.loads(l) for l in open("build/demo/metrics.jsonl")]
print("step  zcc loss    PyTorch loss  relative difference")
for k, r in enumerate(rows):
    print(f"{k + 1:4d}  {r['loss']:.6f}    {ref['loss'][k]:.6f}      {abs(r['loss'] - ref['loss'][k]) / ref['loss'][k]:.1e}")
PY
