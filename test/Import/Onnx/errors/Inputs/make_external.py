"""Writes small ONNX models whose initializer lives in external data.

    make_external.py OUTDIR
Creates OUTDIR/ok.onnx (weights in OUTDIR/weights.bin, valid), and models
whose external data location is absolute, escapes the folder with '..', goes
through a symbolic link, is missing, or is too short.
"""
import os, sys
import numpy as np
import onnx
from onnx import helper, TensorProto

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
w = np.arange(12, dtype=np.float32).reshape(3, 4)
with open(os.path.join(out, "weights.bin"), "wb") as f:
    f.write(w.tobytes())
outside = os.path.join(os.path.dirname(os.path.abspath(out)), "outside.bin")
with open(outside, "wb") as f:
    f.write(w.tobytes())
link = os.path.join(out, "link.bin")
if os.path.lexists(link):
    os.remove(link)
os.symlink(outside, link)


def model(name, location, length=None):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([3, 4])
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "0"}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")
    g = helper.make_graph([node], "g", [x], [y], initializer=[t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


model("ok.onnx", "weights.bin")
model("absolute.onnx", outside)
model("escape.onnx", "../outside.bin")
model("symlink.onnx", "link.bin")
model("missing.onnx", "nothere.bin")
model("short.onnx", "weights.bin", length=4)
