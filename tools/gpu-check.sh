#!/usr/bin/env bash
# The GPU suite, in one go on the GPU machine (from a directory packed by
# tools/gpu-pack.sh): fp32 trajectories of mlp, gpt2-tiny and the Llama
# export within 5e-4 of PyTorch at every step; bf16 and fp16 (loss scaling)
# within 2e-2 and decreasing; ZeRO stages 0-3 with 2 and 4 in-process ranks
# on one GPU within 5e-4; NCCL, one process per GPU (W = the GPUs there). Prints one line per case and 'gpu-check: N of N passed'.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
zrun="$here/zrun"
D="$here/data"
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
ldd "$zrun" | grep -E 'not found|cublas|protobuf|openblas' || true
pass=0 total=0
check() { # name plan data-flags model trajectory references tolerance extra...
  local name=$1 plan=$2 data=$3 model=$4 traj=$5 refs=$6 tol=$7
  shift 7
  total=$((total + 1))
  if "$zrun" train "$here/plans/$plan" --backend cuda --steps 20 $data --metrics "$out/$name.jsonl" \
      "$@" >"$out/$name.log" 2>&1 &&
     python3 "$here/check_trajectory.py" "$out/$name.jsonl" "$refs" "$model" "$traj" \
       --loss-rtol "$tol" $( [ "$tol" = 2e-2 ] && echo "--grad-norm-rtol 1 --decreasing" ) >"$out/$name.check" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name: $(head -1 "$out/$name.check") | $(grep -h 'zrun: cuda' "$out/$name.log")"
  else
    echo "FAIL $name:"; tail -5 "$out/$name.log" "$out/$name.check" 2>/dev/null
  fi
}
mlp="--data x=$D/mlp.x.npy --data labels=$D/mlp.labels.npy"
gpt2="--data input_ids=$D/gpt2-tiny.input_ids.npy --data labels=$D/gpt2-tiny.labels.npy"
llama="--data input_ids=$D/llama-tiny.input_ids.npy --data labels=$D/llama-tiny.labels.npy"
sched="--lr-schedule warmup-cosine --warmup-steps 5"
check mlp mlp.zplan "$mlp" mlp plain "$D/references.json" 5e-4
check gpt2 gpt2.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
check llama llama.zplan "$llama" llama-tiny plain "$D/llama-references.json" 5e-4
check gpt2-bf16 gpt2-bf16.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
check llama-bf16 llama-bf16.zplan "$llama" llama-tiny plain "$D/llama-references.json" 2e-2
# fp16 with DeepSpeed's dynamic loss scaling (2^16 to start).
check gpt2-fp16 gpt2-fp16.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
check llama-fp16 llama-fp16.zplan "$llama" llama-tiny plain "$D/llama-references.json" 2e-2
for st in 0 1 2 3; do
  for w in 2 4; do
    check gpt2-z$st-w$w gpt2-z$st-w$w.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
  done
done
# Qwen2, Gemma, ViT, T5, Mixtral (issue 21) and Qwen2-MoE (issue 52; both mixtures
# of experts routed dropless: moe_route and the grouped GEMMs): fp32 within 5e-4 of
# PyTorch, bf16 within 2e-2, ZeRO-3 over 2 ranks (MoE: each rank its own aux loss).
for name in qwen2-tiny gemma-tiny vit-tiny t5-tiny mixtral-tiny qwen-moe-tiny; do
  flags=""
  for f in "$D/$name".*.npy; do
    n=${f#"$D/$name."}; flags="$flags --data ${n%.npy}=$f"
  done
  w2=plain; case $name in mixtral-tiny|qwen-moe-tiny) w2=plain-w2;; esac
  check $name $name-fp32.zplan "$flags" $name plain "$D/llama-references.json" 5e-4
  check $name-bf16 $name-bf16.zplan "$flags" $name plain "$D/llama-references.json" 2e-2
  check $name-z3-w2 $name-z3-w2.zplan "$flags" $name $w2 "$D/llama-references.json" 5e-4
  if [ -f "$here/plans/$name-z3-w2-ep.zplan" ]; then # expert parallelism (--moe-ep-size 2)
    check $name-z3-w2-ep $name-z3-w2-ep.zplan "$flags" $name $w2 "$D/llama-references.json" 5e-4
    check $name-z2-w2-ep-bf16 $name-z2-w2-ep-bf16.zplan "$flags" $name $w2 "$D/llama-references.json" 2e-2
  fi
done
# Recompute and offload: PyTorch's trajectory, and bit for bit the plain plan's.
same() { # name plain-name
  total=$((total + 1))
  if python3 "$here/same_losses.py" "$out/$1.jsonl" "$out/$2.jsonl" > "$out/$1.same" 2>&1; then
    pass=$((pass + 1)); echo "ok   $1 = $2: $(cat "$out/$1.same")"
  else
    echo "FAIL $1 = $2: $(cat "$out/$1.same")"
  fi
}
# Deterministic kernels (no float atomics): the same plan twice, the same bits.
check gpt2-again gpt2.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-again gpt2
check gpt2-layer gpt2-layer.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-layer gpt2
check gpt2-selective gpt2-selective.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-selective gpt2
check gpt2-z1-w2-offload gpt2-z1-w2-offload.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z1-w2-offload gpt2-z1-w2
check gpt2-z2-w2-offload gpt2-z2-w2-offload.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z2-w2-offload gpt2-z2-w2
check gpt2-z3-w2-offload-param gpt2-z3-w2-offload-param.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z3-w2-offload-param gpt2-z3-w2
# NVMe offload: the moments in swap files on the local disk, chunked and
# pipelined; bit for bit the plain plans'.
mkdir -p /tmp/zcc-nvme
check gpt2-z2-w2-nvme gpt2-z2-w2-nvme.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z2-w2-nvme gpt2-z2-w2
check gpt2-z3-w2-nvme gpt2-z3-w2-nvme.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z3-w2-nvme gpt2-z3-w2
check gpt2-z3-w2-nvme-param gpt2-z3-w2-nvme-param.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
same gpt2-z3-w2-nvme-param gpt2-z3-w2
# zrun --offload-chunk: the host optimizer in chunks of 4096 elements, each
# overlapping the copies of the next; the same bits as whole kernels.
check gpt2-z1-w2-offload-chunked gpt2-z1-w2-offload.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched --offload-chunk 4096
same gpt2-z1-w2-offload-chunked gpt2-z1-w2
# zrun --cuda-graphs: the programs captured and replayed as CUDA graphs.
check gpt2-graphs gpt2.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched --cuda-graphs
same gpt2-graphs gpt2
# 16-bit communication (--comm-dtype bf16): within 2e-2 of PyTorch's float32
# trajectory; the device collectives' bf16 sums against the CPU group's
# (agree(), below).
check gpt2-z2-w2-bf16comm gpt2-z2-w2-bf16comm.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
check gpt2-z3-w2-bf16comm-bf16 gpt2-z3-w2-bf16comm-bf16.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
# A device mesh on one GPU (4 in-process ranks as 2 groups of 2; the groups'
# device collectives): MiCS and hpZ within 5e-4 of PyTorch, and within 1e-5
# of the CPU backend (agree(), below).
check gpt2-z3-w4-mics gpt2-z3-w4-mics.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
check gpt2-z2-w4-mics gpt2-z2-w4-mics.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
check gpt2-z3-w4-hpz gpt2-z3-w4-hpz.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
# qwZ (int8 gathers, quantize/dequantize kernels): within 2e-2 of PyTorch.
check gpt2-z3-w4-qwz gpt2-z3-w4-qwz.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
# qgZ (int8 all-to-alls in the group and across, dequantize-and-sum kernels).
check gpt2-z3-w4-qgz gpt2-z3-w4-qgz.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
# The padded vocabulary (zero-pad-gemms, --target cuda): the loss and its
# gradient read and write the padded logits in place; the CUDA backend within
# a tolerance of the CPU backend running the same plan.
agree() { # name plan rtol [data-prefix [zrun data flags]]
  total=$((total + 1))
  local lm="${5:-"--data input_ids=$D/${4:-lm}.ids.npy --data labels=$D/${4:-lm}.labels.npy --steps 8"}"
  if "$zrun" train "$here/plans/$2" --backend cuda $lm --metrics "$out/$1.cuda.jsonl" >"$out/$1.log" 2>&1 &&
     "$zrun" train "$here/plans/$2" --backend cpu $lm --metrics "$out/$1.cpu.jsonl" >>"$out/$1.log" 2>&1 &&
     python3 "$here/same_losses.py" --rtol "$3" "$out/$1.cuda.jsonl" "$out/$1.cpu.jsonl" >"$out/$1.same" 2>&1; then
    pass=$((pass + 1)); echo "ok   $1 (cuda vs cpu): $(cat "$out/$1.same")"
  else
    echo "FAIL $1:"; tail -3 "$out/$1.log" "$out/$1.same" 2>/dev/null
  fi
}
agree lm-padded lm-padded.zplan 1e-5
agree gpt2-z2-w2-bf16comm gpt2-z2-w2-bf16comm.zplan 1e-3 gpt2 "$gpt2 --steps 8"
agree gpt2-z3-w4-mics gpt2-z3-w4-mics.zplan 1e-5 gpt2 "$gpt2 --steps 8"
agree gpt2-z3-w4-hpz gpt2-z3-w4-hpz.zplan 1e-5 gpt2 "$gpt2 --steps 8"
agree gpt2-z3-w4-qwz gpt2-z3-w4-qwz.zplan 1e-4 gpt2 "$gpt2 --steps 8"
agree gpt2-z3-w4-qgz gpt2-z3-w4-qgz.zplan 1e-4 gpt2 "$gpt2 --steps 8"
agree lm-padded-bf16 lm-padded-bf16.zplan 1e-2
# Convolutions through cuDNN and BatchNorm's training (issue 53): a small CNN
# (test/e2e/Inputs/batchnorm_model.py), fp32 and bf16, and SyncBatchNorm over 2
# in-process ranks at ZeRO-3.
bn="--data x=$D/bn.x.npy --data labels=$D/bn.labels.npy --steps 8"
agree bn-conv bn-conv.zplan 1e-4 bn "$bn"
agree bn-conv-bf16 bn-conv-bf16.zplan 2e-2 bn "$bn"
agree bn-sync-w2 bn-sync-w2.zplan 1e-4 bn "$bn"
# Mixtures of experts routed dropless: the CUDA route and grouped GEMMs against the CPU's.
for name in mixtral-tiny qwen-moe-tiny; do
  moe="--data input_ids=$D/$name.input_ids.npy --data labels=$D/$name.labels.npy --steps 8"
  agree $name-fp32 $name-fp32.zplan 1e-5 - "$moe"
  agree $name-bf16 $name-bf16.zplan 1e-2 - "$moe"
done
# Dropout: the CUDA kernel draws the CPU's masks (another mask moves these
# losses by about 1e-1: dropout.test's other seed).
dropout_data="--data x=$D/dropout.x.npy --data labels=$D/dropout.labels.npy --steps 20"
agree dropout dropout.zplan 1e-5 - "$dropout_data"
agree dropout-bf16 dropout-bf16.zplan 1e-2 - "$dropout_data"
# ... and the same bits: weights that are the sum of 8 steps' masked samples
# (test/e2e/Inputs/dropout_bits.py), from the CUDA and the CPU backend, byte for byte.
total=$((total + 1))
for be in cuda cpu; do
  rm -rf "$out/dropout-bits-$be"
  "$zrun" train "$here/plans/dropout-bits.zplan" --backend $be --data x=$D/dropout-bits.x.npy \
    --steps 8 --checkpoint-dir "$out/dropout-bits-$be" --save-every 8 --sync-save \
    >"$out/dropout-bits-$be.log" 2>&1 &&
    "$zrun" export "$out/dropout-bits-$be" --safetensors "$out/dropout-bits-$be.safetensors" \
      >>"$out/dropout-bits-$be.log" 2>&1
done
if cmp "$out/dropout-bits-cuda.safetensors" "$out/dropout-bits-cpu.safetensors" >/dev/null 2>&1; then
  pass=$((pass + 1)); echo "ok   dropout masks: the CUDA and CPU backends' weights are byte-identical"
else
  echo "FAIL dropout masks differ:"; tail -3 "$out"/dropout-bits-*.log
fi
# Fused attention (zero.attention): the CUDA kernels against the CPU
# reference on the same plan (both head dimensions share the data file's
# token ids; d16 fp32 runs the per-row kernels, 16-bit the tensor cores).
# Widths past 64 (issue 48: 96 grouped, 256 on one k/v head, 72 padded to the 80-wide kernels)
# read their weights from data/attn-dD.onnx.
for d in 16 64 64-separate 64-gqa 96-gqa 256-mqa 72-gqa; do
  lm="--data input_ids=$D/attn.ids.npy --data labels=$D/attn.labels.npy --steps 8"
  [ -f "$D/attn-d$d.onnx" ] && lm="$lm --weights $D/attn-d$d.onnx"
  agree attn-d$d-fp32 attn-d$d-fp32.zplan 1e-5 attn "$lm"
  agree attn-d$d-bf16 attn-d$d-bf16.zplan 1e-2 attn "$lm"
  agree attn-d$d-fp16 attn-d$d-fp16.zplan 1e-2 attn "$lm"
done
# layer_norm / rms_norm and their gradients on wide rows (16-byte vectors).
for c in 768-layer 1600-layer 2048-rms; do
  agree norm-$c-fp32 norm-$c-fp32.zplan 1e-5 norm-${c%%-*}
  agree norm-$c-bf16 norm-$c-bf16.zplan 1e-2 norm-${c%%-*}
done
check gpt2-fused gpt2-fused.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched
check gpt2-fused-bf16 gpt2-fused-bf16.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 2e-2 $sched
# Llama: RoPE'd q/k and repeated k/v heads reach the fused op transposed back.
check llama-fused llama-fused.zplan "$llama" llama-tiny plain "$D/llama-references.json" 5e-4
check llama-fused-bf16 llama-fused-bf16.zplan "$llama" llama-tiny plain "$D/llama-references.json" 2e-2
# Head widths 96 (Phi-3's fused qkv) and 256 on one k/v head (Gemma): the wgmma kernels' 96
# (64 + 32 columns) and 256 (dk/dv in column halves) widths, fp32 on the per-row kernels.
# Gemma 2: soft-capped scores (tanh recovered from P in the backward) and a sliding window.
for m in phi3:phi3-tiny gemma-d256:gemma-d256-tiny gemma2:gemma2-tiny; do
  data="--data input_ids=$D/${m#*:}.input_ids.npy --data labels=$D/${m#*:}.labels.npy"
  w="--weights $here/../../examples/models/${m#*:}.onnx" # the repository travels beside the carry
  check ${m%%:*}-fp32 ${m%%:*}-fp32.zplan "$data" ${m#*:} plain "$D/llama-references.json" 5e-4 $w
  check ${m%%:*}-bf16 ${m%%:*}-bf16.zplan "$data" ${m#*:} plain "$D/llama-references.json" 2e-2 $w
done
# Packed documents (zcc --per-document): attention inside each document (the kernels' document
# tiles), positions restarting, against PyTorch running each document on its own.
for m in llama gpt2; do
  data="--tokens $D/$m-tiny-packed.tokens.bin --eos 2"
  check $m-packed-fp32 $m-packed-fp32.zplan "$data" $m-tiny-packed plain "$D/llama-references.json" 5e-4
  check $m-packed-bf16 $m-packed-bf16.zplan "$data" $m-tiny-packed plain "$D/llama-references.json" 2e-2
done
# The same plans' generated kernels (zero-fuse-elementwise: rotary
# embeddings, SwiGLU, gradient adds; PTX loaded through the driver API)
# against the CPU running the same plan.
agree llama-fused llama-fused.zplan 1e-5 llama
agree llama-fused-bf16 llama-fused-bf16.zplan 1e-2 llama
# zcc --optimizer-in-backward (the default above): each parameter's AdamW on
# a second stream beside the backward. The plan with the update after the
# backward trains the same parameters, so the same losses, bit for bit.
check llama-fused-after llama-fused-after.zplan "$llama" llama-tiny plain "$D/llama-references.json" 5e-4
same llama-fused-after llama-fused
check llama-fused-bf16-after llama-fused-bf16-after.zplan "$llama" llama-tiny plain "$D/llama-references.json" 2e-2
same llama-fused-bf16-after llama-fused-bf16
# GPT-2's --target cuda plan: cuBLASLt's GELU_AUX_BIAS / DGELU / BGRADA
# epilogues, the grouped casts and flash attention against the CPU running
# the unfused computations of the same plan.
agree gpt2-fused-bf16 gpt2-fused-bf16.zplan 1e-2 gpt2
# NCCL, one process per GPU, where the machine has several.
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
if [ "$gpus" -ge 2 ]; then
  for st in 0 1 2 3; do
    check gpt2-nccl-z$st-w2 gpt2-z$st-w2.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 \
      $sched --nproc-per-node 2 --master-port $((29600 + st))
  done
  # The multi-node path on one machine: the --hostfile --dry-run commands of
  # two one-GPU "nodes", run here instead of over ssh.
  total=$((total + 1))
  printf 'node-a slots=2\nnode-b slots=2\n' > "$out/hosts"
  "$zrun" train "$here/plans/gpt2-z3-w2.zplan" --backend cuda --steps 20 $gpt2 $sched \
    --metrics "$out/multinode.jsonl" --hostfile "$out/hosts" --include 'node-a:0@node-b:1' \
    --master-port 29650 --dry-run | sed -e 's/^ssh -- [^ ]* //' -e 's/MASTER_ADDR=node-a/MASTER_ADDR=127.0.0.1/' \
    > "$out/multinode.cmds"
  cat "$out/multinode.cmds" | cut -c1-160
  k=0
  while read -r c; do k=$((k + 1)); eval "bash -c $c" >"$out/multinode-$k.log" 2>&1 & done < "$out/multinode.cmds"
  wait
  if python3 "$here/check_trajectory.py" "$out/multinode.jsonl" "$D/references.json" gpt2-tiny sched \
      --loss-rtol 5e-4 > "$out/multinode.check" 2>&1; then
    pass=$((pass + 1)); echo "ok   multinode (2 nodes x 1 GPU, hostfile): $(head -1 "$out/multinode.check")"
  else
    echo "FAIL multinode:"; tail -3 "$out"/multinode-*.log "$out/multinode.check"
  fi
else
  # One GPU: the launcher, the rendezvous and an NCCL communicator of one rank.
  check gpt2-nccl-w1 gpt2.zplan "$gpt2" gpt2-tiny sched "$D/references.json" 5e-4 $sched \
    --nproc-per-node 1 --master-port 29600
fi
# zrun comm-bench: NCCL's all-reduce, all-gather and reduce-scatter through
# zrun's communicator, a process per GPU here, each result checked.
total=$((total + 1))
ranks=$((gpus > 0 ? gpus : 1))
if "$zrun" comm-bench --nproc-per-node "$ranks" --master-port 29660 --sizes 1M,64M --iters 5 \
     >"$out/comm-bench.log" 2>&1 && [ "$(grep -c ' ok$' "$out/comm-bench.log")" = 6 ]; then
  pass=$((pass + 1))
  echo "ok   comm-bench ($ranks GPUs): $(grep '^all_reduce' "$out/comm-bench.log" | tail -1)"
else
  echo "FAIL comm-bench:"; tail -5 "$out/comm-bench.log"
fi
# zrun --trace on the GPU (events on the compute, communication and copy
# streams): ZeRO-3 over 2 in-process ranks; every instruction on its track
# once a step, the compute track's time per kind equal to --profile's.
total=$((total + 1))
if "$zrun" train "$here/plans/gpt2-z3-w2.zplan" --backend cuda --steps 4 $gpt2 --profile \
     --trace "$out/trace.json" --trace-steps 1:4 >"$out/trace.log" 2>&1 &&
   python3 "$here/check_trace.py" "$out/trace.json" --schema "$here/trace-event.schema.json" \
     --profile "$out/trace.log" --ranks 2 --steps 1:4 >"$out/trace.check" 2>&1; then
  pass=$((pass + 1)); echo "ok   trace: $(cat "$out/trace.check")"
else
  echo "FAIL trace:"; tail -3 "$out/trace.log" "$out/trace.check"
fi
# The mixture of experts' kernels (moe_route, the grouped GEMMs: SIMT in float32, wgmma
# in bf16) against the CPU's at uneven, empty and one-row experts, bit for bit again;
# the timings go to docs/benchmarks.md.
total=$((total + 1))
if "$here/zrt-moe-bench" --reps 10 >"$out/moe-bench.log" 2>&1; then
  pass=$((pass + 1))
  echo "ok   moe-bench: $(grep -c '^ok' "$out/moe-bench.log") CPU checks"
else
  echo "FAIL moe-bench:"; grep -E 'FAIL|bench:' "$out/moe-bench.log" | tail -5
fi
grep -v '^ok' "$out/moe-bench.log"
# The attention kernels at model shapes: every tiling against the CPU
# reference (causal and random masks, grouped k/v heads, D = 64 and 128) and
# against each other bit for bit; the timings go to docs/benchmarks.md.
total=$((total + 1))
if "$here/zrt-attention-bench" --reps 10 >"$out/attention-bench.log" 2>&1; then
  pass=$((pass + 1))
  echo "ok   attention-bench: $(grep -c 'vs CPU ok' "$out/attention-bench.log") CPU checks"
else
  echo "FAIL attention-bench:"; grep -E 'FAILED|DIFFER|bench:' "$out/attention-bench.log" | tail -5
fi
grep -v '^check' "$out/attention-bench.log"
# Every kernel case against the CPU's output.
total=$((total + 1))
if python3 "$here/kernel_parity.py" "$zrun" "$here/kernels" >"$out/kernels.log" 2>&1; then
  pass=$((pass + 1))
fi
cat "$out/kernels.log"
echo "gpu-check: $pass of $total passed"
[ "$pass" = "$total" ]
