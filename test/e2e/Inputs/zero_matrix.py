"""ZeRO stages x world sizes x gradient accumulation against PyTorch.

    zero_matrix.py ZCC ZRUN SHARED_MODELS EXAMPLES WORKDIR [--quick]
For each model (mlp, gpt2-tiny, llama-tiny), stage 0-3, world size 1, 2, 4,
and accumulation 1 or 2 (where the reference batch B divides into W*A
micro-batches): compile with --micro-batch B/(W*A), train 20 steps with
W in-process ranks, and compare every step with references.json (loss 1e-4,
grad_norm 1e-3 relative). Small buckets and a small persistence threshold
make stage 3 partition most parameters over several buckets; runs with
accumulation 2 or 4 ranks overlap communication (--overlap-comm). Prints one
line per run and 'N of N ZeRO runs match PyTorch'.
"""
import json, os, subprocess, sys

zcc, zrun, shared, examples, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)

MODELS = [
    # name, onnx, references, trajectory, batch, zcc flags, data, zrun flags
    ("mlp", f"{shared}/mlp.onnx", f"{shared}/references.json", "plain", 16,
     ["--reduce-bucket-size", "10000", "--stage3-param-persistence-threshold", "200"],
     ["--data", f"x={shared}/mlp.x.npy", "--data", f"labels={shared}/mlp.labels.npy"], []),
    ("gpt2-tiny", f"{shared}/gpt2-tiny.onnx", f"{shared}/references.json", "sched", 4,
     ["--frozen", "lifted_tensor", "--lr", "2e-3", "--weight-decay", "0.1", "--grad-clip", "1.0",
      "--reduce-bucket-size", "40000", "--stage3-param-persistence-threshold", "1000"],
     ["--data", f"input_ids={shared}/gpt2-tiny.input_ids.npy",
      "--data", f"labels={shared}/gpt2-tiny.labels.npy"],
     ["--lr-schedule", "warmup-cosine", "--warmup-steps", "5"]),
    ("llama-tiny", f"{examples}/models/llama-tiny.onnx", f"{examples}/models/references.json",
     "plain", 4,
     ["--frozen", "inv_freq|lifted_tensor", "--reduce-bucket-size", "40000",
      "--stage3-param-persistence-threshold", "1000"],
     ["--data", f"input_ids={examples}/models/llama-tiny.input_ids.npy",
      "--data", f"labels={examples}/models/llama-tiny.labels.npy"], []),
]


def worst(metrics, ref):
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    if len(rows) != len(ref["loss"]):
        return None
    wl = max(abs(r["loss"] - e) / abs(e) for r, e in zip(rows, ref["loss"]))
    wg = max(abs(r["grad_norm"] - e) / abs(e) for r, e in zip(rows, ref["grad_norm"]))
    return wl, wg


runs = ok = 0
for name, model, refs, traj, batch, flags, data, train_flags in MODELS:
    ref = json.load(open(refs))["models"][name]["trajectories"][traj]
    for stage in range(4):
        for world in (1, 2, 4):
            for accum in (1, 2):
                if batch % (world * accum):
                    continue
                micro = batch // (world * accum)
                tag = f"{name} stage {stage} W {world} accum {accum} micro {micro}"
                plan = os.path.join(work, f"{name}-{stage}-{world}-{accum}.zplan")
                metrics = plan + ".jsonl"
                runs += 1
                # Half the runs overlap communication (async collectives on the
                # ranks' communication threads, stage-3 prefetch).
                overlap = ["--overlap-comm"] if accum == 2 or world == 4 else []
                tag += " overlap" if overlap else ""
                c = subprocess.run([zcc, model, "--loss", "cross-entropy", "--micro-batch",
                                    str(micro), "--grad-accum", str(accum), "--zero-stage",
                                    str(stage), "--world-size", str(world), "-o", plan] + flags
                                   + overlap,
                                   capture_output=True, text=True)
                if c.returncode:
                    print(f"FAIL {tag}: zcc: {c.stderr.strip()}")
                    continue
                t = subprocess.run([zrun, "train", plan, "--steps", "20", "--metrics", metrics]
                                   + data + train_flags, capture_output=True, text=True)
                if t.returncode:
                    print(f"FAIL {tag}: zrun: {t.stderr.strip()}")
                    continue
                w = worst(metrics, ref)
                good = w is not None and w[0] <= 1e-4 and w[1] <= 1e-3
                ok += good
                print(f"{'ok  ' if good else 'FAIL'} {tag}: worst loss "
                      f"{w[0] if w else float('nan'):.2e}, grad_norm "
                      f"{w[1] if w else float('nan'):.2e}")
print(f"{ok} of {runs} ZeRO runs match PyTorch")
sys.exit(0 if ok == runs else 1)
