#!/usr/bin/env bash
# Packs what the GPU suite needs into DIR (default .carry/gpu), for the GPU
# machine, which has CUDA but no LLVM, protobuf or OpenBLAS: zrun and the
# shared libraries it needs beyond the system's and CUDA's, plans compiled
# here, their data and references, the checkers, and tools/gpu-check.sh.
#
#   tools/gpu-pack.sh [DIR]      then, on the GPU machine: bash DIR/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.carry/gpu}
build=${ZCC_BUILD_DIR:-build}
M=../shared/models
E=examples/models
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZCC_ENABLE_CUDA=ON >/dev/null
cmake --build "$build" --target zcc zrun zrt-attention-bench zrt-moe-bench >/dev/null
rm -rf "$out" && mkdir -p "$out/lib" "$out/plans" "$out/data"
cp "$build/runtime/zrun" "$out/" && strip "$out/zrun" # the carry is 64 MiB in all
cp "$build/runtime/zrt-attention-bench" "$out/" && strip "$out/zrt-attention-bench"
cp "$build/runtime/zrt-moe-bench" "$out/" && strip "$out/zrt-moe-bench"
# Libraries the GPU machine lacks (its own glibc, libstdc++ and CUDA serve).
ldd "$build/runtime/zrun" | awk '/=> \// {print $3}' |
  grep -E 'libisal|libprotobuf-lite|libopenblas|libgfortran|libquadmath|libgloo|libhiredis|libibverbs|libnl-' |
  xargs -I{} cp -L {} "$out/lib/"
cp $M/mlp.x.npy $M/mlp.labels.npy $M/gpt2-tiny.input_ids.npy $M/gpt2-tiny.labels.npy "$out/data/"
cp $E/llama-tiny.input_ids.npy $E/llama-tiny.labels.npy "$out/data/"
cp $E/llama-tiny.input_ids.npy "$out/data/llama.ids.npy" # for gpu-check's agree()
cp $E/llama-tiny.labels.npy "$out/data/llama.labels.npy"
cp $M/gpt2-tiny.input_ids.npy "$out/data/gpt2.ids.npy"
cp $M/gpt2-tiny.labels.npy "$out/data/gpt2.labels.npy"
cp $M/references.json "$out/data/references.json"
cp $E/references.json "$out/data/llama-references.json"
cp test/Inputs/check_trajectory.py test/Inputs/check_trace.py test/Inputs/trace-event.schema.json tools/gpu-check.sh tools/gpu-faults.sh tools/kernel_parity.py tools/gpu-libs.sh \
  bench/gpu-bench.sh bench/bench_summary.py bench/gpu-memory.sh bench/memory_summary.py \
  ../shared/bench/torch_gpt2_baseline.py "$out/"
# Every kernel case, compiled and run on the CPU here (checked against NumPy).
/usr/bin/python3 test/e2e/Inputs/kernel_cases.py "$build/tools/zcc/zcc" "$build/runtime/zrun" \
  "$out/kernels" | tail -1
zcc=$build/tools/zcc/zcc
gpt2="--loss cross-entropy --frozen lifted_tensor --lr 2e-3 --weight-decay 0.1 --grad-clip 1.0"
llama="--loss cross-entropy --frozen inv_freq|lifted_tensor"
$zcc $M/mlp.onnx --micro-batch 16 --loss cross-entropy -o "$out/plans/mlp.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 -o "$out/plans/gpt2.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama -o "$out/plans/llama.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --precision bf16 -o "$out/plans/gpt2-bf16.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --precision bf16 -o "$out/plans/llama-bf16.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --precision fp16 -o "$out/plans/gpt2-fp16.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --precision fp16 -o "$out/plans/llama-fp16.zplan"
# Memory levers (issue 7): bit-identical to their plain plans on the GPU too.
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --recompute layer -o "$out/plans/gpt2-layer.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --recompute selective -o "$out/plans/gpt2-selective.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 1 --world-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm --offload-optimizer cpu \
  -o "$out/plans/gpt2-z1-w2-offload.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 2 --world-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm --offload-optimizer cpu \
  -o "$out/plans/gpt2-z2-w2-offload.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 3 --world-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm --offload-optimizer cpu \
  --offload-param cpu -o "$out/plans/gpt2-z3-w2-offload-param.zplan"
# NVMe offload (issue 24): the moments in swap files under /tmp/zcc-nvme on
# the GPU machine's disk, in chunks of 7000 elements (async, pipelined).
for s in 2 3; do
  $zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage $s --world-size 2 \
    --stage3-param-persistence-threshold 1000 --overlap-comm --offload-optimizer nvme \
    --nvme-path /tmp/zcc-nvme --nvme-chunk 7000 -o "$out/plans/gpt2-z$s-w2-nvme.zplan"
done
# ... and stage 3's parameter shards too (offload_param nvme).
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 3 --world-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm --offload-optimizer nvme \
  --offload-param nvme --nvme-path /tmp/zcc-nvme --nvme-chunk 8192 \
  -o "$out/plans/gpt2-z3-w2-nvme-param.zplan"
# 16-bit communication (--comm-dtype): gradients reduced in bf16 on an fp32
# model, and a bf16 model's stage-3 gathers and reductions in bf16.
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 2 --world-size 2 --comm-dtype bf16 \
  -o "$out/plans/gpt2-z2-w2-bf16comm.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 2 $gpt2 --zero-stage 3 --world-size 2 --precision bf16 \
  --stage3-param-persistence-threshold 1000 --comm-dtype bf16 -o "$out/plans/gpt2-z3-w2-bf16comm-bf16.zplan"
cp test/e2e/Inputs/same_losses.py "$out/"
# A vocabulary of 4099 (padded to 4160 by --target cuda): CUDA vs CPU.
/usr/bin/python3 test/e2e/Inputs/odd_vocab_lm.py "$out/lm.onnx" "$out/data/lm.ids.npy" "$out/data/lm.labels.npy"
$zcc "$out/lm.onnx" --micro-batch 2 --loss cross-entropy --target cuda -o "$out/plans/lm-padded.zplan"
$zcc "$out/lm.onnx" --micro-batch 2 --loss cross-entropy --target cuda --precision bf16 \
  -o "$out/plans/lm-padded-bf16.zplan"
rm "$out/lm.onnx"
# Dropout (kernels/Philox.h): the CUDA kernel's masks against the CPU's.
/usr/bin/python3 test/e2e/Inputs/dropout_mlp.py "$out/dropout.onnx" "$out/data/dropout"
$zcc "$out/dropout.onnx" --micro-batch 8 --loss cross-entropy --target cuda -o "$out/plans/dropout.zplan"
$zcc "$out/dropout.onnx" --micro-batch 8 --loss cross-entropy --target cuda --precision bf16 \
  -o "$out/plans/dropout-bf16.zplan"
rm "$out/dropout.onnx"
# Dropout's masks bit for bit: a model whose SGD-trained weights are the masks.
/usr/bin/python3 test/e2e/Inputs/dropout_bits.py "$out/dropout-bits.onnx" "$out/data/dropout-bits"
$zcc "$out/dropout-bits.onnx" --micro-batch 1 --optimizer sgd --lr 1 --weight-decay 0 --target cuda \
  -o "$out/plans/dropout-bits.zplan"
rm "$out/dropout-bits.onnx"
# Fused attention (--target cuda): a layer of 80 positions with an empty
# query row, head dimension 64 (bf16: the tensor-core kernels) and 16 (fp32:
# the per-row kernels), packed (one split), separate projections and grouped
# k/v heads (4 query heads on 2), and the other head widths (issue 48): 96 grouped, 256 on one
# k/v head, 72 (padded to the 80-wide kernels), CUDA vs CPU; GPT-2 fused vs PyTorch's references.
# The wider heads' plans take their weights from data/attn-dD.onnx (--weights external; one copy
# for the three precisions: the carry is 64 MiB with the repository).
for d in 16 64 "64 separate" "64 gqa" "96 gqa" "256 mqa" "72 gqa"; do
  /usr/bin/python3 test/e2e/Inputs/attention_lm.py "$out/attn.onnx" "$out/data/attn.ids.npy" \
    "$out/data/attn.labels.npy" $d
  ext=()
  if [ "${d%% *}" -gt 64 ]; then
    ext=(--weights external)
    cp "$out/attn.onnx" "$out/data/attn-d${d// /-}.onnx"
  fi
  for p in fp32 bf16 fp16; do
    $zcc "$out/attn.onnx" --micro-batch 2 --loss cross-entropy --target cuda --precision $p \
      "${ext[@]}" -o "$out/plans/attn-d${d// /-}-$p.zplan"
  done
done
rm "$out/attn.onnx"
# Norms on wide rows (the vectorized kernels: 768 and 1600 layer_norm, 2048
# rms_norm; the residual add folded into the backward), CUDA vs CPU.
for c in 768-layer 1600-layer 2048-rms; do
  w=${c%-*}
  /usr/bin/python3 test/e2e/Inputs/norm_lm.py "$out/norm.onnx" "$out/data/norm-$w.ids.npy" \
    "$out/data/norm-$w.labels.npy" "$w" "${c#*-}"
  for p in fp32 bf16; do
    $zcc "$out/norm.onnx" --micro-batch 2 --loss cross-entropy --target cuda --precision $p \
      -o "$out/plans/norm-$c-$p.zplan"
  done
done
rm "$out/norm.onnx"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --target cuda -o "$out/plans/gpt2-fused.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 4 $gpt2 --target cuda --precision bf16 -o "$out/plans/gpt2-fused-bf16.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --target cuda -o "$out/plans/llama-fused.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --target cuda --precision bf16 -o "$out/plans/llama-fused-bf16.zplan"
# Head widths 96 (Phi-3, fused qkv) and 256 on one k/v head (Gemma), Gemma 2's soft-capped
# scores and sliding window, fused, vs PyTorch (issue 48);
# weights read from examples/models, which travels with the repository (gpu-check --weights).
phi3="--loss cross-entropy --frozen inv_freq|lifted_tensor --padding-idx m.model.embed_tokens.weight=0"
gemma="--loss cross-entropy --frozen inv_freq|lifted_tensor|embed_scale --padding-idx m.lm_head.weight=0"
for p in fp32 bf16; do
  $zcc $E/phi3-tiny.onnx --micro-batch 4 $phi3 --target cuda --precision $p --weights external \
    -o "$out/plans/phi3-$p.zplan"
  $zcc $E/gemma-d256-tiny.onnx --micro-batch 4 $gemma --target cuda --precision $p \
    --weights external -o "$out/plans/gemma-d256-$p.zplan"
  $zcc $E/gemma2-tiny.onnx --micro-batch 4 $gemma --target cuda --precision $p \
    --weights external -o "$out/plans/gemma2-$p.zplan"
done
for m in phi3-tiny gemma-d256-tiny gemma2-tiny; do
  cp $E/$m.input_ids.npy $E/$m.labels.npy "$out/data/"
done
# Per-document attention (zcc --per-document) on packed token streams against PyTorch running
# each document on its own (issue 48): RoPE (llama-tiny) and learned positions (gpt2-tiny).
for p in fp32 bf16; do
  $zcc $E/llama-tiny.onnx --micro-batch 4 $llama --target cuda --per-document --precision $p \
    -o "$out/plans/llama-packed-$p.zplan"
  $zcc $M/gpt2-tiny.onnx --micro-batch 4 --loss cross-entropy --frozen lifted_tensor \
    --target cuda --per-document --precision $p -o "$out/plans/gpt2-packed-$p.zplan"
done
cp $E/llama-tiny-packed.tokens.bin $E/gpt2-tiny-packed.tokens.bin "$out/data/"
# The same with the optimizer after the backward (gpu-check: the updates on
# the second stream give the same parameters, so the same losses).
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --target cuda --optimizer-in-backward=off \
  -o "$out/plans/llama-fused-after.zplan"
$zcc $E/llama-tiny.onnx --micro-batch 4 $llama --target cuda --precision bf16 \
  --optimizer-in-backward=off -o "$out/plans/llama-fused-bf16-after.zplan"
# A small CNN with BatchNorm (issue 53; gpu-check's bn-* cases).
/usr/bin/python3 test/e2e/Inputs/batchnorm_model.py "$out/bn.onnx" "$out/data/bn" 8
bnflags="--loss cross-entropy --frozen running --target cuda"
$zcc "$out/bn.onnx" --micro-batch 8 $bnflags -o "$out/plans/bn-conv.zplan"
$zcc "$out/bn.onnx" --micro-batch 8 $bnflags --precision bf16 -o "$out/plans/bn-conv-bf16.zplan"
$zcc "$out/bn.onnx" --micro-batch 4 $bnflags --world-size 2 --zero-stage 3 --batch-norm sync \
  --stage3-param-persistence-threshold 0 -o "$out/plans/bn-sync-w2.zplan"
rm "$out/bn.onnx" "$out/data/bn.expected.json"
# The architectures of issue 21 (test/e2e/architectures.test's flags): fp32
# and bf16 with --target cuda, and ZeRO-3 over two in-process ranks.
arch() { # name zcc-flags... (the references' plain trajectory: AdamW, lr 1e-3, weight decay 0.01)
  local name=$1; shift
  set -- --lr 1e-3 --weight-decay 0.01 "$@"
  cp $E/$name.*.npy "$out/data/"
  local batch; batch=$(/usr/bin/python3 -c "import json; print(json.load(open('$E/references.json'))['models']['$name']['batch'])")
  for p in fp32 bf16; do
    $zcc $E/$name.onnx --micro-batch $batch --loss cross-entropy --target cuda --precision $p "$@" \
      -o "$out/plans/$name-$p.zplan"
  done
  $zcc $E/$name.onnx --micro-batch $((batch / 2)) --loss cross-entropy --target cuda "$@" \
    --zero-stage 3 --world-size 2 --stage3-param-persistence-threshold 100 -o "$out/plans/$name-z3-w2.zplan"
  case $name in mixtral-tiny|qwen-moe-tiny) # expert parallelism over the 2 ranks (issue 52)
    $zcc $E/$name.onnx --micro-batch $((batch / 2)) --loss cross-entropy --target cuda "$@" \
      --zero-stage 3 --world-size 2 --moe-ep-size 2 --stage3-param-persistence-threshold 100 \
      -o "$out/plans/$name-z3-w2-ep.zplan"
    $zcc $E/$name.onnx --micro-batch $((batch / 2)) --loss cross-entropy --target cuda "$@" \
      --zero-stage 2 --world-size 2 --moe-ep-size 2 --precision bf16 -o "$out/plans/$name-z2-w2-ep-bf16.zplan"
  esac
}
arch qwen2-tiny --frozen 'inv_freq|lifted_tensor'
arch gemma-tiny --frozen 'inv_freq|lifted_tensor|embed_scale' --padding-idx m.lm_head.weight=0
arch vit-tiny --frozen lifted_tensor
arch t5-tiny --frozen lifted_tensor
arch mixtral-tiny --frozen 'inv_freq|lifted_tensor' --aux-loss aux_loss=0.02
arch qwen-moe-tiny --frozen 'inv_freq|lifted_tensor' --aux-loss aux_loss=0.001
for st in 0 1 2 3; do
  for w in 2 4; do
    $zcc $M/gpt2-tiny.onnx --micro-batch $((4 / w)) $gpt2 --zero-stage $st --world-size $w \
      --stage3-param-persistence-threshold 1000 --overlap-comm -o "$out/plans/gpt2-z$st-w$w.zplan"
  done
done
# A device mesh (4 in-process ranks as 2 groups of 2): MiCS at stages 2-3,
# hpZ at stage 3 (test/e2e/mesh.test's schemes on the GPU).
$zcc $M/gpt2-tiny.onnx --micro-batch 1 $gpt2 --zero-stage 3 --world-size 4 --mics-shard-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm -o "$out/plans/gpt2-z3-w4-mics.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 1 $gpt2 --zero-stage 2 --world-size 4 --mics-shard-size 2 \
  --overlap-comm -o "$out/plans/gpt2-z2-w4-mics.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 1 $gpt2 --zero-stage 3 --world-size 4 --hpz-partition-size 2 \
  --stage3-param-persistence-threshold 1000 --overlap-comm -o "$out/plans/gpt2-z3-w4-hpz.zplan"
$zcc $M/gpt2-tiny.onnx --micro-batch 1 $gpt2 --zero-stage 3 --world-size 4 --quantized-weights \
  --stage3-param-persistence-threshold 1000 --overlap-comm -o "$out/plans/gpt2-z3-w4-qwz.zplan"
# qgZ, hierarchical (hpZ groups of 2: the group's all-to-all, then across).
$zcc $M/gpt2-tiny.onnx --micro-batch 1 $gpt2 --zero-stage 3 --world-size 4 --quantized-gradients \
  --hpz-partition-size 2 --stage3-param-persistence-threshold 1000 --overlap-comm \
  -o "$out/plans/gpt2-z3-w4-qgz.zplan"
# The memory-lever plans of each model go to a sibling directory (OUT-mem124m,
# OUT-mem1.5b) with their own zrun and libraries: each carried directory stays
# under the 64 MiB a device call takes (then, there:
# [PREFIX=memxl-] bash DIR/gpu-memory.sh MODEL.onnx TOKENS.bin).
memdir() {
  rm -rf "$1" && mkdir -p "$1/plans"
  cp -r "$out/lib" "$out/zrun" "$out"/*.py "$out"/*.sh "$1/"
}
dirs=()
# GPT-2 124M for bench/gpu-bench.sh, from the graph of an export of
# torch_gpt2_baseline.py (GPT2_ONNX=gpt2.onnx; its weights file may be a
# stand-in of zeros): plans without weights, which zrun --weights fills from
# the model the benchmark exports on the GPU machine (same script, same seed).
if [ -n "${GPT2_ONNX:-}" ]; then
  g="--loss cross-entropy --precision bf16 --target cuda --weights external --lr 1e-4"
  TIMEFORMAT="zcc compile: %R s wall on $(nproc) cores"
  { time $zcc "$GPT2_ONNX" $g -o "$out/plans/gpt2-124m-bf16.zplan"; } 2> "$out/gpt2-124m.compile"
  $zcc "$GPT2_ONNX" $g --emit=report > "$out/gpt2-124m-bf16.report"
  $zcc "$GPT2_ONNX" $g --zero-stage 3 --world-size 2 --overlap-comm -o "$out/plans/gpt2-124m-z3-w2.zplan"
  $zcc "$GPT2_ONNX" $g --zero-stage 3 --world-size 2 --overlap-comm --emit=report \
    > "$out/gpt2-124m-z3-w2.report"
  cat "$out/gpt2-124m.compile"
  # Memory levers (bench/gpu-memory.sh): plain, recompute, offload, and the
  # plan --auto picks for an 8 GiB budget; each with its report.
  mem="$out-mem124m"; memdir "$mem"; dirs+=("$mem")
  mem() { # name flags...
    local name=$1; shift
    $zcc "$GPT2_ONNX" $g "$@" -o "$mem/plans/mem-124m-$name.zplan" 2> "$mem/plans/mem-124m-$name.zcc"
    $zcc "$GPT2_ONNX" $g "$@" --emit=report > "$mem/plans/mem-124m-$name.report" 2>/dev/null
  }
  mem a-plain
  mem b-recompute-layer --recompute layer
  mem c-recompute-selective --recompute selective
  mem d-offload-optimizer --zero-stage 1 --offload-optimizer cpu
  mem e-offload-optimizer-param --zero-stage 3 --offload-optimizer cpu --offload-param cpu
  mem f-auto-8GiB --memory-budget 8GiB --auto
  # The mesh's schemes at W = 4 in-process ranks on one GPU (2 groups of 2),
  # bf16 communication, with and without --overlap-comm; qgZ under hpZ (its
  # two-level all-to-all), and all of ZeRO++ (hpZ, qwZ, qgZ)
  # (PREFIX=mesh- PROFILE=1 gpu-memory.sh: memory, step, exposed communication).
  # --stage3-max-reuse-distance 0: the backward gathers every parameter again
  # (124M is within DeepSpeed's default distance: it would keep the forward's
  # bf16 copies, and hpZ would have no backward gather to keep in the node).
  mesh="$out-mesh124m"; memdir "$mesh"; dirs+=("$mesh")
  r="--stage3-max-reuse-distance 0"
  for scheme in "plain" "mics --mics-shard-size 2" "hpz --hpz-partition-size 2" \
    "qgz --hpz-partition-size 2 --quantized-gradients" \
    "zpp --hpz-partition-size 2 --quantized-gradients --quantized-weights"; do
    set -- $scheme
    name=$1; shift
    for o in "" "--overlap-comm"; do
      n=mesh-124m-z3-w4-$name${o:+-overlap}
      $zcc "$GPT2_ONNX" $g --zero-stage 3 --world-size 4 --comm-dtype bf16 "$@" $o $r \
        -o "$mesh/plans/$n.zplan"
      $zcc "$GPT2_ONNX" $g --zero-stage 3 --world-size 4 --comm-dtype bf16 "$@" $o $r --emit=report \
        > "$mesh/plans/$n.report"
    done
  done
fi
# Llama-family shapes for bench/gpu-bench-llama.sh, from the graphs of
# torch_llama_baseline.py's exports (LLAMA_ONNX_DIR holds llama-SIZE.onnx: 1b, 8b-8l, and
# SIZE-bBATCHsSEQ for other batches and lengths, e.g. llama-1b-b1s8192.onnx; the graphs alone,
# as tools/onnx_graph_only.py writes them, will do): plans without weights, with the
# baseline's AdamW settings.
if [ -n "${LLAMA_ONNX_DIR:-}" ]; then
  for onnx in "$LLAMA_ONNX_DIR"/llama-*.onnx; do
    size=$(basename "$onnx" .onnx) size=${size#llama-} batch=4
    [[ $size =~ -b([0-9]+)s[0-9]+$ ]] && batch=${BASH_REMATCH[1]}
    l="--loss cross-entropy --frozen lifted_tensor|inv_freq --precision bf16 --target cuda"
    l="$l --weights external --micro-batch $batch --lr 1e-4 --weight-decay 0.01"
    TIMEFORMAT="zcc compile: %R s wall on $(nproc) cores"
    { time $zcc "$LLAMA_ONNX_DIR/llama-$size.onnx" $l -o "$out/plans/llama-$size-bf16.zplan"; } \
      2> "$out/plans/llama-$size.compile"
    $zcc "$LLAMA_ONNX_DIR/llama-$size.onnx" $l --emit=report > "$out/plans/llama-$size-bf16.report"
    # The same with torch.compile's default trade (the backward's cheap inputs recomputed),
    # timed beside the default plan.
    $zcc "$LLAMA_ONNX_DIR/llama-$size.onnx" $l --recompute selective \
      -o "$out/plans/llama-$size-bf16-selective.zplan"
    $zcc "$LLAMA_ONNX_DIR/llama-$size.onnx" $l --recompute selective --emit=report \
      > "$out/plans/llama-$size-bf16-selective.report"
  done
  cp bench/gpu-bench-llama.sh ../shared/bench/torch_llama_baseline.py "$out/"
fi
# Hugging Face families for bench/gpu-bench-hf.sh, from the graphs of torch_hf_baseline.py's
# exports (HF_ONNX_DIR holds SIZE.onnx, e.g. phi3-mini-8l.onnx, gemma-2b-8l.onnx; weights not
# needed): plans without weights, with the baseline's AdamW settings.
if [ -n "${HF_ONNX_DIR:-}" ]; then
  l="--loss cross-entropy --frozen lifted_tensor|inv_freq|embed_scale --precision bf16"
  l="$l --target cuda --weights external --micro-batch 4 --lr 1e-4 --weight-decay 0.01"
  for onnx in "$HF_ONNX_DIR"/*.onnx; do
    size=$(basename "$onnx" .onnx)
    TIMEFORMAT="zcc compile: %R s wall on $(nproc) cores"
    { time $zcc "$onnx" $l -o "$out/plans/hf-$size-bf16.zplan"; } 2> "$out/plans/hf-$size.compile"
    $zcc "$onnx" $l --emit=report > "$out/plans/hf-$size-bf16.report"
  done
  cp bench/gpu-bench-hf.sh bench/torch_hf_baseline.py "$out/"
fi
# Mixtures of experts for bench/gpu-bench-moe.sh, from the graphs of
# torch_moe_baseline.py's dense-dispatch exports (MOE_ONNX_DIR/moe-SIZE.onnx,
# weights not needed): the plans without weights, with the baseline's
# settings (routed dropless; small's exported dense dispatch beside it).
if [ -n "${MOE_ONNX_DIR:-}" ]; then
  TIMEFORMAT="zcc compile: %R s wall on $(nproc) cores"
  for f in "$MOE_ONNX_DIR"/moe-*.onnx; do
    size=$(basename "$f" .onnx); size=${size#moe-}
    mo="--loss cross-entropy --frozen lifted_tensor|inv_freq --precision bf16 --target cuda"
    mo="$mo --weights external --lr 1e-4 --weight-decay 0.01"
    [ "$size" = fine-dense ] || mo="$mo --aux-loss aux_loss=0.02"
    { time $zcc "$f" $mo -o "$out/plans/moe-$size-bf16.zplan"; } 2> "$out/plans/moe-$size.compile"
    $zcc "$f" $mo --emit=report > "$out/plans/moe-$size-bf16.report"
    if [ "$size" = small ]; then # the exported dense dispatch beside dropless
      $zcc "$f" $mo --moe-dispatch dense -o "$out/plans/moe-$size-bf16-dense.zplan"
      $zcc "$f" $mo --moe-dispatch dense --emit=report > "$out/plans/moe-$size-bf16-dense.report"
    fi
  done
  cp bench/gpu-bench-moe.sh bench/torch_moe_baseline.py tools/moe_dense.py "$out/"
fi
# A >= 1B model (GPT2_XL_ONNX, exported on the GPU machine by gpu-memory's
# first call): the same levers, and stage 2 offload with clipping (the
# gradient twin); MEMXL="a c" packs only some (the carry is 64 MiB).
if [ -n "${GPT2_XL_ONNX:-}" ]; then
  x="--loss cross-entropy --precision bf16 --target cuda --weights external --lr 1e-4"
  mem="$out-mem1.5b"; memdir "$mem"; dirs+=("$mem")
  memxl() {
    local name=$1; shift
    case " ${MEMXL:-a b c d e} " in *" ${name%%-*} "*) ;; *) return 0 ;; esac
    $zcc "$GPT2_XL_ONNX" $x "$@" -o "$mem/plans/memxl-$name.zplan" 2> "$mem/plans/memxl-$name.zcc"
    $zcc "$GPT2_XL_ONNX" $x "$@" --emit=report > "$mem/plans/memxl-$name.report" 2>/dev/null
  }
  memxl a-plain
  memxl b-recompute-layer --recompute layer
  memxl c-offload-optimizer-z2-clip --zero-stage 2 --offload-optimizer cpu --grad-clip 1.0
  memxl d-offload-optimizer --zero-stage 1 --offload-optimizer cpu
  memxl e-offload-optimizer-param --zero-stage 3 --offload-optimizer cpu --offload-param cpu
  # bench/gpu-bench-large.sh (issue 8's larger shape): ZeRO-3 over 2 in-process ranks, with
  # and without overlapped communication, and the plain plan's compile time.
  memxl f-z3-w2 --zero-stage 3 --world-size 2 --overlap-comm
  memxl g-z3-w2-no-overlap --zero-stage 3 --world-size 2
  case " ${MEMXL:-a b c d e} " in *" a "*)
    TIMEFORMAT="zcc compile: %R s wall on $(nproc) cores"
    { time $zcc "$GPT2_XL_ONNX" $x -o /dev/null; } 2> "$mem/plans/memxl-a-plain.compile" ;;
  esac
  cp bench/gpu-bench-large.sh bench/gpu-bench-multi.sh bench/torch_fsdp2_baseline.py "$mem/"
fi
# The fine-tuning round trip (tools/gpu-finetune.sh): the committed small
# export's plans, and with FINETUNE_ONNX (the graph tools/zcc-export wrote of
# the guide's Llama-3.2-1B shape, on the GPU machine) the guide's plan.
ftin=test/e2e/Inputs/finetune
mkdir -p "$out/data/finetune"
cp -r $ftin/hf $ftin/reference.json "$out/data/finetune/"
$zcc $ftin/export/model.onnx --micro-batch 2 --loss cross-entropy --zero-stage 3 --world-size 2 \
  --lr 1e-3 --weight-decay 0.01 --weights external -o "$out/plans/ft-tiny-z3.zplan"
$zcc $ftin/export/model.onnx --micro-batch 2 --loss cross-entropy --weights external \
  -o "$out/plans/ft-tiny.zplan"
cp tools/gpu-finetune.sh tools/finetune_reference.py tools/zcc-export tools/moe_dense.py \
  bench/torch_moe_baseline.py tools/export_reference_models.py ../shared/tools/make_references.py \
  test/e2e/Inputs/packed_tokens.py "$out/"
if [ -n "${FINETUNE_ONNX:-}" ]; then
  $zcc "$FINETUNE_ONNX" --loss cross-entropy --precision bf16 --target cuda --weights external \
    --micro-batch 4 --lr 2e-5 -o "$out/plans/finetune-1b.zplan"
fi
# The carried libraries as one xz archive (36 MB of OpenBLAS becomes ~6): a
# device call takes 64 MiB in all, the repository (~32 MiB) included. The
# scripts unpack it on first use (tools/gpu-libs.sh). One xz thread at -9: a
# 64 MiB dictionary sees across the files, where -T0 cuts the stream into
# blocks that do not (the three programs share their kernels' PTX, the plans
# their variants: 18.8 + 15.0 MB at -T0 -6, 7.1 + 7.7 at -T1 -9).
xz9() { xz -T1 -9; }
for d in "$out" "${dirs[@]}"; do
  tar cf - -C "$d" lib | xz9 > "$d/lib.tar.xz" && rm -r "$d/lib"
done
# zrun and the kernel benchmarks likewise.
tar cf - -C "$out" zrun zrt-attention-bench zrt-moe-bench | xz9 > "$out/bin.tar.xz"
rm "$out/zrun" "$out/zrt-attention-bench" "$out/zrt-moe-bench"
# The plans, kernel cases and data likewise (68 MB in all uncompressed: past the carry).
tar cf - -C "$out" plans kernels data | xz9 > "$out/pd.tar.xz"
rm -r "$out/plans" "$out/kernels" "$out/data"
du -sh "$out" "${dirs[@]}"
