# Does a memory-bound optimizer update hide under compute-bound GEMMs on a second stream?
# (issue 18: would running AdamW beside the backward pay?) python3 bench/torch_adamw_overlap.py
# GEMMs like Llama 1B's MLP (4096 x 2048 @ 2048 x 8192, bf16) on one stream; torch's fused
# AdamW over N float32 parameters on another; each alone, then both at once.
import torch, statistics
torch.manual_seed(0)
a = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16)
b = torch.randn(2048, 8192, device="cuda", dtype=torch.bfloat16)
n = 1_240_000_000 // 16
ps = [torch.randn(n, device="cuda") for _ in range(16)]
gs = [torch.randn(n, device="cuda") for _ in range(16)]
ms = [torch.zeros(n, device="cuda") for _ in range(16)]
vs = [torch.zeros(n, device="cuda") for _ in range(16)]
st = [torch.tensor(1.0, device="cuda") for _ in range(16)]
def gemms(k=120):
    for _ in range(k): torch.mm(a, b)
def adam():
    torch._fused_adamw_(ps, gs, ms, vs, [], st, lr=1e-4, beta1=0.9, beta2=0.95, weight_decay=0.01,
                        eps=1e-8, amsgrad=False, maximize=False)
s2 = torch.cuda.Stream()
def both():
    ev = torch.cuda.Event(); ev.record()
    with torch.cuda.stream(s2):
        s2.wait_event(ev); adam()
    gemms()
    torch.cuda.current_stream().wait_stream(s2)
def t(fn, n=7):
    fn(); torch.cuda.synchronize(); ts = []
    for _ in range(n):
        x, y = torch.cuda.Event(True), torch.cuda.Event(True)
        x.record(); fn(); y.record(); y.synchronize(); ts.append(x.elapsed_time(y))
    return statistics.median(ts)
tg, ta, tb = t(gemms), t(adam), t(both)
print(f"gemms alone {tg:.2f} ms ({120*2*4096*2048*8192/tg/1e9:.0f} TFLOP/s), adamw alone {ta:.2f} ms "
      f"({n*16*28/ta/1e6:.0f} GB/s at 28 B a parameter), both on two streams {tb:.2f} ms "
      f"(hidden: {(tg+ta-tb)/ta*100:.0f}% of adamw)")
