# python3 bench/torch_attention_backends.py (GPU machine)
# Times torch's SDPA backends (flash = FlashAttention-2, cudnn, efficient) on the
# attention shapes zrt-attention-bench uses: bf16, causal, forward and forward+backward.
# SHAPES="name:B:S:H:Hk:D,..." replaces the shapes; BACKENDS="flash,cudnn" picks backends.
import os, sys, torch, statistics
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F
print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())
try:
    import nvidia.cudnn as nc
    d = os.path.join(list(nc.__path__)[0], "lib"); print("cudnn lib", d, sorted(os.listdir(d))[:12])
except Exception as e:
    print("no nvidia.cudnn:", e)
shapes = [("llama-1b", 4, 1024, 32, 8, 64), ("llama-8b", 4, 1024, 32, 8, 128),
          ("gpt2-1.5b", 4, 1024, 25, 25, 64), ("gpt2-124m", 16, 1024, 12, 12, 64)]
if os.environ.get("SHAPES"):
    shapes = [(f[0], *map(int, f[1:])) for f in (x.split(":") for x in os.environ["SHAPES"].split(","))]
names = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
         "efficient": SDPBackend.EFFICIENT_ATTENTION}
backends = [names[b] for b in os.environ.get("BACKENDS", "flash,cudnn,efficient").split(",")]
def t(fn, n=20):
    for _ in range(3): fn()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)
for name, B, S, H, Hk, D in shapes:
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, Hk, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, Hk, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    fl = 4 * B * H * S * S * D / 2
    for be in backends:
        for gqa in ((True, False) if H != Hk else (False,)):
            try:
                kk = k if gqa else k.repeat_interleave(H // Hk, 1).detach().requires_grad_()
                vv = v if gqa else v.repeat_interleave(H // Hk, 1).detach().requires_grad_()
                with sdpa_kernel(be):
                    fwd = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=gqa)
                    o = fwd(); g = torch.randn_like(o)
                    tf = t(lambda: fwd())
                    def fb():
                        o = fwd(); o.backward(g)
                    tfb = t(fb)
                tb = tfb - tf
                print(f"{name:10s} {str(be).split('.')[-1]:20s} gqa={int(gqa)} fwd {tf:.3f} ms {fl/tf/1e9:.0f} TFLOP/s  bwd {tb:.3f} ms {2.5*fl/tb/1e9:.0f} TFLOP/s")
            except Exception as e:
                print(f"{name:10s} {str(be).split('.')[-1]:20s} gqa={int(gqa)} failed: {str(e)[:150]}")
