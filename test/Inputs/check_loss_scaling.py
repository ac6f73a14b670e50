"""Checks the fp16 loss scaling of a zrun train --metrics file.

    check_loss_scaling.py METRICS.jsonl --initial-scale S [--window 1000]
        [--hysteresis 2] [--consecutive] [--min-scale 1] [--batches N]
        [--applied-same-as OTHER.jsonl]

1. The loss_scale of every step is what DeepSpeed's DynamicLossScaler
   (update_scale) gives for the recorded overflows (re-derived here).
2. A skipped step does not advance the lr schedule: the next step has its lr.
3. With --batches N (the data cycles every N steps): when steps i .. i+N-1
   are all skipped, step i+N sees the same parameters and batch, so its loss
   is bit-identical to step i's (the skip left the model untouched).
4. With --applied-same-as: the applied steps are, field for field, the steps
   of OTHER (a run that never overflowed): the skipped steps left no trace.
Prints 'loss scaling matches DeepSpeed: K of N steps skipped, scale A -> B'.
"""
import argparse, json, sys

p = argparse.ArgumentParser()
p.add_argument("metrics")
p.add_argument("--initial-scale", type=float, required=True)
p.add_argument("--window", type=int, default=1000)
p.add_argument("--hysteresis", type=int, default=2)
p.add_argument("--consecutive", action="store_true")
p.add_argument("--min-scale", type=float, default=1.0)
p.add_argument("--batches", type=int)
p.add_argument("--applied-same-as")
a = p.parse_args()
rows = [json.loads(l) for l in open(a.metrics) if l.strip()]
errors = []

# 1. DeepSpeed's update_scale, transcribed.
scale, cur_hyst, last_overflow = a.initial_scale, a.hysteresis, -1
for it, row in enumerate(rows):
    if row["loss_scale"] != scale:
        errors.append(f"step {it}: loss_scale {row['loss_scale']}, DeepSpeed's would be {scale}")
    if row["skipped"]:
        if a.hysteresis == 1 or cur_hyst == 1:
            scale = max(scale / 2, a.min_scale)
        else:
            cur_hyst -= 1
        last_overflow = it
    else:
        if a.consecutive:
            cur_hyst = a.hysteresis
        if (it - last_overflow) % a.window == 0:
            if not a.consecutive:
                cur_hyst = a.hysteresis
            scale *= 2
        if row["grad_norm"] is None:
            errors.append(f"step {it}: applied with a non-finite gradient norm")

# 2. The schedule waits for applied steps.
for it in range(len(rows) - 1):
    if rows[it]["skipped"] and rows[it + 1]["lr"] != rows[it]["lr"]:
        errors.append(f"step {it + 1}: lr {rows[it + 1]['lr']} moved on after a skipped step "
                      f"(lr {rows[it]['lr']})")

# 3. Skipped steps leave the parameters untouched.
compared = 0
if a.batches:
    n = a.batches
    for it in range(len(rows) - n):
        if all(r["skipped"] for r in rows[it:it + n]):
            compared += 1
            if rows[it + n]["loss"] != rows[it]["loss"]:
                errors.append(f"step {it + n}: loss {rows[it + n]['loss']} != step {it}'s "
                              f"{rows[it]['loss']} on the same batch after only skipped steps")

# 4. The applied steps are those of a run without overflow.
if a.applied_same_as:
    other = [json.loads(l) for l in open(a.applied_same_as) if l.strip()]
    applied = [r for r in rows if not r["skipped"]]
    if len(applied) != len(other):
        errors.append(f"{len(applied)} applied steps, {a.applied_same_as} has {len(other)}")
    for k, (x, y) in enumerate(zip(applied, other)):
        for key in ("loss", "grad_norm", "lr", "loss_scale"):
            if x[key] != y[key]:
                errors.append(f"applied step {k}: {key} {x[key]} != {y[key]} in {a.applied_same_as}")

for e in errors[:20]:
    print(e)
if errors:
    sys.exit(1)
skipped = sum(r["skipped"] for r in rows)
print(f"unchanged-parameter checks: {compared}")
print(f"loss scaling matches DeepSpeed: {skipped} of {len(rows)} steps skipped, "
      f"scale {rows[0]['loss_scale']:.0f} -> {rows[-1]['loss_scale']:.0f}")
