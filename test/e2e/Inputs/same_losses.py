"""Checks that several --metrics files hold the same loss at every step.

    same_losses.py A.jsonl B.jsonl ...
"""
import json, sys

runs = [[json.loads(l)["loss"] for l in open(p) if l.strip()] for p in sys.argv[1:]]
if any(r != runs[0] for r in runs):
    print("losses differ:", runs)
    sys.exit(1)
print(f"identical losses in {len(runs)} runs of {len(runs[0])} steps")
