"""PyTorch FSDP2 baseline for GPT-2 training across the GPUs of one node.

The multi-GPU side of issue 8's larger shape: the model of
../shared/bench/torch_gpt2_baseline.py (HF GPT-2, random init, seed 0), each
block and the root wrapped with torch.distributed.fsdp.fully_shard (FSDP2:
parameters, gradients and optimizer state sharded, as ZeRO-3), bf16 compute
with float32 gradient reduction, fused AdamW; random tokens. Prints per-rank
peak memory and global tokens/s and MFU (6N + 12LHT, as the single-GPU script).

usage: torchrun --nproc-per-node 2 torch_fsdp2_baseline.py [--layers 48 --hidden 1600
        --heads 25 --batch 4 --seq 1024 --steps 5 --warmup 2]
(--batch is per rank, as DeepSpeed's train_micro_batch_size_per_gpu.)
"""
import argparse, json, os, time
import torch, torch.nn.functional as F, torch.distributed as dist
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=48); p.add_argument("--hidden", type=int, default=1600)
p.add_argument("--heads", type=int, default=25); p.add_argument("--vocab", type=int, default=50257)
p.add_argument("--seq", type=int, default=1024); p.add_argument("--batch", type=int, default=4)
p.add_argument("--steps", type=int, default=5); p.add_argument("--warmup", type=int, default=2)
p.add_argument("--peak-tflops", type=float, default=989.0)
a = p.parse_args()

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
torch.manual_seed(0)
c = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, vocab_size=a.vocab, n_positions=a.seq,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
c._attn_implementation = "sdpa"
m = GPT2LMHeadModel(c).cuda()
n = sum(p.numel() for p in m.parameters())
fpt = 6 * (n - m.transformer.wpe.weight.numel()) + 12 * a.layers * a.hidden * a.seq
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in m.transformer.h:
    fully_shard(block, mp_policy=mp)
fully_shard(m, mp_policy=mp)
torch.cuda.empty_cache()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(rank)
x = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g)
y = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g)

def step():
    logits = m(input_ids=x, use_cache=False).logits
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return loss

t0 = time.time()
for _ in range(a.warmup): step()
torch.cuda.synchronize(); warm = time.time() - t0
torch.cuda.reset_peak_memory_stats()
dist.barrier(); t0 = time.time()
for _ in range(a.steps): loss = step()
torch.cuda.synchronize(); dt = (time.time() - t0) / a.steps
peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**30], device="cuda")
dist.all_reduce(peak, op=dist.ReduceOp.MAX)
tok_s = world * a.batch * a.seq / dt
if rank == 0:
    print("fsdp2", json.dumps(dict(params=n, world=world, step_ms=dt * 1e3, tokens_per_s=tok_s,
                                   tflops=tok_s * fpt / 1e12, mfu=tok_s * fpt / 1e12 / (a.peak_tflops * world),
                                   peak_mem_gib_per_rank=peak.item(), warmup_s=warm, loss=loss.item())), flush=True)
dist.destroy_process_group()
