"""Recompute policies against the plain plan, bit for bit.

    recompute_matrix.py ZCC ZRUN SHARED_MODELS EXAMPLES WORKDIR
For gpt2-tiny and llama-tiny (fp32 and bf16) and for gpt2-tiny with ZeRO
stage 3 over 2 ranks: compile with --recompute none, layer and selective,
train 6 steps each, and require the same loss and gradient norm at every step
(recomputation runs the same kernels on the same inputs) and a smaller planned
activation peak than the plain plan. Prints one line per case and
'N of N recompute runs identical to the plain plan'.
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_runs import compile_and_train, report_bytes, tiny_models

zcc, zrun, shared, examples, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
gpt2, llama = tiny_models(shared, examples, 4)
CASES = [
    ("gpt2-tiny fp32", gpt2, []),
    ("gpt2-tiny bf16", gpt2, ["--precision", "bf16"]),
    ("llama-tiny fp32", llama, []),
    ("llama-tiny bf16", llama, ["--precision", "bf16"]),
    ("gpt2-tiny stage 3 W 2", (gpt2[0], ["--micro-batch", "2", "--frozen", "lifted_tensor"], gpt2[2]),
     ["--zero-stage", "3", "--world-size", "2", "--stage3-param-persistence-threshold", "1000",
      "--overlap-comm"]),
]


runs = ok = 0
for k, (name, (model, flags, data), extra) in enumerate(CASES):
    results = {}
    for policy in ("none", "layer", "selective"):
        base = [zcc, model, "--loss", "cross-entropy", *flags, *extra, "--recompute", policy]
        steps, report = compile_and_train(base, zrun, os.path.join(work, f"{k}-{policy}.zplan"),
                                          data)
        results[policy] = (steps, report_bytes(report, "activations+workspace"))
    for policy in ("layer", "selective"):
        runs += 1
        same = results[policy][0] == results["none"][0]
        smaller = results[policy][1] < results["none"][1]
        ok += same and smaller
        print(f"{'ok  ' if same and smaller else 'FAIL'} {name} --recompute {policy}: "
              f"{'identical' if same else 'DIFFERENT'} losses and grad norms over 6 steps, "
              f"activations {results[policy][1]} B vs {results['none'][1]} B")
print(f"{ok} of {runs} recompute runs identical to the plain plan")
