"""Compares the 'loss: X' line on stdin with a PyTorch reference loss.

    check_loss.py REFERENCES_JSON MODEL [--trajectory plain] [--step 0] [--rtol 1e-5]
Prints 'loss matches step S of MODEL within RTOL (relative error E)' or the
mismatch (and exits 1).
"""
import argparse, json, re, sys

p = argparse.ArgumentParser()
p.add_argument("references")
p.add_argument("model")
p.add_argument("--trajectory", default="plain")
p.add_argument("--step", type=int, default=0)
p.add_argument("--rtol", type=float, default=1e-5)
a = p.parse_args()
ref = json.load(open(a.references))["models"][a.model]["trajectories"][a.trajectory]["loss"][a.step]
text = sys.stdin.read()
m = re.search(r"^loss: (\S+)$", text, re.M)
if not m:
    print("no 'loss:' line in:\n" + text)
    sys.exit(1)
got = float(m.group(1))
err = abs(got - ref) / abs(ref)
if not err <= a.rtol:
    print(f"loss {got} differs from the reference {ref} of step {a.step} by {err:.3g} (> {a.rtol})")
    sys.exit(1)
print(f"loss matches step {a.step} of {a.model} within {a.rtol} (relative error {err:.1e})")
