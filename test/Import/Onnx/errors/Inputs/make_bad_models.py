"""Writes ONNX models with unsupported ops (named nodes, as exporters write them).

    make_bad_models.py OUTDIR
"""
import os, sys
import onnx
from onnx import helper, TensorProto

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, opsets):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    g = helper.make_graph(nodes, "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


save("unknown-op.onnx",
     [helper.make_node("Relu", ["x"], ["t"], name="node_relu"),
      helper.make_node("FancyOp", ["t"], ["y"], name="node_fancy")],
     [("", 18)])
save("custom-domain.onnx",
     [helper.make_node("FusedMatMul", ["x", "x"], ["y"], name="fused", domain="com.microsoft")],
     [("", 18), ("com.microsoft", 1)])
