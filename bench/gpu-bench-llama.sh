#!/usr/bin/env bash
# Llama-family shapes (issue 18) on one GPU, bf16, batch 4 x 1024: PyTorch
# eager and torch.compile (torch_llama_baseline.py, which also exports the
# model and writes the tokens it trained on) and zcc's plan on the same
# weights and tokens, in one call; then where zcc's step time goes
# (--profile). SIZES="1b 8b-8l" (default 1b: Llama 3.2 1B's shape; 8b-8l:
# Llama 3 8B's layer shape, 8 of its 32 layers). Run from a directory packed
# by LLAMA_ONNX_DIR=... tools/gpu-pack.sh. A size may name its batch and length,
# SIZE-bBATCHsSEQ (e.g. 1b-b1s8192: one sequence of 8k tokens; plans
# llama-1b-b1s8192-bf16.zplan); plain SIZE is batch 4 x 1024. MODES=compile leaves out eager (the
# comparison is against torch.compile; MODES= empty: no PyTorch run, its export alone, for a
# length that does not fit its memory); variant plans packed beside the default
# (plans/llama-SIZE-bf16-VARIANT.zplan, e.g. -selective) get a timed row each.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-llama}
work=/tmp/gpu-bench-llama-work
mkdir -p "$out" "$work"
steps=${STEPS:-10} warmup=${WARMUP:-3}
for spec in ${SIZES:-1b}; do
  echo "== llama $spec"
  batch=4 seq=1024 model=$spec
  if [[ $spec =~ ^(.*)-b([0-9]+)s([0-9]+)$ ]]; then
    model=${BASH_REMATCH[1]} batch=${BASH_REMATCH[2]} seq=${BASH_REMATCH[3]}
  fi
  size=$spec # the files' name
  python3 "$here/torch_llama_baseline.py" --size "$model" --batch "$batch" --seq "$seq" --steps "$steps" \
    --warmup "$warmup" --modes "${MODES-eager,compile}" --export "$work/llama-$size.onnx" \
    --tokens "$work/tokens-$size.bin" 2>&1 | grep -v Warning | tee "$out/torch-$size.txt" |
    cut -c1-400
  run() { # steps metrics... (zrun's flags after); PLAN_SUFFIX picks a variant plan
    local n=$1; shift
    "$here/zrun" train "$here/plans/llama-$size-bf16${PLAN_SUFFIX:-}.zplan" --backend cuda \
      --weights "$work/llama-$size.onnx" --tokens "$work/tokens-$size.bin" --token-bytes 4 \
      --steps "$n" "$@"
  }
  run $((steps + warmup)) --metrics "$out/zcc-$size.jsonl" > "$out/zcc-$size.log" 2>&1 || true
  grep -E "^step|zrun:" "$out/zcc-$size.log" | tail -5
  if [ "${PROFILE:-1}" != 0 ]; then # PROFILE=0: no profile (a shorter call)
    run 3 --profile > "$out/profile-$size.txt" 2>&1 || true
    head -45 "$out/profile-$size.txt" | cut -c1-200
  fi
  python3 "$here/bench_summary.py" "$out/torch-$size.txt" "$out/zcc-$size.jsonl" "$warmup" \
    "$here/plans/llama-$size.compile" "$here/plans/llama-$size-bf16.report" \
    "$out/zcc-$size.log" | tee "$out/summary-$size.md"
  # Variant plans packed beside the default (llama-SIZE-bf16-VARIANT.zplan): their zcc row.
  for plan in "$here"/plans/llama-"$size"-bf16-*.zplan; do
    [ -f "$plan" ] || continue
    v=${plan##*-bf16-}; v=${v%.zplan}
    PLAN_SUFFIX=-$v run $((steps + warmup)) --metrics "$out/zcc-$size-$v.jsonl" \
      > "$out/zcc-$size-$v.log" 2>&1 || true
    ZCC_LABEL="zcc --recompute $v" python3 "$here/bench_summary.py" "$out/torch-$size.txt" \
      "$out/zcc-$size-$v.jsonl" "$warmup" "$here/plans/llama-$size.compile" \
      "$here/plans/llama-$size-bf16-$v.report" "$out/zcc-$size-$v.log" |
      grep -E '^\| zcc|^zcc:' | tee "$out/summary-$size-$v.md"
  done
  rm -f "$work/llama-$size.onnx" "$work/llama-$size.onnx.data" # disk for the next size
done
