#!/usr/bin/env bash
# The scaling model's table (zcc --emit=report --link, docs/zero.md): one plan per node count
# (W = nodes x GPUS_PER_NODE ranks, the same micro-batch per rank), its predicted step, exposed
# communication and efficiency against the compute-only step, as a Markdown table.
#
#   bench/scaling-table.sh MODEL.onnx "1 2 4 8" [zcc flags...]
#   env: ZCC (default build/tools/zcc/zcc), GPUS_PER_NODE (8), LINK (nvlink=370GB/s,ib=50GB/s,hop=5us),
#        FLOP_RATE (TFLOP/s, default 400), STAGES ("1 2 3")
set -euo pipefail
model=$1 nodes=$2; shift 2
zcc=${ZCC:-build/tools/zcc/zcc} g=${GPUS_PER_NODE:-8}
link=${LINK:-nvlink=370GB/s,ib=50GB/s,hop=5us} rate=${FLOP_RATE:-400}
echo "| stage | nodes | W | compute | communication | exposed | step | efficiency |"
echo "|---|---|---|---|---|---|---|---|"
for stage in ${STAGES:-1 2 3}; do
  for n in $nodes; do
    w=$((n * g))
    line=$("$zcc" "$model" "$@" --zero-stage "$stage" --world-size "$w" --emit=report \
      --link "$link" --gpus-per-node "$g" --flop-rate "$rate" 2>/dev/null | grep 'scaling model')
    # "scaling model   step X ms = compute C ms + exposed communication E ms (of T ms): P% of ..."
    read -r step compute exposed total pct < <(echo "$line" |
      sed -E 's/.*step +([0-9.]+) ms = compute ([0-9.]+) ms \+ exposed communication ([0-9.]+) ms \(of ([0-9.]+) ms\): ([0-9.]+)%.*/\1 \2 \3 \4 \5/')
    echo "| $stage | $n | $w | $compute ms | $total ms | $exposed ms | $step ms | $pct% |"
  done
done
