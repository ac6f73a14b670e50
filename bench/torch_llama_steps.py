# A copy of ../shared/bench/torch_llama_baseline.py that also prints each timed
# step's time from CUDA events recorded between the steps (no extra
# synchronization: the mean it prints is the baseline's). bench/gpu-power-diag.sh.
"""PyTorch baseline: a Llama-3-family model (random init) trained on one GPU.

Times eager and torch.compile training steps (bf16 autocast, fused AdamW, fp32 loss) and
optionally exports the same model (same seed) to ONNX with external data, so that zcc can
compile the graph and zrun can load the identical weights (--weights).  Also writes the
random token stream it trained on as uint32 (zrun --tokens FILE --token-bytes 4) and the
first step's loss on it (for a parity check of zcc on identical weights and tokens).

usage: python3 torch_llama_baseline.py [--size 1b|8b-8l|tiny] [--batch 4 --seq 1024 --steps 10]
         [--modes eager,compile] [--export llama.onnx --tokens tokens.bin]
"""
import argparse, json, time
import numpy as np
import torch, torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--size", default="1b"); p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch", type=int, default=4); p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3); p.add_argument("--modes", default="eager,compile")
p.add_argument("--export", default=""); p.add_argument("--tokens", default="")
p.add_argument("--peak-tflops", type=float, default=989.0)
a = p.parse_args()

SIZES = {  # Llama 3.2 1B shape; Llama 3 8B's layer shape (head dim 128) with 8 of its 32 layers
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8b-8l": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8, num_attention_heads=32,
                  num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "tiny": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=8,
                 num_key_value_heads=2, vocab_size=4096, tie_word_embeddings=False),
}

def make():
    torch.manual_seed(0)
    c = LlamaConfig(max_position_embeddings=a.seq, rope_theta=500000.0, attention_dropout=0.0,
                    **SIZES[a.size])
    c._attn_implementation = "sdpa"
    return LlamaForCausalLM(c)

def flops_per_token(m):
    n = sum(p.numel() for p in m.parameters())
    c = m.config
    # 6N (tied: the embedding counts once, as the LM head's matmul) + attention (12 L H T)
    return 6 * n + 12 * c.num_hidden_layers * c.hidden_size * a.seq, n

V = SIZES[a.size]["vocab_size"]
g = np.random.default_rng(0)
stream = g.integers(0, V, size=a.batch * (a.seq + 1) * 64, dtype=np.uint32)
if a.tokens:
    stream.tofile(a.tokens)
# batch 0 of the stream as a token loader (nanoGPT, llm.c, zrun --tokens) cuts it: sequence i is
# tokens [i*T, (i+1)*T), its labels the same shifted by one
s0 = torch.from_numpy(stream[: a.batch * a.seq + 1].astype(np.int64))
x0, y0 = s0[:-1].view(a.batch, a.seq).contiguous(), s0[1:].view(a.batch, a.seq).contiguous()

results = {}
for mode in [m for m in a.modes.split(",") if m]:
    m = make().cuda()
    fpt, n = flops_per_token(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    step_model = torch.compile(m) if mode == "compile" else m
    x, y = x0.cuda(), y0.cuda()
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_model(input_ids=x, use_cache=False).logits
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        return loss
    t0 = time.time()
    first = step().item()
    for _ in range(a.warmup - 1): step()
    torch.cuda.synchronize(); warm_s = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps + 1)]
    ev[0].record()
    for i in range(a.steps): loss = step(); ev[i + 1].record()
    torch.cuda.synchronize(); dt = (time.time() - t0) / a.steps
    print(mode, "steps_ms", json.dumps([round(ev[i].elapsed_time(ev[i + 1]), 2) for i in range(a.steps)]), flush=True)
    tok_s = a.batch * a.seq / dt
    results[mode] = dict(params=n, step_ms=dt * 1e3, tokens_per_s=tok_s, tflops=tok_s * fpt / 1e12,
                         mfu=tok_s * fpt / 1e12 / a.peak_tflops, peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30,
                         warmup_s=warm_s, first_loss=first, loss=loss.item())
    print(mode, json.dumps(results[mode]), flush=True)
    del m, opt, step_model; torch.cuda.empty_cache()

if a.export:
    m = make().eval()
    class LogitsOnly(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, input_ids): return s.m(input_ids=input_ids, use_cache=False).logits
    t0 = time.time()
    torch.onnx.export(LogitsOnly(m), (x0,), a.export, input_names=["input_ids"], output_names=["logits"],
                      dynamo=True, optimize=False, opset_version=18, external_data=True)
    print("exported", a.export, f"{time.time() - t0:.1f} s", flush=True)
print(json.dumps(dict(config=vars(a), results=results)))
