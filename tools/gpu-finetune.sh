#!/usr/bin/env bash
# The fine-tuning round trip (issue 19, docs/finetune.md) on the GPU machine,
# which has PyTorch and transformers. Run from a directory packed by
# FINETUNE_ONNX=... tools/gpu-pack.sh.
#  1. The committed small export (test/e2e/Inputs/finetune): zrun trains it
#     from its save_pretrained folder at ZeRO-3 over 2 in-process ranks (the
#     CPU backend: one GPU cannot hold two NCCL ranks) on the packed stream,
#     against the PyTorch trajectory; zrun export --hf; transformers'
#     from_pretrained of that folder gives the logits zrun's eval of the
#     checkpoint gives.
#  2. The guide's run: the Llama-3.2-1B shape saved with save_pretrained (random
#     init, seed 0: no network here), fine-tuned on the GPU from that folder
#     with the plan FINETUNE_ONNX compiled to (bf16), documents and prompts
#     masked, evaluated every 10 steps; exported with --hf --dtype bf16 and
#     reloaded by from_pretrained. Each command is printed before its output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu-libs.sh"
export NCCL_NVLS_ENABLE=0 PYTHONWARNINGS=ignore
out=${OUT:-/tmp/gpu-finetune}
work=/tmp/gpu-finetune-work
rm -rf "$work" && mkdir -p "$out" "$work"
zrun=$here/zrun
show() { echo "\$ $*"; "$@"; }
ft=$here/data/finetune

echo "== 1. the round trip on the committed small export"
python3 "$here/packed_tokens.py" write "$work/ft"
"$zrun" train "$here/plans/ft-tiny-z3.zplan" --backend cpu --weights "$ft/hf" --tokens "$work/ft.bin" \
  --eos 2 --prompt-mask "$work/ft.prompt.bin" --steps 20 --metrics "$out/ft-tiny.jsonl" \
  --checkpoint-dir "$work/ck" 2>&1 | tail -2
python3 "$here/check_trajectory.py" "$out/ft-tiny.jsonl" "$ft/reference.json" finetune-llama \
  zero3-2ranks --loss-rtol 1e-4 --grad-norm-rtol 1e-4
"$zrun" export "$work/ck" --hf "$work/ft-out"
"$zrun" export "$work/ck" --safetensors "$work/trained.safetensors" > /dev/null
python3 "$here/packed_tokens.py" expect "$work/ft" 32 0 2 "$work/b0" --eos 2
"$zrun" eval "$here/plans/ft-tiny.zplan" --backend cpu --weights "$work/trained.safetensors" \
  --data input_ids="$work/b0.input_ids.npy" --data labels="$work/b0.labels.npy" \
  --output logits="$work/logits.npy" 2>/dev/null
python3 "$here/finetune_reference.py" reload "$work/ft-out" "$work/logits.npy" "$work/ft" 2>&1 |
  grep -v "Loading weights"

echo "== 2. the guide: the Llama-3.2-1B shape"
cd "$work"
python3 "$here/finetune_reference.py" save-large "$work" 1024 2>&1 | grep -v "Writing\|Loading"
show ls Llama-3.2-1B-shape
python3 "$here/packed_tokens.py" write train --vocab 128256 --tokens 200000 --eos 128001 --token-bytes 4
python3 "$here/packed_tokens.py" write val --vocab 128256 --tokens 20000 --eos 128001 --token-bytes 4 --seed 1
cp "$here/plans/finetune-1b.zplan" llama-ft.zplan
show "$zrun" train llama-ft.zplan --weights Llama-3.2-1B-shape --tokens train.bin --token-bytes 4 \
  --eos 128001 --prompt-mask train.prompt.bin --eval-data val.bin --eval-every 10 --eval-batches 4 \
  --steps 30 --checkpoint-dir ck --metrics "$out/ft-1b.jsonl" 2>&1 | grep -v "^step [0-9]/\|^step 1[1-9]/\|^step 2[1-9]/"
show "$zrun" export ck --hf Llama-3.2-1B-shape-ft --dtype bf16
show ls -l Llama-3.2-1B-shape-ft
show "$zrun" eval llama-ft.zplan --weights Llama-3.2-1B-shape-ft --tokens val.bin --token-bytes 4 \
  --eos 128001 --batches 4 2>&1 | grep -v "cuda:"
cat > reload.py <<'PY'
import sys, numpy as np, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
from packed_tokens import pack
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained("Llama-3.2-1B-shape-ft").cuda().eval()
print(type(m).__name__, m.dtype, sum(p.numel() for p in m.parameters()), "parameters")
t = np.fromfile("val.bin", np.uint32)
losses = []
for b in range(4):
    x, y = pack(t, None, 1024, 4 * b, 4, 128001)
    with torch.no_grad():
        logits = m(input_ids=torch.from_numpy(x).cuda()).logits.float()
    losses.append(F.cross_entropy(logits.flatten(0, 1), torch.from_numpy(y).cuda().flatten(),
                                  ignore_index=-100).item())
print("eval loss of the reloaded model on val.bin (4 batches): %.6f" % (sum(losses) / 4))
PY
show python3 reload.py "$here" 2>&1 | grep -v "Loading weights"
