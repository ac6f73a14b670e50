"""A model whose loss is linear in its parameter: loss = sum(w * R) + sum(x).

    make_linear.py OUTDIR   (writes linear.onnx, x.npy, R.npy, w.npy)
"""
import os, sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(3)
w, R = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
nodes = [helper.make_node("Mul", ["w", "R"], ["wr"]),
         helper.make_node("ReduceSum", ["wr"], ["s"], keepdims=0),
         helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
         helper.make_node("Add", ["s", "sx"], ["loss"])]
g = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                      [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                      initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(R, "R")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "linear.onnx"))
np.save(os.path.join(out, "x.npy"), np.zeros((1, 1), np.float32))
np.save(os.path.join(out, "w.npy"), w)
np.save(os.path.join(out, "R.npy"), R)
