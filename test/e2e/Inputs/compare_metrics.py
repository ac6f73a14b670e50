"""Compares a run's metrics with an uninterrupted run's: the loss and grad
norm of every step, taking the last record of each step (a restarted run
logs the steps after its checkpoint again), within a relative TOLERANCE.

    compare_metrics.py EXPECTED.jsonl ACTUAL.jsonl TOLERANCE
"""
import json
import sys

expected_path, actual_path, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])


def steps(path):
    last = {}
    for line in open(path):
        record = json.loads(line)
        if "step" in record:
            last[record["step"]] = record
    return last


expected, actual = steps(expected_path), steps(actual_path)
worst = 0.0
for step, e in expected.items():
    a = actual.get(step)
    if a is None:
        print(f"step {step} is missing")
        sys.exit(1)
    for key in ("loss", "grad_norm"):
        worst = max(worst, abs(a[key] - e[key]) / abs(e[key]))
ok = len(actual) == len(expected) and worst <= tolerance
print(f"{len(actual)} steps, worst relative difference {worst:.1e}: {'ok' if ok else 'DIFFERENT'}")
