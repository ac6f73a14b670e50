#!/usr/bin/env bash
# Memory levers on one GPU (issue 7): for every plan under plans/mem-*.zplan
# (packed by tools/gpu-pack.sh with GPT2_ONNX, each with its zcc report beside
# it), trains a few steps with the weights of the model the benchmark exports
# here, and tabulates zrun's measured device memory next to the report's
# prediction and the step time; with PROFILE=1 also 3 profiled steps each and
# the communication the compute stream waits for (exposed).
# Usage: [PREFIX=mem-] [PROFILE=1] gpu-memory.sh MODEL.onnx TOKENS.bin [STEPS]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
model=$1 tokens=$2 steps=${3:-4} prefix=${PREFIX:-mem-}
out=${OUT:-/tmp/gpu-memory}
mkdir -p "$out"
for plan in "$here"/plans/${prefix}*.zplan; do
  name=$(basename "$plan" .zplan)
  "$here/zrun" train "$plan" --backend cuda --weights "$model" --tokens "$tokens" \
    --steps "$steps" --metrics "$out/$name.jsonl" > "$out/$name.log" 2>&1 || echo "FAIL $name: $(tail -2 "$out/$name.log")"
  if [ -n "${PROFILE:-}" ]; then
    "$here/zrun" train "$plan" --backend cuda --weights "$model" --tokens "$tokens" \
      --steps 3 --profile > "$out/$name.profile" 2>&1 || echo "FAIL $name --profile"
  fi
done
python3 "$here/memory_summary.py" "$here/plans" "$out" "$prefix"
