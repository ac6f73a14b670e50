"""--offload-optimizer cpu against the plain plan, bit for bit.

    offload_matrix.py ZCC ZRUN SHARED_MODELS EXAMPLES WORKDIR
For gpt2-tiny at ZeRO stages 1-3 over 2 ranks (fp32, bf16, fp16 with loss
scaling) and llama-tiny at stage 2: compile with and without offload, train
6 steps, and require the same loss and gradient norm at every step (the host
runs the same AdamW kernel on the same values), less device memory (the
moments leave it) and a host arena holding them. Prints one line per case and
'N of N offload runs identical to the plain plan'.
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_runs import compile_and_train, report_bytes, tiny_models

zcc, zrun, shared, examples, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
gpt2, llama = tiny_models(shared, examples, 2)
gpt2 = (gpt2[0], gpt2[1] + ["--reduce-bucket-size", "40000",
                            "--stage3-param-persistence-threshold", "1000"], gpt2[2])
CASES = [
    ("gpt2-tiny stage 1", gpt2, ["--zero-stage", "1"]),
    ("gpt2-tiny stage 2", gpt2, ["--zero-stage", "2"]),
    ("gpt2-tiny stage 3, overlap", gpt2, ["--zero-stage", "3", "--overlap-comm"]),
    ("gpt2-tiny stage 2 bf16", gpt2, ["--zero-stage", "2", "--precision", "bf16"]),
    ("gpt2-tiny stage 2 fp16", gpt2, ["--zero-stage", "2", "--precision", "fp16"]),
    ("llama-tiny stage 2", llama, ["--zero-stage", "2"]),
    # Clipping: the gradient twin copied in the backward, the clip on the host.
    ("gpt2-tiny stage 2, clip", gpt2, ["--zero-stage", "2", "--grad-clip", "1.0"]),
    ("gpt2-tiny stage 3 fp16, clip", gpt2,
     ["--zero-stage", "3", "--precision", "fp16", "--grad-clip", "1.0"]),
    # offload_param too: the stage-3 shards on the host, copied ahead of the gathers.
    ("gpt2-tiny stage 3 + offload_param, overlap", gpt2,
     ["--zero-stage", "3", "--overlap-comm", "--offload-param", "cpu"]),
]


runs = ok = 0
for k, (name, (model, flags, data), extra) in enumerate(CASES):
    results = {}
    for offload in ("none", "cpu"):
        both = extra if offload == "cpu" else [a for a in extra if a not in ("--offload-param", "cpu")]
        base = [zcc, model, "--loss", "cross-entropy", "--world-size", "2", *flags, *both,
                "--offload-optimizer", offload]
        steps, report = compile_and_train(base, zrun, os.path.join(work, f"{k}-{offload}.zplan"),
                                          data)
        results[offload] = (steps, report_bytes(report, "peak"),
                            report_bytes(report, "optimizer state (host)"),
                            report_bytes(report, "host memory"),
                            report_bytes(report, "gradients (host)"))
    runs += 1
    (plain, dev0, _, _, _), (off, dev1, moments, host, grads) = results["none"], results["cpu"]
    # Stages 2-3 copy the gradient shards to the host in the backward.
    twin = grads > 0 if "--zero-stage" in extra and extra[extra.index("--zero-stage") + 1] != "1" \
        else grads == 0
    good = plain == off and dev1 < dev0 and moments > 0 and host >= moments + grads and twin
    ok += good
    print(f"{'ok  ' if good else 'FAIL'} {name}: {'identical' if plain == off else 'DIFFERENT'} "
          f"losses and grad norms over 6 steps; device peak {dev1} B vs {dev0} B; moments on the "
          f"host {moments} B and gradients {grads} B of a {host} B host arena")
print(f"{ok} of {runs} offload runs identical to the plain plan")
