"""Per-document attention (zcc --per-document) against each document run on its own.

    per_document.py ZCC ZRUN EXAMPLES SHARED_MODELS WORKDIR
For llama-tiny (RoPE) and gpt2-tiny (learned positions): a batch of 4 x 32 tokens packed with
documents of 1 to 12 tokens (each ending with the EOS id 2), its position_ids as zrun's loader
makes them from --eos (0 after each EOS). The --per-document plan's logits of every document must
equal, within 1e-4 of their magnitude, the logits of a plain plan (the same model compiled
without the option) fed that document alone at the start of a row: under a causal mask a row's
first L logits see only its first L tokens, at positions 0..L-1, which is what running the
document on its own means. The same comparison with the plain plan fed the packed rows must fail
(attention crossing documents, positions not restarting), so the check can fail. Then finite
differences of the --per-document plan's loss match its gradients (zrun gradcheck), and 20
steps of training from a packed token stream follow PyTorch's trajectories (each document run on
its own; examples/models/references.json). Prints one line per check and 'N of N per-document
checks pass'.
"""
import os, subprocess, sys

import numpy as np

zcc, zrun, examples, shared, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
EOS, B, T = 2, 4, 32
MODELS = [
    ("llama-tiny", os.path.join(examples, "models", "llama-tiny.onnx"),
     ["--frozen", "inv_freq|lifted_tensor"]),
    ("gpt2-tiny", os.path.join(shared, "gpt2-tiny.onnx"), ["--frozen", "lifted_tensor"]),
]


def packed_batch(seed):
    """Token rows of documents of 1 to 12 tokens, each ending with the EOS (the last one cut by
    the row's end); the loader's positions and labels (-100 after an EOS)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((B, T), np.int64)
    for r in range(B):
        row = []
        while len(row) < T:
            n = int(rng.integers(1, 13))
            row += list(rng.integers(3, 256, n - 1)) + [EOS]
        ids[r] = row[:T]
    pos = np.zeros_like(ids)
    for t in range(1, T):
        pos[:, t] = np.where(ids[:, t - 1] == EOS, 0, pos[:, t - 1] + 1)
    labels = np.concatenate([ids[:, 1:], rng.integers(3, 256, (B, 1))], axis=1)
    labels[ids == EOS] = -100
    return ids, pos, labels


def documents(pos):
    """(row, start, end) of every document of the batch."""
    out = []
    for r in range(B):
        starts = [t for t in range(T) if pos[r, t] == 0] + [T]
        out += [(r, a, e) for a, e in zip(starts[:-1], starts[1:])]
    return out


def logits_of(plan, arrays, tag):
    flags = []
    for name, a in arrays.items():
        path = os.path.join(work, f"{tag}.{name}.npy")
        np.save(path, a)
        flags += ["--data", f"{name}={path}"]
    out = os.path.join(work, f"{tag}.logits.npy")
    subprocess.run([zrun, "eval", plan, *flags, "--output", f"logits={out}"], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(out)


def alone(plain, ids, docs, tag):
    """The plain plan's logits of each document fed alone at the start of a row (the rest of
    the row another document's tokens: a causal mask hides them)."""
    rows = [np.concatenate([ids[r, a:e], ids[(r + 1) % B, : T - (e - a)]]) for r, a, e in docs]
    while len(rows) % B:
        rows.append(rows[-1])
    out = []
    for k in range(0, len(rows), B):
        x = np.stack(rows[k:k + B])
        out.append(logits_of(plain, {"input_ids": x, "labels": np.zeros_like(x)}, f"{tag}-{k}"))
    got = np.concatenate(out)
    return [got[i, : e - a] for i, (r, a, e) in enumerate(docs)]


runs = ok = 0


def report(name, passed, detail):
    global runs, ok
    runs += 1
    ok += passed
    print(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}")


ids, pos, labels = packed_batch(5)
docs = documents(pos)
assert len(docs) > 2 * B, "the batch packs several documents a row"
for name, onnx, flags in MODELS:
    common = ["--micro-batch", str(B), "--loss", "cross-entropy", *flags]
    packed = os.path.join(work, f"{name}-packed.zplan")
    plain = os.path.join(work, f"{name}-plain.zplan")
    subprocess.run([zcc, onnx, *common, "--per-document", "-o", packed], check=True)
    subprocess.run([zcc, onnx, *common, "-o", plain], check=True)
    want = alone(plain, ids, docs, f"{name}-alone")
    got = logits_of(packed, {"input_ids": ids, "position_ids": pos, "labels": labels},
                    f"{name}-packed")
    cross = logits_of(plain, {"input_ids": ids, "labels": labels}, f"{name}-cross")
    mag = max(float(np.abs(w).max()) for w in want)
    err = max(float(np.abs(got[r, a:e] - w).max()) for (r, a, e), w in zip(docs, want)) / mag
    report(f"{name} --per-document", err <= 1e-4,
           f"{len(docs)} documents, logits within {err:.1e} of each run alone")
    # The plain plan on the packed rows: documents after a row's first see the earlier ones.
    err = max(float(np.abs(cross[r, a:e] - w).max()) for (r, a, e), w in zip(docs, want)) / mag
    report(f"{name} without --per-document differs", err > 1e-2,
           f"logits {err:.1e} away from the documents run alone")
    # The backward: finite differences of the loss along a random direction per parameter.
    data = []
    for part, a in (("input_ids", ids), ("position_ids", pos), ("labels", labels)):
        data += ["--data", f"{part}={os.path.join(work, f'{name}-packed.{part}.npy')}"]
    r = subprocess.run([zrun, "gradcheck", packed, *data, "--tolerance", "2e-2"],
                       capture_output=True, text=True)
    last = (r.stdout.strip().splitlines() or ["no output"])[-1]
    report(f"{name} --per-document gradients", r.returncode == 0, last)

# PyTorch's trajectories (tools/export_reference_models.py's packed_case: each document of each
# sequence run on its own): 20 AdamW steps from a packed token stream, zrun's loader making the
# positions from --eos, fp32 within 1e-4 of the loss and 1e-3 of the gradient norm; ZeRO-3 over
# two ranks against 'plain-w2' (each rank the mean over its own half's labels, as under DDP).
refs = os.path.join(examples, "models", "references.json")
check = os.path.join(os.path.dirname(__file__), "..", "..", "Inputs", "check_trajectory.py")
plain = ["--lr", "1e-3", "--weight-decay", "0.01"]
sched = ["--lr", "2e-3", "--weight-decay", "0.1", "--grad-clip", "1.0"]
for name, onnx, flags in MODELS:
    tokens = os.path.join(examples, "models", f"{name}-packed.tokens.bin")
    for traj, micro, zflags, rflags in (
            ("plain", B, plain, []),
            ("sched", B, sched, ["--lr-schedule", "warmup-cosine", "--warmup-steps", "5"]),
            ("plain-w2", B // 2, plain + ["--zero-stage", "3", "--world-size", "2",
                                          "--stage3-param-persistence-threshold", "100"], [])):
        plan = os.path.join(work, f"{name}-{traj}.zplan")
        metrics = plan + ".jsonl"
        subprocess.run([zcc, onnx, "--micro-batch", str(micro), "--loss", "cross-entropy", *flags,
                        "--per-document", *zflags, "-o", plan], check=True)
        subprocess.run([zrun, "train", plan, "--tokens", tokens, "--eos", str(EOS), "--steps",
                        "20", "--metrics", metrics, *rflags], check=True,
                       stdout=subprocess.DEVNULL)
        r = subprocess.run([sys.executable, check, metrics, refs, f"{name}-packed", traj],
                           capture_output=True, text=True)
        report(f"{name} packed {traj} vs PyTorch", r.returncode == 0,
               (r.stdout.strip().splitlines() or ["no output"])[0])
print(f"{ok} of {runs} per-document checks pass")
