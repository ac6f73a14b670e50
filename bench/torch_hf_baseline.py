"""PyTorch baseline for Hugging Face decoder families other than Llama: the same measurement as
../shared/bench/torch_llama_baseline.py (bf16 autocast, fused AdamW lr 1e-4 wd 0.01, the same
token stream and output lines, so bench/bench_summary.py reads both), for shapes whose attention
differs from Llama's: other head widths, multi-query attention, fused projections.

usage: python3 torch_hf_baseline.py --size phi3-mini-8l|gemma-2b-8l|... [--batch 4 --seq 1024]
           [--steps 10 --warmup 3 --modes eager,compile --export model.onnx --tokens tokens.bin]

Sizes (transformers' own classes, SDPA attention as they default to):
  phi3-mini-8l   Phi-3-mini (3072 hidden, 32 heads of 96, fused qkv and gate/up), 8 of 32 layers
  gemma-2b-8l    Gemma 2B (2048 hidden, 8 heads of 256 on one k/v head, GeGLU), 8 of 18 layers
  llama-d96-8l   Llama with 96-wide heads (3072 hidden, 32 heads, 8 k/v heads), 8 layers
"""
import argparse, json, time

import numpy as np
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--size", required=True); p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch", type=int, default=4); p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3); p.add_argument("--modes", default="eager,compile")
p.add_argument("--export", default=""); p.add_argument("--tokens", default="")
p.add_argument("--peak-tflops", type=float, default=989.0)
a = p.parse_args()


def config():
    import transformers as t
    common = dict(max_position_embeddings=max(a.seq, 4096), attention_dropout=0.0)
    if a.size == "phi3-mini-8l":
        return t.Phi3Config(hidden_size=3072, intermediate_size=8192, num_hidden_layers=8,
                            num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
                            tie_word_embeddings=False, rope_theta=10000.0, pad_token_id=0,
                            bos_token_id=1, eos_token_id=2, **common), t.Phi3ForCausalLM
    if a.size == "gemma-2b-8l":
        return t.GemmaConfig(hidden_size=2048, intermediate_size=16384, num_hidden_layers=8,
                             num_attention_heads=8, num_key_value_heads=1, head_dim=256,
                             vocab_size=256000, hidden_activation="gelu_pytorch_tanh",
                             pad_token_id=0, bos_token_id=2, eos_token_id=1, **common), \
            t.GemmaForCausalLM
    if a.size == "llama-d96-8l":
        return t.LlamaConfig(hidden_size=3072, intermediate_size=8192, num_hidden_layers=8,
                             num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                             tie_word_embeddings=False, rope_theta=500000.0, **common), \
            t.LlamaForCausalLM
    raise SystemExit("unknown --size %s" % a.size)


def make():
    torch.manual_seed(0)
    c, cls = config()
    c._attn_implementation = "sdpa"
    return cls(c)


def flops_per_token(m):
    n = sum(q.numel() for q in m.parameters())
    c = m.config
    heads_width = c.num_attention_heads * getattr(c, "head_dim", c.hidden_size // c.num_attention_heads)
    # 6N (tied embeddings count once, as the LM head's matmul) + attention (12 L H D T)
    return 6 * n + 12 * c.num_hidden_layers * heads_width * a.seq, n


V = config()[0].vocab_size
g = np.random.default_rng(0)
stream = g.integers(0, V, size=a.batch * (a.seq + 1) * 64, dtype=np.uint32)
if a.tokens:
    stream.tofile(a.tokens)
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
    for _ in range(a.steps): loss = step()
    torch.cuda.synchronize(); dt = (time.time() - t0) / a.steps
    tok_s = a.batch * a.seq / dt
    results[mode] = dict(params=n, step_ms=dt * 1e3, tokens_per_s=tok_s, tflops=tok_s * fpt / 1e12,
                         mfu=tok_s * fpt / 1e12 / a.peak_tflops,
                         peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30,
                         warmup_s=warm_s, first_loss=first, loss=loss.item())
    print(mode, json.dumps(results[mode]), flush=True)
    del m, opt, step_model; torch.cuda.empty_cache()

if a.export:
    m = make().eval()

    class LogitsOnly(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, input_ids): return s.m(input_ids=input_ids, use_cache=False).logits
    t0 = time.time()
    torch.onnx.export(LogitsOnly(m), (x0,), a.export, input_names=["input_ids"],
                      output_names=["logits"], dynamo=True, optimize=False, opset_version=18,
                      external_data=True)
    print("exported", a.export, f"{time.time() - t0:.1f} s", flush=True)
print(json.dumps(dict(config=vars(a), results=results)))
