"""Checks zrun's loss for Inputs/tiny.onnxtxt on x = ones(2, 4), labels [0, 2]
against numpy (float64)."""
import re, sys
import numpy as np

w = np.array([0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2]).reshape(4, 3)
b = np.array([0.01, 0.02, 0.03])
logits = np.maximum(np.ones((2, 4)) @ w, 0) + b
labels = [0, 2]
lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
ref = np.mean([lse[i] - logits[i, labels[i]] for i in range(2)])
got = float(re.search(r"loss: (\S+)", sys.stdin.read()).group(1))
assert abs(got - ref) <= 1e-6 * abs(ref), (got, ref)
print("tiny model loss matches numpy:", got, ref)
