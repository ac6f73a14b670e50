"""Checks that several --metrics files hold the same loss at every step
(bit for bit, or within a relative tolerance with --rtol); with --grad-norm,
the same gradient norm too (bit for bit, or within --rtol).

    same_losses.py [--grad-norm] [--rtol R] A.jsonl B.jsonl ...
"""
import json, sys

args = sys.argv[1:]
norms = args[:1] == ["--grad-norm"]
if norms:
    args = args[1:]
rtol = None
if args[:1] == ["--rtol"]:
    rtol, args = float(args[1]), args[2:]
runs = [[json.loads(l)["loss"] for l in open(p) if l.strip()] for p in args]
if rtol is None:
    if any(r != runs[0] for r in runs):
        print("losses differ:", runs)
        sys.exit(1)
    if norms:
        grads = [[json.loads(l)["grad_norm"] for l in open(p) if l.strip()] for p in args]
        if any(g != grads[0] for g in grads):
            print("grad norms differ:", grads)
            sys.exit(1)
        print(f"identical losses and grad norms in {len(runs)} runs of {len(runs[0])} steps")
    else:
        print(f"identical losses in {len(runs)} runs of {len(runs[0])} steps")
else:
    worst = max(abs(a - b) / max(abs(b), 1e-30) for r in runs[1:] for a, b in zip(r, runs[0]))
    if any(len(r) != len(runs[0]) for r in runs) or not worst <= rtol:
        print(f"losses differ by {worst:.2e} relative (tolerance {rtol:g}):", runs)
        sys.exit(1)
    if norms:
        grads = [[json.loads(l)["grad_norm"] for l in open(p) if l.strip()] for p in args]
        gworst = max(abs(a - b) / max(abs(b), 1e-30) for g in grads[1:] for a, b in zip(g, grads[0]))
        if not gworst <= rtol:
            print(f"grad norms differ by {gworst:.2e} relative (tolerance {rtol:g}):", grads)
            sys.exit(1)
        print(f"losses and grad norms within {max(worst, gworst):.2e} relative in {len(runs)} "
              f"runs of {len(runs[0])} steps")
    else:
        print(f"losses within {worst:.2e} relative in {len(runs)} runs of {len(runs[0])} steps")
