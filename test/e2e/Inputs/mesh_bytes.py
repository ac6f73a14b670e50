"""Bytes a rank sends across nodes and inside a node, from zcc --emit=report
of a plain, an hpZ and a MiCS plan (in that order, one file): the plain plan's
collectives all span every rank (across nodes); a mesh plan's "by span" line
splits them.

    mesh_bytes.py REPORTS.txt
"""
import re, sys

text = open(sys.argv[1]).read()
totals = [float(m) for m in re.findall(r"communication per step\s+(\d+) B", text)]
spans = re.findall(r"by span: every rank (\d+) B, inside a group of \d+ (\d+) B, across the \d+ "
                   r"groups (\d+) B", text)
if len(totals) != 3 or len(spans) != 2:
    sys.exit(f"expected 3 reports, 2 with a mesh: {len(totals)}, {len(spans)}")
plain = totals[0]
print(f"plain: across nodes {plain:.0f} B")
for name, (world, inside, across) in zip(("hpZ", "MiCS"), spans):
    cross = float(world) + float(across)  # every-rank rings cross nodes too
    print(f"{name}: across nodes {cross:.0f} B = {cross / plain:.3f} of plain, inside a node "
          f"{float(inside):.0f} B")
