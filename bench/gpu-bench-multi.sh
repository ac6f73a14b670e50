#!/usr/bin/env bash
# The larger shape of issue 8 on the GPUs of one node (N >= 2, nvidia-smi's
# count): PyTorch FSDP2 (torch_fsdp2_baseline.py under torchrun) next to zcc's
# ZeRO-3 plan for N ranks run as one process per GPU over NCCL (zrun
# --nproc-per-node N). GPT-2 1.5B, bf16, 4 x 1024 tokens per rank. Run from the
# directory packed by
#   GPT2_XL_ONNX=gpt2xl.onnx MEMXL="a f g" tools/gpu-pack.sh   (.carry/gpu-mem1.5b)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-multi}
work=/tmp/gpu-bench-multi-work
mkdir -p "$out" "$work"
n=$(nvidia-smi -L | wc -l)
plan="$here/plans/memxl-f-z3-w$n.zplan"
[ "$n" -ge 2 ] && [ -f "$plan" ] || { echo "gpu-bench-multi: needs >= 2 GPUs and $plan (found $n GPUs)"; exit 1; }
steps=${STEPS:-5} warmup=${WARMUP:-2}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# The weights zrun loads: the single-GPU script's model (seed 0), exported.
python3 "$here/torch_gpt2_baseline.py" --layers 48 --hidden 1600 --heads 25 --batch 4 --seq 1024 \
  --steps 1 --warmup 0 --modes eager --export "$work/gpt2xl.onnx" > "$work/export.log" 2>&1
torchrun --nproc-per-node "$n" "$here/torch_fsdp2_baseline.py" --layers 48 --hidden 1600 --heads 25 \
  --batch 4 --seq 1024 --steps "$steps" --warmup "$warmup" 2>&1 | grep -v Warning | tee "$out/fsdp2.txt" | cut -c1-400
python3 -c "import numpy as np; np.random.seed(0); np.random.randint(0, 50257, size=4 * 1025 * 64 * $n, dtype=np.uint16).tofile('$work/tokens.bin')"
"$here/zrun" train "$plan" --backend cuda --nproc-per-node "$n" --weights "$work/gpt2xl.onnx" \
  --tokens "$work/tokens.bin" --steps $((steps + warmup)) --metrics "$out/z3.jsonl" > "$out/z3.log" 2>&1
grep -E "^step|zrun: cuda|bytes" "$out/z3.log" | tail -8
python3 - "$out/fsdp2.txt" "$out/z3.jsonl" "$warmup" "$n" <<'PY' | tee "$out/summary.md"
import json, sys
fsdp = json.loads(open(sys.argv[1]).read().split("fsdp2 ", 1)[1].splitlines()[0])
rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
rows = rows[int(sys.argv[3]):]
ms = sum(r["step_ms"] for r in rows) / len(rows)
tok = 4 * 1024 * int(sys.argv[4]) / (ms / 1e3)
print(f"| GPT-2 1.5B, {sys.argv[4]} GPUs | tokens/s | step | peak memory per rank |")
print("|---|---|---|---|")
print(f"| PyTorch FSDP2 | {fsdp['tokens_per_s']:,.0f} | {fsdp['step_ms']:.1f} ms | {fsdp['peak_mem_gib_per_rank']:.2f} GiB |")
print(f"| zcc ZeRO-3 (zrun --nproc-per-node) | {tok:,.0f} | {ms:.1f} ms | see z3.log |")
PY
