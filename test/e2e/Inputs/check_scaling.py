"""Checks zcc's scaling model (--emit=report --link ...) against the report's
own figures: the communication time is every collective's bytes over the
link's bandwidth plus a latency per ring hop (hops from the collectives'
kinds and counts), the compute time the matmul FLOPs over the rate, the step
compute plus exposed communication, and the exposed part between 0 and all.

  check_scaling.py REPORT --world W --gpus-per-node G --nvlink GBPS --ib GBPS
                   --hop US --tflops R [--exposed all|part] [--estimate FILE]

With --estimate, `zcc estimate --link ...`'s row for W must show the same
compute, communication, exposed and step times as the report.
"""
import argparse
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("report")
p.add_argument("--world", type=int, required=True)
p.add_argument("--gpus-per-node", type=int, required=True)
p.add_argument("--nvlink", type=float, required=True)
p.add_argument("--ib", type=float, required=True)
p.add_argument("--hop", type=float, required=True)
p.add_argument("--tflops", type=float, required=True)
p.add_argument("--exposed", choices=["all", "part"], required=True)
p.add_argument("--estimate")
a = p.parse_args()
text = open(a.report).read()

comm = re.search(r"communication per step\s+(\d+) B .*all-reduce (\d+) B \((\d+) calls\), "
                 r"reduce-scatter (\d+) B \((\d+)\), all-gather (\d+) B \((\d+)\)", text)
flops = float(re.search(r"matmul FLOPs per step\s+(\S+)", text).group(1))
model = re.search(r"scaling model\s+step\s+(\S+) ms = compute (\S+) ms \+ exposed communication "
                  r"(\S+) ms \(of (\S+) ms\)", text)
if not comm or not model:
    sys.exit("check_scaling: the report lacks the communication or scaling-model line")
total = int(comm.group(1))
calls = [int(comm.group(i)) for i in (3, 5, 7)]
step, compute, exposed, all_comm = (float(x) for x in model.groups())

n = a.world
nodes = -(-n // a.gpus_per_node)
bandwidth = (a.ib if nodes > 1 else a.nvlink) * 1e9
hops = (2 * calls[0] + calls[1] + calls[2]) * (n - 1)
want_comm = (total / bandwidth + hops * a.hop * 1e-6) * 1e3
want_compute = flops / (a.tflops * 1e12) * 1e3
errors = []
def close(name, got, want, terms=1):
    # the report prints two decimals (ms) and four significant digits (FLOPs);
    # a sum of |terms| printed values carries each one's rounding
    if abs(got - want) > 0.005 * terms + 0.001 + 1e-3 * abs(want):
        errors.append(f"{name}: report {got} ms, expected {want:.4f} ms")
close("communication", all_comm, want_comm)
close("compute", compute, want_compute)
close("step = compute + exposed", step, compute + exposed)
if not (-0.006 <= exposed <= all_comm + 0.006):
    errors.append(f"exposed {exposed} ms outside [0, {all_comm}]")
if a.exposed == "all":
    close("exposed (nothing overlaps)", exposed, all_comm)
elif not exposed < all_comm - 0.01:
    errors.append(f"exposed {exposed} ms: expected part of {all_comm} ms hidden behind compute")
kinds = re.search(r"by collective \(exposed of all\): all-reduce (\S+) of (\S+) ms, "
                  r"reduce-scatter (\S+) of (\S+) ms, all-gather (\S+) of (\S+) ms", text)
if not kinds:
    errors.append("no 'by collective' line")
else:
    v = [float(x) for x in kinds.groups()]
    for i, name in enumerate(["all-reduce", "reduce-scatter", "all-gather"]):
        sent = int(comm.group(2 + 2 * i))
        per_hop = (2 if i == 0 else 1) * (n - 1)
        close(name, v[2 * i + 1], (sent / bandwidth + calls[i] * per_hop * a.hop * 1e-6) * 1e3)
        if not (-0.006 <= v[2 * i] <= v[2 * i + 1] + 0.006):
            errors.append(f"{name}: exposed {v[2 * i]} outside [0, {v[2 * i + 1]}]")
    close("exposed by kind, summed", v[0] + v[2] + v[4], exposed, terms=4)
link = "the inter-node link" if nodes > 1 else "NVLink"
if f"on {nodes} node" not in text or link not in text:
    errors.append(f"the assumptions line does not say {nodes} node(s) and {link}")
if a.estimate:
    rows = {int(m.group(1)): [float(x) for x in m.groups()[2:6]] for m in re.finditer(
        r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+%$",
        open(a.estimate).read(), re.M)}
    if n not in rows:
        errors.append(f"zcc estimate has no row for W = {n}")
    elif rows[n] != [compute, all_comm, exposed, step]:
        errors.append(f"zcc estimate's W = {n} row {rows[n]} differs from the report's "
                      f"{[compute, all_comm, exposed, step]}")
if errors:
    sys.exit("check_scaling: " + "; ".join(errors))
print(f"check_scaling: ok: W = {n}, {nodes} node(s), {hops} hops, communication {all_comm} ms, "
      f"exposed {exposed} ms, compute {compute} ms")
