"""Compares bn1's running statistics in a safetensors file (zrun export)
with batchnorm_model.py's NumPy values.

    check_running_stats.py W.safetensors EXPECTED.json CASE TOLERANCE

prints 'CASE: running statistics within TOLERANCE (worst D)', or what differs
(exit 1).
"""
import json
import struct
import sys

import numpy as np

path, expected_path, case, tolerance = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])


def tensor(name):
    if name not in header:
        print(f"{path}: no tensor '{name}' (has {sorted(header)})")
        sys.exit(1)
    lo, hi = header[name]["data_offsets"]
    return np.frombuffer(raw[8 + n + lo:8 + n + hi], np.float32).astype(np.float64)


expected = json.load(open(expected_path))[case]
worst = 0.0
for stat, name in (("mean", "bn1.running_mean"), ("var", "bn1.running_var")):
    got, want = tensor(name), np.array(expected[stat])
    d = float(np.abs(got - want).max())
    worst = max(worst, d)
    if not d <= tolerance:
        print(f"{case}: {name} {got.tolist()} differs from NumPy's {want.tolist()} by {d:.2e}")
        sys.exit(1)
print(f"{case}: running statistics within {tolerance:g} (worst {worst:.1e})")
