"""Writes a small tanh MLP classifier (two layers, `layers.K.` names) with training-mode Dropout (as
torch.onnx.export writes one with model.train(): Dropout(x, ratio,
training_mode=True)), its data, and with --ratio 0 or --no-dropout the same
model with ratio 0 or without the node.

    dropout_mlp.py OUT.onnx OUT_PREFIX [--ratio R | --no-dropout]
Writes OUT.onnx, OUT_PREFIX.x.npy (64 x 32 float32), OUT_PREFIX.labels.npy.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, prefix = sys.argv[1], sys.argv[2]
ratio = 0.25
dropout = True
if "--ratio" in sys.argv:
    ratio = float(sys.argv[sys.argv.index("--ratio") + 1])
if "--no-dropout" in sys.argv:
    dropout = False

rng = np.random.default_rng(7)
w1 = (rng.standard_normal((32, 64)) * 0.2).astype(np.float32)
b1 = np.zeros(64, np.float32)
w3 = (rng.standard_normal((64, 64)) * 0.2).astype(np.float32)
w2 = (rng.standard_normal((64, 8)) * 0.2).astype(np.float32)
b2 = np.zeros(8, np.float32)
nodes = [
    helper.make_node("MatMul", ["x", "layers.0.w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "layers.0.b1"], ["h1"], name="fc1_bias"),
    helper.make_node("Tanh", ["h1"], ["h2"], name="tanh"),
]
inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "layers.0.w1"), (b1, "layers.0.b1"),
                                                   (w3, "layers.0.w3"), (w2, "layers.1.w2"),
                                                   (b2, "layers.1.b2"))]
if dropout:
    # Constants, as torch.onnx.export writes them.
    nodes += [
        helper.make_node("Constant", [], ["ratio"], name="ratio",
                         value=numpy_helper.from_array(np.array(ratio, np.float32))),
        helper.make_node("Constant", [], ["training_mode"], name="training_mode",
                         value=numpy_helper.from_array(np.array(True))),
    ]
    nodes.append(helper.make_node("Dropout", ["h2", "ratio", "training_mode"], ["h3"], name="drop"))
else:
    nodes.append(helper.make_node("Identity", ["h2"], ["h3"], name="drop"))
# The dropout is inside layer 0 (its output feeds the layer's second
# matmul): --recompute layer recomputes it in the backward.
nodes += [
    helper.make_node("MatMul", ["h3", "layers.0.w3"], ["h4"], name="fc3"),
    helper.make_node("Tanh", ["h4"], ["h5"], name="tanh2"),
    helper.make_node("MatMul", ["h5", "layers.1.w2"], ["o0"], name="fc2"),
    helper.make_node("Add", ["o0", "layers.1.b2"], ["logits"], name="fc2_bias"),
]
graph = helper.make_graph(
    nodes, "dropout_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 8])], inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)
np.save(prefix + ".x.npy", rng.standard_normal((64, 32)).astype(np.float32))
np.save(prefix + ".labels.npy", rng.integers(0, 8, 64).astype(np.int64))
