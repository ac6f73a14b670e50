"""A small model with an export record (metadata 'zcc.parameters', as
tools/zcc-export writes it): y = (x @ w) * inv_freq, where w is a parameter
and inv_freq a buffer.

    record_model.py OUT.onnx [RECORD]   (RECORD: the metadata value verbatim;
                                         'none' writes no record)
"""
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper

out, record = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else '["w"]'
nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Mul", ["h", "inv_freq"], ["y"])]
g = helper.make_graph(nodes, "record", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 3])],
                      [numpy_helper.from_array(np.ones((4, 3), np.float32), "w"),
                       numpy_helper.from_array(np.full(3, 0.5, np.float32), "inv_freq")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
if record != "none":
    m.metadata_props.add(key="zcc.parameters", value=record)
onnx.save(m, out)
