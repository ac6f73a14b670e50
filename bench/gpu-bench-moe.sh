#!/usr/bin/env bash
# A Mixtral-style mixture of experts (issue 21) on one GPU, bf16, batch 4 x 1024:
# PyTorch eager and torch.compile of Hugging Face's own sparse Mixtral
# (torch_moe_baseline.py, which also exports the same model in the dense
# dispatch and writes the tokens it trained on) and zcc's plan on the same
# weights and tokens, in one call; then where zcc's step time goes (--profile).
# Run from a directory packed by MOE_ONNX=moe-small.onnx tools/gpu-pack.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-moe}
work=/tmp/gpu-bench-moe-work
mkdir -p "$out" "$work"
steps=${STEPS:-10} warmup=${WARMUP:-3}
python3 "$here/torch_moe_baseline.py" --size small --batch 4 --seq 1024 --steps "$steps" \
  --warmup "$warmup" --modes eager,compile --export "$work/moe-small.onnx" \
  --tokens "$work/tokens.bin" 2>&1 | grep -v Warning | tee "$out/torch.txt" | cut -c1-400
run() { # steps flags...
  local n=$1; shift
  "$here/zrun" train "$here/plans/moe-small-bf16.zplan" --backend cuda \
    --weights "$work/moe-small.onnx" --tokens "$work/tokens.bin" --token-bytes 4 --steps "$n" "$@"
}
run $((steps + warmup)) --metrics "$out/zcc.jsonl" > "$out/zcc.log" 2>&1 || true
grep -E "^step|zrun:" "$out/zcc.log" | tail -5
run 3 --profile > "$out/profile.txt" 2>&1 || true
head -40 "$out/profile.txt" | cut -c1-200
python3 "$here/bench_summary.py" "$out/torch.txt" "$out/zcc.jsonl" "$warmup" \
  "$here/plans/moe-small.compile" "$here/plans/moe-small-bf16.report" "$out/zcc.log" |
  tee "$out/summary.md"
rm -f "$work/moe-small.onnx" "$work/moe-small.onnx.data"
