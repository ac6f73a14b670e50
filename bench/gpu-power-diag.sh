#!/usr/bin/env bash
# Issue 18 diagnosis: the 8B layer shape's step times over 20 steps, zcc
# before and after torch.compile, with the GPU's clocks, power and
# temperature sampled every 200 ms (docs/benchmarks.md, "under the power cap").
#   bash bench/gpu-power-diag.sh PACKDIR   (PACKDIR: tools/gpu-pack.sh with LLAMA_ONNX_DIR)
set -uo pipefail
here=$(cd "$1" && pwd); shift
cd "$here" && tar xJf pack.tar.xz && cd - > /dev/null
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
O=$OUT/diag; W=/tmp/diag-w; mkdir -p $O $W
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $O/smi.csv 2>&1 &
smi=$!
mark() { echo "$(date +%s.%N) $*" >> $O/marks.txt; echo "=== $* $(date +%T)"; }
D=$(dirname "$0")/torch_llama_steps.py; [ -f "$D" ] || D=.carry/diag_llama_steps.py
mark export
python3 $D --size 8b-8l --batch 4 --seq 1024 --modes "" --export $W/l.onnx --tokens $W/t.bin 2>&1 | grep -v Warning | tail -2
zrun() { "$here/zrun" train "$here/plans/llama-8b-8l-bf16.zplan" --backend cuda --weights $W/l.onnx --tokens $W/t.bin --token-bytes 4 "$@"; }
summ() { python3 -c "
import json,sys,statistics
s=[json.loads(l)['step_ms'] for l in open('$1') if l.strip()]
t=s[3:]
print('$1'.split('/')[-1], 'n', len(t), 'mean %.2f median %.2f min %.2f max %.2f' % (sum(t)/len(t), statistics.median(t), min(t), max(t)))
print(' steps', [round(x,1) for x in s])"; }
mark zcc-first
zrun --steps 23 --metrics $O/zcc-first.jsonl > $O/zcc-first.log 2>&1; summ $O/zcc-first.jsonl
mark torch-compile
python3 $D --size 8b-8l --batch 4 --seq 1024 --steps 20 --warmup 3 --modes compile 2>&1 | grep -v Warning > $O/torch.txt
grep -E "^compile" $O/torch.txt | cut -c1-400
mark zcc-after
zrun --steps 23 --metrics $O/zcc-after.jsonl > $O/zcc-after.log 2>&1; summ $O/zcc-after.jsonl
mark sleep30
sleep 30
mark zcc-rested
zrun --steps 23 --metrics $O/zcc-rested.jsonl > $O/zcc-rested.log 2>&1; summ $O/zcc-rested.jsonl
mark profile
zrun --steps 3 --profile > $O/profile.txt 2>&1
head -60 $O/profile.txt | cut -c1-170
mark done
kill $smi
python3 - $O <<'PY'
import sys, datetime
O = sys.argv[1]
marks = [l.split(None, 1) for l in open(O + '/marks.txt')]
marks = [(float(t), n.strip()) for t, n in marks]
rows = []
for l in open(O + '/smi.csv'):
    p = [x.strip() for x in l.split(',')]
    try:
        ts = datetime.datetime.strptime(p[0], '%Y/%m/%d %H:%M:%S.%f').timestamp()
        rows.append((ts, float(p[1].split()[0]), float(p[3].split()[0]), float(p[4]), p[5]))
    except Exception:
        pass
for (t0, n), (t1, _) in zip(marks, marks[1:]):
    r = [x for x in rows if t0 <= x[0] < t1 and x[2] > 200]  # under load
    if r:
        print('%-14s busy samples %3d  sm MHz min %4d med %4d  power max %4.0f W  temp max %2.0f C  reasons %s' % (
            n, len(r), min(x[1] for x in r), sorted(x[1] for x in r)[len(r)//2], max(x[2] for x in r),
            max(x[3] for x in r), sorted(set(x[4] for x in r))))
PY
