"""Bytes per collective kind of one plan's report over another's (zcc
--emit=report's "communication per step" line): what --comm-dtype changes.

    comm_ratios.py BASE.report OTHER.report
prints "all-reduce R, reduce-scatter R, all-gather R, total R" (OTHER / BASE,
3 decimals; "-" where BASE moves nothing of that kind).
"""
import re, sys


def kinds(path):
    text = open(path).read()
    m = re.search(r"communication per step\s+(\d+) B\s+sent per rank \(ring\): all-reduce (\d+) B "
                  r"\(\d+ calls\), reduce-scatter (\d+) B \(\d+\), all-gather (\d+) B", text)
    if not m:
        sys.exit(f"{path}: no communication line")
    total, ar, rs, ag = (float(x) for x in m.groups())
    return {"all-reduce": ar, "reduce-scatter": rs, "all-gather": ag, "total": total}


base, other = kinds(sys.argv[1]), kinds(sys.argv[2])
print(", ".join(f"{k} " + (f"{other[k] / base[k]:.3f}" if base[k] else "-") for k in base))
