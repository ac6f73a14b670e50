#!/usr/bin/env bash
# The larger shape of issue 8 on one GPU: GPT-2 1.5B (48 layers, 1600 wide, 25
# heads), bf16, batch 4 x 1024. PyTorch eager and torch.compile
# (torch_gpt2_baseline.py, which exports the model here) next to zcc's plain
# plan and its ZeRO-3 plan over 2 in-process ranks, and the ZeRO-3 plan's
# profile with --overlap-comm and without: the communication left exposed on
# the compute stream. Run from the directory packed by
#   GPT2_XL_ONNX=gpt2xl.onnx MEMXL="a f g" tools/gpu-pack.sh   (.carry/gpu-mem1.5b)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-large}
work=/tmp/gpu-bench-large-work
mkdir -p "$out" "$work"
steps=${STEPS:-5} warmup=${WARMUP:-2}
python3 "$here/torch_gpt2_baseline.py" --layers 48 --hidden 1600 --heads 25 --batch 4 --seq 1024 \
  --steps "$steps" --warmup "$warmup" --modes eager,compile --export "$work/gpt2xl.onnx" 2>&1 |
  grep -v Warning | tee "$out/torch.txt" | cut -c1-400
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 50257, size=4 * 1025 * 64, dtype=np.uint16).tofile('$work/tokens.bin')"
run() { # plan steps metrics log [flags]
  local plan=$1 n=$2 metrics=$3 log=$4; shift 4
  "$here/zrun" train "$here/plans/$plan.zplan" --backend cuda --weights "$work/gpt2xl.onnx" \
    --tokens "$work/tokens.bin" --steps "$n" "$@" --metrics "$metrics" > "$log" 2>&1
  grep -E "^step|zrun: cuda" "$log" | tail -4
}
run memxl-a-plain $((steps + warmup)) "$out/zcc.jsonl" "$out/zcc.log"
run memxl-f-z3-w2 $((steps + warmup)) "$out/z3.jsonl" "$out/z3.log"
for plan in memxl-f-z3-w2 memxl-g-z3-w2-no-overlap; do
  "$here/zrun" train "$here/plans/$plan.zplan" --backend cuda --weights "$work/gpt2xl.onnx" \
    --tokens "$work/tokens.bin" --steps 3 --profile > "$out/$plan.profile" 2>&1
  echo "$plan: $(grep -E '^profile:|exposed' "$out/$plan.profile" | tr '\n' ' ')"
done
head -30 "$out/memxl-f-z3-w2.profile" | cut -c1-200
python3 "$here/bench_summary.py" "$out/torch.txt" "$out/zcc.jsonl" "$warmup" \
  "$here/plans/memxl-a-plain.compile" "$here/plans/memxl-a-plain.report" "$out/zcc.log" \
  "$here/plans/memxl-f-z3-w2.report" "$out/z3.log" | tee "$out/summary.md"
