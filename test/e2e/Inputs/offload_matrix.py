"""--offload-optimizer cpu against the plain plan, bit for bit.

    offload_matrix.py ZCC ZRUN SHARED_MODELS EXAMPLES WORKDIR
For gpt2-tiny at ZeRO stages 1-3 over 2 ranks (fp32, bf16, fp16 with loss
scaling) and llama-tiny at stage 2: compile with and without offload, train
6 steps, and require the same loss and gradient norm at every step (the host
runs the same AdamW kernel on the same values), less device memory (the
moments leave it) and a host arena holding them. Prints one line per case and
'N of N offload runs identical to the plain plan'.
"""
import json, os, re, subprocess, sys

zcc, zrun, shared, examples, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
gpt2 = (f"{shared}/gpt2-tiny.onnx", ["--micro-batch", "2", "--frozen", "lifted_tensor",
                                     "--reduce-bucket-size", "40000",
                                     "--stage3-param-persistence-threshold", "1000"],
        ["--data", f"input_ids={shared}/gpt2-tiny.input_ids.npy",
         "--data", f"labels={shared}/gpt2-tiny.labels.npy"])
llama = (f"{examples}/models/llama-tiny.onnx", ["--micro-batch", "2", "--frozen", "inv_freq|lifted_tensor"],
         ["--data", f"input_ids={examples}/models/llama-tiny.input_ids.npy",
          "--data", f"labels={examples}/models/llama-tiny.labels.npy"])
CASES = [
    ("gpt2-tiny stage 1", gpt2, ["--zero-stage", "1"]),
    ("gpt2-tiny stage 2", gpt2, ["--zero-stage", "2"]),
    ("gpt2-tiny stage 3, overlap", gpt2, ["--zero-stage", "3", "--overlap-comm"]),
    ("gpt2-tiny stage 2 bf16", gpt2, ["--zero-stage", "2", "--precision", "bf16"]),
    ("gpt2-tiny stage 2 fp16", gpt2, ["--zero-stage", "2", "--precision", "fp16"]),
    ("llama-tiny stage 2", llama, ["--zero-stage", "2"]),
    # offload_param too: the stage-3 shards on the host, copied ahead of the gathers.
    ("gpt2-tiny stage 3 + offload_param, overlap", gpt2,
     ["--zero-stage", "3", "--overlap-comm", "--offload-param", "cpu"]),
]


def row(report, name):
    m = re.search(r"^\s*" + re.escape(name) + r"\s+(\d+) B", report, re.M)
    return int(m.group(1)) if m else 0


runs = ok = 0
for k, (name, (model, flags, data), extra) in enumerate(CASES):
    results = {}
    for offload in ("none", "cpu"):
        both = extra if offload == "cpu" else [a for a in extra if a not in ("--offload-param", "cpu")]
        base = [zcc, model, "--loss", "cross-entropy", "--world-size", "2", *flags, *both,
                "--offload-optimizer", offload]
        plan = os.path.join(work, f"{k}-{offload}.zplan")
        subprocess.run(base + ["-o", plan], check=True)
        report = subprocess.run(base + ["--emit=report"], check=True, capture_output=True,
                                text=True).stdout
        metrics = plan + ".jsonl"
        subprocess.run([zrun, "train", plan, *data, "--steps", "6", "--metrics", metrics],
                       check=True, capture_output=True)
        rows = [json.loads(l) for l in open(metrics) if l.strip()]
        results[offload] = ([(r["loss"], r["grad_norm"]) for r in rows], row(report, "peak"),
                            row(report, "optimizer state (host)"), row(report, "host memory"))
    runs += 1
    (plain, dev0, _, _), (off, dev1, moments, host) = results["none"], results["cpu"]
    good = plain == off and dev1 < dev0 and moments > 0 and host >= moments
    ok += good
    print(f"{'ok  ' if good else 'FAIL'} {name}: {'identical' if plain == off else 'DIFFERENT'} "
          f"losses and grad norms over 6 steps; device peak {dev1} B vs {dev0} B; moments on the "
          f"host {moments} B of a {host} B host arena")
print(f"{ok} of {runs} offload runs identical to the plain plan")
