"""Checks that several --metrics files hold the same loss at every step
(bit for bit, or within a relative tolerance with --rtol).

    same_losses.py [--rtol R] A.jsonl B.jsonl ...
"""
import json, sys

args = sys.argv[1:]
rtol = None
if args[:1] == ["--rtol"]:
    rtol, args = float(args[1]), args[2:]
runs = [[json.loads(l)["loss"] for l in open(p) if l.strip()] for p in args]
if rtol is None:
    if any(r != runs[0] for r in runs):
        print("losses differ:", runs)
        sys.exit(1)
    print(f"identical losses in {len(runs)} runs of {len(runs[0])} steps")
else:
    worst = max(abs(a - b) / max(abs(b), 1e-30) for r in runs[1:] for a, b in zip(r, runs[0]))
    if any(len(r) != len(runs[0]) for r in runs) or not worst <= rtol:
        print(f"losses differ by {worst:.2e} relative (tolerance {rtol:g}):", runs)
        sys.exit(1)
    print(f"losses within {worst:.2e} relative in {len(runs)} runs of {len(runs[0])} steps")
