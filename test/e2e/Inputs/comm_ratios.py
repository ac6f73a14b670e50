"""Bytes per collective kind of one plan's report over another's (zcc
--emit=report's "communication per step" line): what --comm-dtype changes.

    comm_ratios.py BASE.report OTHER.report
prints "all-reduce R, reduce-scatter R, all-gather R, total R, gradient
reduction R" (OTHER / BASE, 3 decimals; "-" where BASE moves nothing of that
kind). The gradient reduction is the reduce-scatters and the all-to-alls
(qgZ's quantized gradients move through all-to-alls).
"""
import re, sys


def kinds(path):
    text = open(path).read()
    m = re.search(r"communication per step\s+(\d+) B\s+sent per rank \(ring\): all-reduce (\d+) B "
                  r"\(\d+ calls\), reduce-scatter (\d+) B \(\d+\), all-gather (\d+) B", text)
    if not m:
        sys.exit(f"{path}: no communication line")
    total, ar, rs, ag = (float(x) for x in m.groups())
    a2a = re.search(r"all-to-all (\d+) B", text)
    grads = rs + (float(a2a.group(1)) if a2a else 0)
    return {"all-reduce": ar, "reduce-scatter": rs, "all-gather": ag, "total": total,
            "gradient reduction": grads}


base, other = kinds(sys.argv[1]), kinds(sys.argv[2])
print(", ".join(f"{k} " + (f"{other[k] / base[k]:.3f}" if base[k] else "-") for k in base))
