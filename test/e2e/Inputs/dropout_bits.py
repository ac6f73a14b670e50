"""Writes a model whose trained weights are the dropout masks: loss = sum(Dropout(x) * w) with w
[4096] a parameter, trained by SGD (lr 1, no weight decay) one sample per step, so that w after K
steps is 1 - the sum of the K masked, scaled samples, elementwise: backends (or runs) whose weights
are bit-identical drew bit-identical masks.

    dropout_bits.py OUT.onnx OUT_PREFIX     (writes OUT_PREFIX.x.npy: 16 x 4096 float32)
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, prefix = sys.argv[1], sys.argv[2]
n = 4096
nodes = [
    helper.make_node("Constant", [], ["ratio"], value=numpy_helper.from_array(np.array(0.1, np.float32))),
    helper.make_node("Constant", [], ["training_mode"], value=numpy_helper.from_array(np.array(True))),
    helper.make_node("Dropout", ["x", "ratio", "training_mode"], ["d"], name="drop"),
    helper.make_node("Mul", ["d", "w"], ["y"], name="weigh"),
    helper.make_node("ReduceSum", ["y"], ["loss"], name="sum", keepdims=0),
]
graph = helper.make_graph(
    nodes, "dropout_bits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.ones(n, np.float32), "w")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)
np.save(prefix + ".x.npy", np.random.default_rng(3).standard_normal((16, n)).astype(np.float32))
