"""Checks SGD losses of make_linear.py's model against the closed form.

    check_linear.py DIR METRICS LR MOMENTUM [--nesterov]
"""
import json, os, sys
import numpy as np

d, metrics, lr, mom = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
nesterov = "--nesterov" in sys.argv
w, R = np.load(os.path.join(d, "w.npy")).astype(np.float64), np.load(os.path.join(d, "R.npy")).astype(np.float64)
rows = [json.loads(l) for l in open(os.path.join(d, metrics))]
buf = np.zeros_like(w)
for k, row in enumerate(rows):
    want = float((w * R).sum())
    if abs(row["loss"] - want) > 1e-4 * max(1.0, abs(want)):
        print(f"step {k}: loss {row['loss']} vs closed form {want}")
        sys.exit(1)
    g = R
    buf = mom * buf + g if mom else g
    step = g + mom * buf if nesterov else buf
    w = w - lr * step
print(f"SGD losses match the closed form over {len(rows)} steps")
