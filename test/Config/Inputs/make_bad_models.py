"""Models the ONNX exporters never write, that a hostile file can hold.

    make_bad_models.py OUTDIR
writes
    bad-utf8.onnx   an initializer whose name is not UTF-8 (protobuf's
                    Python API refuses to write one: the bytes are patched)
    neg-dims.onnx   an external-data initializer with a negative dimension
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]


def model(initializer, name_in_graph):
    nodes = [helper.make_node("MatMul", ["x", name_in_graph], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          initializer=[initializer])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


placeholder = "WEIGHTPLACEHOLDER"
w = numpy_helper.from_array(np.ones((4, 4), np.float32), placeholder)
data = model(w, placeholder).SerializeToString()
bad = b"W\xff\xfe" + placeholder.encode()[3:]  # same length: the framing holds
with open(os.path.join(out, "bad-utf8.onnx"), "wb") as f:
    f.write(data.replace(placeholder.encode(), bad))

t = TensorProto()
t.name = "w"
t.data_type = TensorProto.FLOAT
t.dims.extend([-5, 4])
t.data_location = TensorProto.EXTERNAL
for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "64")):
    e = t.external_data.add()
    e.key, e.value = k, v
with open(os.path.join(out, "w.bin"), "wb") as f:
    f.write(bytes(64))
with open(os.path.join(out, "neg-dims.onnx"), "wb") as f:
    f.write(model(t, "w").SerializeToString())
