#!/usr/bin/env bash
# GPT-2 124M, bf16, batch 16 x 1024, one GPU: PyTorch eager and torch.compile
# (torch_gpt2_baseline.py, which also exports the model) and zcc's plan on the
# same random-init weights and random tokens, in one call; then the ZeRO-3
# plan with 2 in-process ranks on the GPU for memory per rank. Run from a
# directory packed by GPT2_ONNX=... tools/gpu-pack.sh. BATCH (default 16) must
# be the batch of the graph the plans were compiled from; MODES=compile leaves
# out eager.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench}
work=/tmp/gpu-bench-work
mkdir -p "$out" "$work"
steps=${STEPS:-10} warmup=${WARMUP:-3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 "$here/torch_gpt2_baseline.py" --batch "${BATCH:-16}" --seq 1024 --steps "$steps" \
  --warmup "$warmup" --modes "${MODES:-eager,compile}" --export "$work/gpt2.onnx" 2>&1 | grep -v Warning | tee "$out/torch.txt" | cut -c1-400
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 50257, size=${BATCH:-16} * 1025 * 64, dtype=np.uint16).tofile('$work/tokens.bin')"
# The process's device memory as nvidia-smi sees it (context included), sampled.
smi() { nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits 2>/dev/null | sort -n | tail -1; }
sample() { while sleep 0.2; do smi; done > "$1"; }
sample "$out/zcc-smi.txt" & sampler=$!
"$here/zrun" train "$here/plans/gpt2-124m-bf16.zplan" --backend cuda --weights "$work/gpt2.onnx" \
  --tokens "$work/tokens.bin" --steps $((steps + warmup)) --metrics "$out/zcc.jsonl" 2>&1 | tee "$out/zcc.log"
kill $sampler 2>/dev/null || true
echo "nvidia-smi: zcc's process used at most $(sort -n "$out/zcc-smi.txt" | tail -1) MiB"
sample "$out/z3-smi.txt" & sampler=$!
"$here/zrun" train "$here/plans/gpt2-124m-z3-w2.zplan" --backend cuda --weights "$work/gpt2.onnx" \
  --tokens "$work/tokens.bin" --steps 3 --metrics "$out/z3.jsonl" 2>&1 | tee "$out/z3.log"
kill $sampler 2>/dev/null || true
echo "nvidia-smi: the 2-rank process used at most $(sort -n "$out/z3-smi.txt" | tail -1) MiB"
# Where zcc's step time goes (event-timed; not part of the timed run above).
"$here/zrun" train "$here/plans/gpt2-124m-bf16.zplan" --backend cuda --weights "$work/gpt2.onnx" \
  --tokens "$work/tokens.bin" --steps 3 --profile > "$out/profile.txt" 2>&1
head -40 "$out/profile.txt" | cut -c1-200
python3 "$here/bench_summary.py" "$out/torch.txt" "$out/zcc.jsonl" "$warmup" "$here/gpt2-124m.compile" \
  "$here/gpt2-124m-bf16.report" "$out/zcc.log" "$here/gpt2-124m-z3-w2.report" "$out/z3.log" | tee "$out/summary.md"
