"""Compares a zrun train --metrics file with a PyTorch reference trajectory.

    check_trajectory.py METRICS.jsonl REFERENCES_JSON MODEL TRAJECTORY
        [--loss-rtol 1e-4] [--grad-norm-rtol 1e-3]
Every step's loss and grad_norm must be within the tolerances (relative).
Prints the worst errors and 'trajectory matches: N steps', or each failing
step (exit 1).
"""
import argparse, json, sys

p = argparse.ArgumentParser()
p.add_argument("metrics")
p.add_argument("references")
p.add_argument("model")
p.add_argument("trajectory")
p.add_argument("--loss-rtol", type=float, default=1e-4)
p.add_argument("--grad-norm-rtol", type=float, default=1e-3)
p.add_argument("--steps", type=int, help="compare only the first STEPS steps")
p.add_argument("--decreasing", action="store_true",
               help="also require the mean loss of the last 5 steps below that of the first 5")
a = p.parse_args()
ref = json.load(open(a.references))["models"][a.model]["trajectories"][a.trajectory]
if a.steps:
    ref = {k: v[: a.steps] for k, v in ref.items() if isinstance(v, list)}
rows = [json.loads(l) for l in open(a.metrics) if l.strip()]
if len(rows) != len(ref["loss"]):
    print(f"{len(rows)} steps in {a.metrics}, the reference has {len(ref['loss'])}")
    sys.exit(1)
bad, worst = 0, {"loss": 0.0, "grad_norm": 0.0}
for k, row in enumerate(rows):
    for key, tol in (("loss", a.loss_rtol), ("grad_norm", a.grad_norm_rtol)):
        want, got = ref[key][k], row[key]
        err = abs(got - want) / abs(want)
        worst[key] = max(worst[key], err)
        if not err <= tol:
            bad += 1
            print(f"step {k}: {key} {got:.9g} vs reference {want:.9g} (relative error {err:.3g} > {tol})")
print(f"worst relative error: loss {worst['loss']:.2e}, grad_norm {worst['grad_norm']:.2e}")
if a.decreasing:
    first = sum(r["loss"] for r in rows[:5]) / 5
    last = sum(r["loss"] for r in rows[-5:]) / 5
    print(f"mean loss of the first 5 steps {first:.4f}, of the last 5 {last:.4f}")
    if not last < first:
        print("the loss does not decrease")
        bad += 1
if bad:
    sys.exit(1)
print(f"trajectory matches: {len(rows)} steps")
