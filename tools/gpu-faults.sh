#!/usr/bin/env bash
# Failure handling of multi-process runs on a machine with 2+ GPUs (from a
# directory packed by tools/gpu-pack.sh): every case must end every rank in
# bounded time with a message naming the rank and the operation.
#   1. A rank is killed (SIGKILL) mid-training under --nproc-per-node: the
#      launcher stops the other rank and names the dead one.
#   2. The launcher itself is killed: its ranks die with it (no orphans).
#   3. Two bare ranks (torchrun environment), rank 1 killed: rank 0's NCCL
#      watchdog aborts within --comm-timeout and the process ends.
#   4. A rendezvous that never completes (rank 1 never starts).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0
zrun="$here/zrun"
plan="$here/plans/gpt2-z3-w2.zplan"
D="--data input_ids=$here/data/gpt2-tiny.input_ids.npy --data labels=$here/data/gpt2-tiny.labels.npy"
run="train $plan --backend cuda --steps 1000000 $D"
ms() { date +%s%3N; }
pass=0

echo "== 1. rank 1 killed under the launcher"
$zrun $run --nproc-per-node 2 --master-port 29710 >/tmp/f1.log 2>&1 &
launcher=$!
sleep 10
rank1=$(pgrep -f "zrun $run" -P $launcher | sed -n 2p)
kill -9 "$rank1"; t0=$(ms)
wait $launcher; rc=$?; t1=$(ms)
grep -h "zrun: rank\|error" /tmp/f1.log | tail -2
echo "launcher rc=$rc, $((t1 - t0)) ms after the kill"
[ $rc -ne 0 ] && [ $((t1 - t0)) -lt 30000 ] && grep -q "rank 1 was killed by signal 9" /tmp/f1.log && pass=$((pass + 1))

echo "== 2. the launcher killed"
$zrun $run --nproc-per-node 2 --master-port 29711 >/tmp/f2.log 2>&1 &
launcher=$!
sleep 10
kill -9 $launcher; sleep 3
left=$(pgrep -f "zrun $run" | wc -l)
echo "ranks left running 3 s after: $left"
[ "$left" = 0 ] && pass=$((pass + 1))
pkill -9 -f "zrun $run" || true

echo "== 3. bare ranks, rank 1 killed, --comm-timeout 5"
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_PORT=29712 $zrun $run --comm-timeout 5 >/tmp/f3.log 2>&1 &
r0=$!
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_PORT=29712 $zrun $run --comm-timeout 5 >/dev/null 2>&1 &
r1=$!
sleep 10
kill -9 $r1; t0=$(ms)
wait $r0; rc=$?; t1=$(ms)
grep -h "error" /tmp/f3.log | head -2
echo "rank 0 rc=$rc, $((t1 - t0)) ms after the kill"
[ $rc -ne 0 ] && [ $((t1 - t0)) -lt 30000 ] && grep -q "did not complete within 5 s" /tmp/f3.log && pass=$((pass + 1))

echo "== 4. a rendezvous that never completes"
t0=$(ms)
RANK=0 WORLD_SIZE=2 MASTER_PORT=29713 $zrun $run --comm-timeout 3 >/tmp/f4.log 2>&1; rc=$?; t1=$(ms)
tail -1 /tmp/f4.log
echo "rc=$rc after $((t1 - t0)) ms"
[ $rc -ne 0 ] && grep -q "never connected" /tmp/f4.log && pass=$((pass + 1))
echo "gpu-faults: $pass of 4 passed"
[ $pass = 4 ]
