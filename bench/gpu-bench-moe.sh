#!/usr/bin/env bash
# Mixtures of experts (issues 21, 52) on one GPU, bf16, batch 4 x 1024: PyTorch
# eager and torch.compile of Hugging Face's own sparse module
# (torch_moe_baseline.py, which also exports the same model in the dense
# dispatch and writes the tokens it trained on) and zcc's plan on the same
# weights and tokens, in one call; then where zcc's step time goes (--profile).
# SIZES="small fine fine-dense" (default small): small is Mixtral's proportions
# (8 experts, top-2), fine a Qwen2-MoE with 64 experts top-8 and a shared
# expert, fine-dense the dense Qwen2 with fine's active parameters. MODES picks
# PyTorch's modes (default eager,compile); PROFILE=0 leaves out the profile.
# Variant plans packed beside the default (plans/moe-SIZE-bf16-VARIANT.zplan,
# e.g. -dense: the exported dense dispatch) get a timed row each.
# Run from a directory packed by MOE_ONNX_DIR=DIR tools/gpu-pack.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/gpu-bench-moe}
work=/tmp/gpu-bench-moe-work
mkdir -p "$out" "$work"
steps=${STEPS:-10} warmup=${WARMUP:-3}
for size in ${SIZES:-small}; do
  echo "== moe $size"
  python3 "$here/torch_moe_baseline.py" --size "$size" --batch 4 --seq 1024 --steps "$steps" \
    --warmup "$warmup" --modes "${MODES-eager,compile}" --export "$work/moe-$size.onnx" \
    --tokens "$work/tokens-$size.bin" 2>&1 | grep -v Warning | tee "$out/torch-$size.txt" |
    cut -c1-400
  run() { # steps flags...; PLAN_SUFFIX picks a variant plan
    local n=$1; shift
    "$here/zrun" train "$here/plans/moe-$size-bf16${PLAN_SUFFIX:-}.zplan" --backend cuda \
      --weights "$work/moe-$size.onnx" --tokens "$work/tokens-$size.bin" --token-bytes 4 \
      --steps "$n" "$@"
  }
  run $((steps + warmup)) --metrics "$out/zcc-$size.jsonl" > "$out/zcc-$size.log" 2>&1 || true
  grep -E "^step|zrun:" "$out/zcc-$size.log" | tail -5
  if [ "${PROFILE:-1}" != 0 ]; then
    run 3 --profile > "$out/profile-$size.txt" 2>&1 || true
    head -40 "$out/profile-$size.txt" | cut -c1-200
  fi
  python3 "$here/bench_summary.py" "$out/torch-$size.txt" "$out/zcc-$size.jsonl" "$warmup" \
    "$here/plans/moe-$size.compile" "$here/plans/moe-$size-bf16.report" "$out/zcc-$size.log" |
    tee "$out/summary-$size.md"
  for plan in "$here"/plans/moe-"$size"-bf16-*.zplan; do
    [ -f "$plan" ] || continue
    v=${plan##*-bf16-}; v=${v%.zplan}
    PLAN_SUFFIX=-$v run $((steps + warmup)) --metrics "$out/zcc-$size-$v.jsonl" \
      > "$out/zcc-$size-$v.log" 2>&1 || true
    grep -E "zrun:" "$out/zcc-$size-$v.log" | tail -2
    ZCC_LABEL="zcc --moe-dispatch $v" python3 "$here/bench_summary.py" "$out/torch-$size.txt" \
      "$out/zcc-$size-$v.jsonl" "$warmup" "$here/plans/moe-$size.compile" \
      "$here/plans/moe-$size-bf16-$v.report" "$out/zcc-$size-$v.log" |
      grep -E '^\| zcc|^zcc:' | tee "$out/summary-$size-$v.md"
  done
  rm -f "$work/moe-$size.onnx" "$work/moe-$size.onnx.data" # disk for the next size
done
