"""Each zcc --emit=report --format json against the ZeRO paper's mixed-precision
formulas: model states over the paper's (2 + 2 + 12 bytes a parameter, divided
by stage), and bytes sent per step over the paper's (2 Psi (N-1)/N elements of
the comm type at stages 0-2, 3 Psi at stage 3).

    paper_states.py REPORT.json ...
prints "stage S, N ranks: model states R of the paper's, bytes R of the paper's"
(3 decimals) per report.
"""
import json, sys

for path in sys.argv[1:]:
    r = json.load(open(path))
    states, comm = r["model_states"], r["communication"]
    print(f"stage {r['zero_stage']}, {r['world_size']} ranks: model states "
          f"{states['bytes'] / states['paper']:.3f} of the paper's, bytes "
          f"{comm['bytes_per_step'] / comm['paper']:.3f} of the paper's")
