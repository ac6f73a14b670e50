"""A tied-embedding language model with an odd vocabulary (4099), for zero-pad-gemms.

    odd_vocab_lm.py MODEL.onnx IDS.npy LABELS.npy
Gather(wte, ids) -> MatMul(h, wte^T) -> logits [2, 8, 4099]; 16 samples of
random ids, the labels their shift.
"""
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
V, D, B, T = 4099, 16, 2, 8
rng = np.random.default_rng(0)
W = (rng.standard_normal((V, D)) * 0.1).astype(np.float32)
nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["h"]),
         helper.make_node("Transpose", ["wte"], ["wt"], perm=[1, 0]),
         helper.make_node("MatMul", ["h", "wt"], ["logits"])]
g = helper.make_graph(nodes, "lm", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, T])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
                      [numpy_helper.from_array(W, "wte")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
onnx.save(m, sys.argv[1])
ids = rng.integers(0, V, (16, T)).astype(np.int64)
np.save(sys.argv[2], ids); np.save(sys.argv[3], np.roll(ids, -1, axis=1))
