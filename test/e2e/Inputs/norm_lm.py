"""A language model of two norms on wide rows, for the CUDA norm kernels.

    norm_lm.py MODEL.onnx IDS.npy LABELS.npy WIDTH layer|rms
h0 = Gather(wte, ids); h1 = h0 + tanh(norm1(h0)); logits = norm2(h1) @ wte^T,
vocabulary 64, 2 x 256 positions a micro-batch; norm = LayerNormalization
(weight and bias) or PyTorch's exported RMSNorm chain (x * 1/sqrt(mean(x^2) +
eps) * w). The residual add's gradient folds into norm1's backward. Norm
weights around 1, biases around 0, not constant: every parameter gradient
is exercised. 16 samples of random ids, the labels their shift.
"""
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper

path, ids_path, labels_path, width, kind = sys.argv[1:6]
V, D, B, T = 64, int(width), 2, 256
rng = np.random.default_rng(0)
inits = {"wte": (rng.standard_normal((V, D)) / np.sqrt(D)).astype(np.float32)}
nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["h0"])]


def norm(x, out, n):
    w, b = f"w{n}", f"b{n}"
    inits[w] = (1 + 0.2 * rng.standard_normal(D)).astype(np.float32)
    if kind == "layer":
        inits[b] = (0.1 * rng.standard_normal(D)).astype(np.float32)
        nodes.append(helper.make_node("LayerNormalization", [x, w, b], [out], axis=-1, epsilon=1e-5))
        return
    # Constants as Constant nodes (a float initializer would be a trained weight).
    const = lambda name, a: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(a, name))
    nodes.extend([
        const(f"two{n}", np.array(2.0, np.float32)),
        const(f"eps{n}", np.array(1e-5, np.float32)),
        const(f"ax{n}", np.array([-1], np.int64)),
        helper.make_node("Pow", [x, f"two{n}"], [f"sq{n}"]),
        helper.make_node("ReduceMean", [f"sq{n}", f"ax{n}"], [f"ms{n}"], keepdims=1),
        helper.make_node("Add", [f"ms{n}", f"eps{n}"], [f"mse{n}"]),
        helper.make_node("Sqrt", [f"mse{n}"], [f"rms{n}"]),
        helper.make_node("Reciprocal", [f"rms{n}"], [f"inv{n}"]),
        helper.make_node("Mul", [x, f"inv{n}"], [f"xn{n}"]),
        helper.make_node("Mul", [w, f"xn{n}"], [out]),
    ])


norm("h0", "n1", 1)
nodes += [helper.make_node("Tanh", ["n1"], ["t1"]), helper.make_node("Add", ["h0", "t1"], ["h1"])]
norm("h1", "n2", 2)
nodes += [helper.make_node("Transpose", ["wte"], ["wt"], perm=[1, 0]),
          helper.make_node("MatMul", ["n2", "wt"], ["logits"])]
g = helper.make_graph(nodes, "norm_lm", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, T])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
                      [numpy_helper.from_array(a, n) for n, a in inits.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
onnx.save(m, path)
ids = rng.integers(0, V, (16, T)).astype(np.int64)
np.save(ids_path, ids)
np.save(labels_path, np.roll(ids, -1, axis=1))
