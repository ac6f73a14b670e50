"""A small convolutional classifier with two BatchNormalizations (issue 53),
its data, and NumPy's running statistics of the first, which normalizes the
input itself: they depend on the data only, so that they are exact after
any number of steps.

    batchnorm_model.py OUT.onnx DATA_PREFIX STEPS

writes OUT.onnx (eval-mode export, as torch.onnx.export of a model in
eval(): training_mode absent, the running statistics initializers),
DATA_PREFIX.x.npy [32, 3, 6, 6] and DATA_PREFIX.labels.npy, and
DATA_PREFIX.expected.json: bn1's running mean and variance after STEPS
steps of 8 samples in stream order, each as PyTorch updates them
(momentum 0.1, the unbiased batch variance):
  - "w1": one rank with micro-batch 8;
  - "w2_rank0": rank 0 of 2 with micro-batch 4, the first half of each
    global batch (its own statistics);
  - "sync": the 8 samples' statistics, which every rank of SyncBatchNorm
    holds (the same as "w1");
  - "accum2": one rank, micro-batch 4, 2 micro-steps a step (PyTorch
    updates at every forward: twice a step).
"""
import json, sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, prefix, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(53)
C, K = 3, 4
x = (rng.standard_normal((32, C, 6, 6)) * np.array([1.0, 2.0, 0.5])[None, :, None, None]
     + np.array([0.5, -1.0, 2.0])[None, :, None, None]).astype(np.float32)
labels = rng.integers(0, 5, 32).astype(np.int64)
np.save(prefix + ".x.npy", x)
np.save(prefix + ".labels.npy", labels)

inits = {
    "bn1.weight": np.ones(C, np.float32), "bn1.bias": np.zeros(C, np.float32),
    "bn1.running_mean": np.array([0.1, 0.2, -0.3], np.float32),
    "bn1.running_var": np.array([1.0, 1.5, 0.5], np.float32),
    "conv.weight": (rng.standard_normal((K, C, 3, 3)) * 0.3).astype(np.float32),
    "bn2.weight": (1 + 0.1 * rng.standard_normal(K)).astype(np.float32),
    "bn2.bias": (0.1 * rng.standard_normal(K)).astype(np.float32),
    "bn2.running_mean": np.zeros(K, np.float32), "bn2.running_var": np.ones(K, np.float32),
    "fc.weight": (rng.standard_normal((5, K)) * 0.5).astype(np.float32),
    "fc.bias": np.zeros(5, np.float32),
}
nodes = [
    helper.make_node("BatchNormalization", ["x", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                            "bn1.running_var"], ["h0"], name="bn1",
                     momentum=0.9),
    helper.make_node("Conv", ["h0", "conv.weight"], ["h1"], name="conv", pads=[1, 1, 1, 1],
                     strides=[2, 2]),
    helper.make_node("BatchNormalization", ["h1", "bn2.weight", "bn2.bias", "bn2.running_mean",
                                            "bn2.running_var"], ["h2"], name="bn2",
                     momentum=0.9),
    helper.make_node("Relu", ["h2"], ["h3"], name="relu"),
    helper.make_node("GlobalAveragePool", ["h3"], ["h4"], name="pool"),
    helper.make_node("Flatten", ["h4"], ["h5"], name="flat"),
    helper.make_node("Gemm", ["h5", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
]
g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                  ["batch", C, 6, 6])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 5])],
                      initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out)


def running(batches):
    mean = inits["bn1.running_mean"].astype(np.float64)
    var = inits["bn1.running_var"].astype(np.float64)
    for b in batches:
        b = b.astype(np.float64)
        n = b.size // C
        mean = 0.9 * mean + 0.1 * b.mean((0, 2, 3))
        var = 0.9 * var + 0.1 * b.var((0, 2, 3)) * n / (n - 1)
    return {"mean": mean.tolist(), "var": var.tolist()}


glob = [x[(8 * s) % 32:(8 * s) % 32 + 8] for s in range(steps)]
json.dump({"w1": running(glob), "w2_rank0": running([b[:4] for b in glob]),
           "sync": running(glob),
           "accum2": running([h for b in glob for h in (b[:4], b[4:])])}, open(prefix + ".expected.json", "w"), indent=1)
