"""Writes a small image classifier through the ops the importer builds from
other ops (Conv as patches, GroupNorm, BatchNorm with fixed statistics,
Einsum, Softplus, Clip, Pad, Tile, CumSum, OneHot, TopK), with
data, for a gradient check of their compositions.

    ops_model.py OUT.onnx OUT_PREFIX
Writes OUT.onnx, OUT_PREFIX.x.npy (16 images 3x8x8), OUT_PREFIX.k.npy (16
class hints), OUT_PREFIX.labels.npy.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, prefix = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)


def param(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, value):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value))


nodes = [
    # [B, 3, 8, 8] -> [B, 6, 2, 2] -> [B, 6, 4]
    helper.make_node("Conv", ["x", "patch.weight", "patch.bias"], ["p"], name="patch",
                     strides=[4, 4], kernel_shape=[4, 4]),
    # A residual branch through GroupNorm (3 groups of 2 channels) and
    # BatchNorm with fixed statistics (the identity path keeps the patch
    # weights' gradient large enough for float32 finite differences).
    helper.make_node("GroupNormalization", ["p", "gn.weight", "gn.bias"], ["pg"], name="gn",
                     num_groups=3),
    helper.make_node("BatchNormalization", ["pg", "bn.weight", "bn.bias", "bn.running_mean",
                                            "bn.running_var"], ["pn"], name="bn"),
    helper.make_node("Add", ["p", "pn"], ["pb"], name="residual"),
    const("shape", np.array([0, 6, 4], np.int64)),
    helper.make_node("Reshape", ["pb", "shape"], ["p3"], name="flat"),
    # [B, 6, 4] x [6, 5] -> [B, 4, 5]
    helper.make_node("Einsum", ["p3", "mix.weight"], ["m"], name="mix", equation="bcp,cd->bpd"),
    helper.make_node("Softplus", ["m"], ["s"], name="softplus"),
    const("lo", np.array(-1.0, np.float32)),
    const("hi", np.array(4.0, np.float32)),
    helper.make_node("Clip", ["s", "lo", "hi"], ["c"], name="clip"),
    # [B, 4, 5] -> [B, 4, 6] -> [B, 4, 12] -> [B, 12]
    const("pads", np.array([0, 0, 0, 0, 0, 1], np.int64)),
    helper.make_node("Pad", ["c", "pads"], ["pd"], name="pad"),
    const("reps", np.array([1, 1, 2], np.int64)),
    helper.make_node("Tile", ["pd", "reps"], ["t"], name="tile"),
    const("axes", np.array([1], np.int64)),
    helper.make_node("ReduceMean", ["t", "axes"], ["r"], name="pool", keepdims=0),
    helper.make_node("MatMul", ["r", "head.weight"], ["h0"], name="head"),
    const("cs_axis", np.array(1, np.int64)),
    helper.make_node("CumSum", ["h0", "cs_axis"], ["h"], name="cumsum", reverse=1),
    # + OneHot(k) with trainable [off, on] values
    const("depth", np.array(4, np.int64)),
    helper.make_node("OneHot", ["k", "depth", "hint.values"], ["oh"], name="hint"),
    helper.make_node("Add", ["h", "oh"], ["ho"], name="hinted"),
    # + the 4 largest of 6 gate scores (a router's TopK; the gradient goes to
    # the selected scores)
    helper.make_node("MatMul", ["r", "gate.weight"], ["g"], name="gate"),
    const("topk", np.array([4], np.int64)),
    helper.make_node("TopK", ["g", "topk"], ["gv", "gi"], name="route"),
    helper.make_node("Add", ["ho", "gv"], ["logits"], name="logits"),
]
inits = [param("patch.weight", 6, 3, 4, 4), param("patch.bias", 6), param("mix.weight", 6, 5),
         param("head.weight", 12, 4), param("hint.values", 2), param("gate.weight", 12, 6),
         param("gn.weight", 6),
         param("gn.bias", 6), param("bn.weight", 6), param("bn.bias", 6),
         param("bn.running_mean", 6, scale=0.1),
         numpy_helper.from_array(rng.uniform(0.5, 2.0, 6).astype(np.float32), "bn.running_var")]
graph = helper.make_graph(
    nodes, "ops_model",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8]),
     helper.make_tensor_value_info("k", TensorProto.INT64, ["batch"])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])], inits)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), out)
np.save(prefix + ".x.npy", rng.standard_normal((16, 3, 8, 8)).astype(np.float32))
np.save(prefix + ".k.npy", rng.integers(0, 4, 16).astype(np.int64))
np.save(prefix + ".labels.npy", rng.integers(0, 4, 16).astype(np.int64))
