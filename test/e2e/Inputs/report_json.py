"""report-json.test's checker: DeepSpeed's formulas from the ONNX model."""
import collections
import json
import os
import sys

import onnx

model, out = sys.argv[1], sys.argv[2]
m = onnx.load(model, load_external_data=False)
sizes = collections.defaultdict(int)
psi = 0
for init in m.graph.initializer:
    if init.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                              onnx.TensorProto.BFLOAT16):
        continue
    n = 1
    for d in init.dims:
        n *= d
    psi += n
    sizes[init.name.rsplit(".", 1)[0] if "." in init.name else ""] += n
L = max(sizes.values())


def ds(stage, n, offload=False):
    if stage in (1, 2):
        return ("2 Psi", 2 * psi) if offload else ("4 Psi + 16 Psi/N", 4 * psi + int(16 * psi / n))
    if offload:
        return "4 L + 2 Psi/N", 4 * L + int(2 * psi / n)
    return "4 L + 18 Psi/N", 4 * L + int(18 * psi / n)


for name, stage, n, off in (("z3.json", 3, 4, False), ("z2.json", 2, 2, False),
                            ("z3off.json", 3, 2, True)):
    r = json.load(open(os.path.join(out, name)))
    formula, want = ds(stage, n, off)
    got = r["model_states"]["deepspeed_estimator"]
    assert r["trainable_parameters"] == psi, (r["trainable_parameters"], psi)
    assert got["formula"] == formula and got["bytes"] == want, (got, formula, want)
    assert abs(got["zcc_over_deepspeed"] - r["model_states"]["bytes"] / want) < 1e-9
    print("%s: stage %d, N %d: deepspeed %s = %d (Psi %d, L %d) matches"
          % (name, stage, n, formula, want, psi, L))

e = json.load(open(os.path.join(out, "est.json")))
assert e["largest_layer_parameters"] == L and e["trainable_parameters"] == psi
rows = e["model_states"]
for row in rows:
    if row["formula"] != "deepspeed":
        continue
    for n in (1, 4):
        assert row["bytes_per_rank_by_world_size"][str(n)] == ds(row["stage"], n)[1], row
print("est.json: %d rows, deepspeed stage 1-3 at N 1 and 4 match" % len(rows))
