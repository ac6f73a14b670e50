"""PyTorch baseline: a Mixtral-style mixture of experts (random init) trained on one GPU.

The MoE counterpart of ../shared/bench/torch_llama_baseline.py, with its method: eager and
torch.compile training steps (bf16 autocast, fused AdamW, fp32 loss) of Hugging Face's own
(sparse) Mixtral, the loss being cross-entropy + router_aux_loss_coef x the load-balancing loss;
optionally the same model (same seed) exported to ONNX with external data in the dense dispatch
zcc compiles (tools/moe_dense.py; outputs logits and aux_loss), and the token stream it trained
on as uint32 (zrun --tokens FILE --token-bytes 4). FLOPs per token count the active parameters
(the experts' times top-k / experts): the work of the sparse model, which is also what the MFU of
zcc's dense plan is measured against.

--size fine is a fine-grained mixture (issue 52): Hugging Face's Qwen2-MoE with 64 experts of 512,
top-8 without renormalization, a gated shared expert of 4096, 12 layers at 2048 wide (2.98B
parameters, 0.86B active); fine-dense the dense Qwen2 with the same active parameters (an FFN of
8 x 512 + 4096 = 8192), which zcc's dropless plan is compared with.

usage: python3 torch_moe_baseline.py [--size small|tiny|fine|fine-dense] [--batch 4 --seq 1024]
         [--steps 10] [--modes eager,compile] [--export moe.onnx --tokens tokens.bin]
"""
import argparse, json, os, sys, time
import numpy as np
import torch, torch.nn.functional as F
from transformers import MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--size", default="small"); p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch", type=int, default=4); p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3); p.add_argument("--modes", default="eager,compile")
p.add_argument("--export", default=""); p.add_argument("--tokens", default="")
p.add_argument("--peak-tflops", type=float, default=989.0)
a = p.parse_args()

SIZES = {  # Mixtral's proportions (8 experts, top-2, FFN 3.5 x hidden, GQA 4:1) at 1024 wide
    "small": dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
                  num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                  num_local_experts=8, num_experts_per_tok=2),
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1024, num_local_experts=4, num_experts_per_tok=2),
    # Qwen2-MoE, fine-grained (64 experts top-8 and a shared expert), and its dense equivalent.
    "fine": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=12,
                 num_attention_heads=16, num_key_value_heads=4, vocab_size=32000, num_experts=64,
                 num_experts_per_tok=8, moe_intermediate_size=512,
                 shared_expert_intermediate_size=4096, norm_topk_prob=False, decoder_sparse_step=1,
                 mlp_only_layers=[], use_sliding_window=False),
    "fine-dense": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=12,
                       num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                       use_sliding_window=False),
}
MOE = a.size != "fine-dense"
COEF = 0.02


def make():
    torch.manual_seed(0)
    common = dict(max_position_embeddings=a.seq, rope_theta=1e6, attention_dropout=0.0,
                  tie_word_embeddings=False, **SIZES[a.size])
    if a.size == "fine":
        c = Qwen2MoeConfig(router_aux_loss_coef=COEF, output_router_logits=True, **common)
    elif a.size == "fine-dense":
        c = Qwen2Config(**common)
    else:
        c = MixtralConfig(router_aux_loss_coef=COEF, output_router_logits=True, sliding_window=None,
                          router_jitter_noise=0.0, **common)
    c._attn_implementation = "sdpa"
    return (Qwen2MoeForCausalLM if a.size == "fine" else Qwen2ForCausalLM if not MOE
            else MixtralForCausalLM)(c)


def flops_per_token(m):
    c = m.config
    n = sum(p.numel() for p in m.parameters())
    # Routed experts (not Qwen2-MoE's shared_expert): their share top-k / experts is active.
    experts = sum(p.numel() for name, p in m.named_parameters() if ".experts." in name)
    total = getattr(c, "num_local_experts", None) or getattr(c, "num_experts", 1)
    active = n - experts + experts * getattr(c, "num_experts_per_tok", 1) // total
    return 6 * active + 12 * c.num_hidden_layers * c.hidden_size * a.seq, n, active


V = SIZES[a.size]["vocab_size"]
g = np.random.default_rng(0)
stream = g.integers(0, V, size=a.batch * (a.seq + 1) * 64, dtype=np.uint32)
if a.tokens:
    stream.tofile(a.tokens)
s0 = torch.from_numpy(stream[: a.batch * a.seq + 1].astype(np.int64))
x0, y0 = s0[:-1].view(a.batch, a.seq).contiguous(), s0[1:].view(a.batch, a.seq).contiguous()

results = {}
extra = dict(output_router_logits=True) if MOE else {}
for mode in [m for m in a.modes.split(",") if m]:
    m = make().cuda()
    fpt, n, active = flops_per_token(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    step_model = torch.compile(m) if mode == "compile" else m
    x, y = x0.cuda(), y0.cuda()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            o = step_model(input_ids=x, use_cache=False, **extra)
            loss = F.cross_entropy(o.logits.view(-1, o.logits.size(-1)).float(), y.view(-1))
            if MOE:
                loss = loss + COEF * o.aux_loss.float()
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
    results[mode] = dict(params=n, active_params=active, step_ms=dt * 1e3, tokens_per_s=tok_s,
                         tflops=tok_s * fpt / 1e12, mfu=tok_s * fpt / 1e12 / a.peak_tflops,
                         peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30,
                         warmup_s=warm_s, first_loss=first, loss=loss.item())
    print(mode, json.dumps(results[mode]), flush=True)
    del m, opt, step_model; torch.cuda.empty_cache()

if a.export:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import moe_dense
    m = make().eval()
    if MOE:
        moe_dense.patch(m, m.config.hidden_size)

    class WithAux(torch.nn.Module):
        def __init__(s, m): super().__init__(); s.m = m
        def forward(s, input_ids):
            o = s.m(input_ids=input_ids, use_cache=False, **extra)
            return (o.logits, o.aux_loss) if MOE else o.logits
    t0 = time.time()
    torch.onnx.export(WithAux(m), (x0,), a.export, input_names=["input_ids"],
                      output_names=["logits", "aux_loss"] if MOE else ["logits"], dynamo=True,
                      optimize=False, opset_version=18, external_data=True)
    print("exported", a.export, f"{time.time() - t0:.1f} s", flush=True)
print(json.dumps(dict(config=vars(a), results=results)))
