#!/usr/bin/env bash
# Hugging Face decoder families whose attention differs from Llama's (issue 48: 96-wide heads,
# 256-wide heads on one k/v head) on one GPU, bf16, batch 4 x 1024: torch.compile
# (torch_hf_baseline.py, which also exports the model and writes the tokens it trained on) and
# zcc's plan on the same weights and tokens, in one call; then where zcc's step time goes
# (--profile). SIZES="phi3-mini-8l gemma-2b-8l" (the default; torch_hf_baseline.py lists them).
# Run from a directory packed by HF_ONNX_DIR=... tools/gpu-pack.sh (plans/hf-SIZE-bf16.zplan).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-hf}
work=/tmp/gpu-bench-hf-work
mkdir -p "$out" "$work"
steps=${STEPS:-10} warmup=${WARMUP:-3}
for size in ${SIZES:-phi3-mini-8l gemma-2b-8l}; do
  echo "== $size"
  python3 "$here/torch_hf_baseline.py" --size "$size" --batch 4 --seq 1024 --steps "$steps" \
    --warmup "$warmup" --modes "${MODES-compile}" --export "$work/$size.onnx" \
    --tokens "$work/tokens-$size.bin" 2>&1 | grep -v Warning | tee "$out/torch-$size.txt" |
    cut -c1-400
  run() { # steps, then zrun's flags
    local n=$1; shift
    "$here/zrun" train "$here/plans/hf-$size-bf16.zplan" --backend cuda \
      --weights "$work/$size.onnx" --tokens "$work/tokens-$size.bin" --token-bytes 4 \
      --steps "$n" "$@"
  }
  run $((steps + warmup)) --metrics "$out/zcc-$size.jsonl" > "$out/zcc-$size.log" 2>&1 || true
  grep -E "^step|zrun:" "$out/zcc-$size.log" | tail -5
  run 3 --profile > "$out/profile-$size.txt" 2>&1 || true
  head -30 "$out/profile-$size.txt" | cut -c1-200
  python3 "$here/bench_summary.py" "$out/torch-$size.txt" "$out/zcc-$size.jsonl" "$warmup" \
    "$here/plans/hf-$size.compile" "$here/plans/hf-$size-bf16.report" \
    "$out/zcc-$size.log" | tee "$out/summary-$size.md"
  rm -f "$work/$size.onnx" "$work/$size.onnx.data" # disk for the next size
done
