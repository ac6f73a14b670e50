"""Finite-difference checks of every gradient rule of zero-autodiff.

    gradcheck_cases.py ZCC ZRUN WORKDIR
Each case is a tiny ONNX model whose parameters (float initializers, hence
trainable) feed one op; the loss is sum(op(...) * R) for a fixed random R (plus
the sum of a dummy data input). zcc builds the training step, and
`zrun gradcheck` compares micro_step's gradient of every parameter with the
central difference of the eval loss along a random direction. Inputs stay away
from kinks (relu at 0, ties of max/min). Prints one line per case and a summary.
"""
import os, subprocess, sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

zcc, zrun, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(1)
F = TensorProto.FLOAT


def r(*shape, lo=-1.5, hi=1.5):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def away(a, eps=0.05):
    """Moves values away from 0 (kinks of relu/abs)."""
    return np.where(np.abs(a) < eps, np.sign(a + 1e-9) * eps * 2, a).astype(np.float32)


def case(name, nodes, params, out_shape, consts=(), opset=18, extra=()):
    """nodes produce 'y'; params: (name, array) trainable; consts: (name, array)."""
    R = r(*out_shape)
    nodes = list(nodes) + [
        helper.make_node("Mul", ["y", "R"], ["yr"]),
        helper.make_node("ReduceSum", ["yr"], ["s"], keepdims=0),
        helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
        helper.make_node("Add", ["s", "sx"], ["loss"]),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in list(params) + list(consts)]
    inits.append(numpy_helper.from_array(R, "R"))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", F, [1, 1])],
                          [helper.make_tensor_value_info("loss", F, [])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "m.onnx"))
    np.save(os.path.join(d, "x.npy"), np.zeros((1, 1), np.float32))
    # R is a float initializer too: freeze it; so are the constants.
    frozen = "^(R|" + "|".join(n for n, _ in consts) + ")$" if consts else "^R$"
    p = subprocess.run([zcc, os.path.join(d, "m.onnx"), "--frozen", frozen, "-o",
                        os.path.join(d, "m.zplan")] + list(extra), capture_output=True, text=True)
    if p.returncode:
        return name, "zcc failed: " + p.stderr.strip()[:300]
    p = subprocess.run([zrun, "gradcheck", os.path.join(d, "m.zplan"), "--data",
                        "x=" + os.path.join(d, "x.npy"), "--epsilon", "1e-2", "--tolerance", "2e-3"],
                       capture_output=True, text=True)
    if p.returncode:
        return name, (p.stdout + p.stderr).strip()[-600:]
    return name, None


def n(op, ins, **attrs):
    return helper.make_node(op, ins, ["y"], **attrs)


def case_cross_entropy():
    """logits (a parameter) -> --loss cross-entropy against labels, one ignored."""
    name = "cross_entropy"
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    logits = r(2, 3, 5)
    g = helper.make_graph([helper.make_node("Add", ["w", "x"], ["logits"])], name,
                          [helper.make_tensor_value_info("x", F, [2, 1, 1])],
                          [helper.make_tensor_value_info("logits", F, [2, 3, 5])],
                          initializer=[numpy_helper.from_array(logits, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "m.onnx"))
    np.save(os.path.join(d, "x.npy"), np.zeros((2, 1, 1), np.float32))
    np.save(os.path.join(d, "labels.npy"), np.array([[1, 4, -100], [0, 2, 3]], np.int64))
    p = subprocess.run([zcc, os.path.join(d, "m.onnx"), "--loss", "cross-entropy", "-o",
                        os.path.join(d, "m.zplan")], capture_output=True, text=True)
    if p.returncode:
        return name, "zcc failed: " + p.stderr.strip()[:300]
    p = subprocess.run([zrun, "gradcheck", os.path.join(d, "m.zplan"), "--data",
                        "x=" + os.path.join(d, "x.npy"), "--data",
                        "labels=" + os.path.join(d, "labels.npy"), "--epsilon", "1e-2",
                        "--tolerance", "2e-3"], capture_output=True, text=True)
    return name, None if p.returncode == 0 else (p.stdout + p.stderr).strip()[-600:]


A, B, C = r(3, 4), r(4), r(3, 1)
P = r(3, 4, lo=0.3, hi=2.0)  # positive: log, sqrt, pow, reciprocal
cases = [
    case("add", [n("Add", ["a", "b"])], [("a", A), ("b", B)], (3, 4)),
    case("sub", [n("Sub", ["a", "c"])], [("a", A), ("c", C)], (3, 4)),
    case("mul", [n("Mul", ["a", "b"])], [("a", A), ("b", B)], (3, 4)),
    case("div", [n("Div", ["a", "p"])], [("a", A), ("p", P)], (3, 4)),
    case("pow", [n("Pow", ["p", "e"])], [("p", P), ("e", r(4, lo=0.5, hi=2.0))], (3, 4)),
    case("max", [n("Max", ["a", "b"])], [("a", A), ("b", A + 0.3 * np.sign(r(3, 4)))], (3, 4)),
    case("min", [n("Min", ["a", "b"])], [("a", A), ("b", A - 0.3 * np.sign(r(3, 4)))], (3, 4)),
    case("where", [n("Where", ["m", "a", "c"])], [("a", A), ("c", C)], (3, 4),
         consts=[("m", rng.random((3, 4)) > 0.5)]),
    case("neg", [n("Neg", ["a"])], [("a", A)], (3, 4)),
    case("abs", [n("Abs", ["a"])], [("a", away(A))], (3, 4)),
    case("exp", [n("Exp", ["a"])], [("a", A)], (3, 4)),
    case("log", [n("Log", ["p"])], [("p", P)], (3, 4)),
    case("sqrt", [n("Sqrt", ["p"])], [("p", P)], (3, 4)),
    case("reciprocal", [n("Reciprocal", ["p"])], [("p", P)], (3, 4)),
    case("tanh", [n("Tanh", ["a"])], [("a", A)], (3, 4)),
    case("erf", [n("Erf", ["a"])], [("a", A)], (3, 4)),
    case("sigmoid", [n("Sigmoid", ["a"])], [("a", A)], (3, 4)),
    case("relu", [n("Relu", ["a"])], [("a", away(A))], (3, 4)),
    case("cos", [n("Cos", ["a"])], [("a", A)], (3, 4)),
    case("sin", [n("Sin", ["a"])], [("a", A)], (3, 4)),
    case("gelu", [n("Gelu", ["a"])], [("a", A)], (3, 4), opset=20),
    case("gelu_tanh", [n("Gelu", ["a"], approximate="tanh")], [("a", A)], (3, 4), opset=20),
    case("silu", [helper.make_node("Sigmoid", ["a"], ["s"]), n("Mul", ["a", "s"])], [("a", A)], (3, 4)),
    case("cast", [n("Cast", ["a"], to=TensorProto.FLOAT)], [("a", A)], (3, 4)),
    case("reshape", [n("Reshape", ["a", "s"])], [("a", A)], (2, 6), consts=[("s", np.array([2, 6], np.int64))]),
    case("transpose", [n("Transpose", ["a"], perm=[1, 0])], [("a", A)], (4, 3)),
    case("expand", [n("Expand", ["c", "s"])], [("c", C)], (2, 3, 4), consts=[("s", np.array([2, 3, 4], np.int64))]),
    case("slice", [n("Slice", ["a", "st", "en", "ax", "sp"])], [("a", A)], (3, 2),
         consts=[("st", np.array([1], np.int64)), ("en", np.array([4], np.int64)),
                 ("ax", np.array([1], np.int64)), ("sp", np.array([2], np.int64))]),
    case("concat", [n("Concat", ["a", "c"], axis=1)], [("a", A), ("c", C)], (3, 5)),
    case("split", [helper.make_node("Split", ["a", "sz"], ["u", "v"], axis=1), n("Mul", ["u", "v"])],
         [("a", A)], (3, 2), consts=[("sz", np.array([2, 2], np.int64))]),
    case("gather", [n("Gather", ["w", "i"])], [("w", A)], (2, 2, 4),
         consts=[("i", np.array([[2, 0], [2, 1]], np.int64))]),
    case("matmul", [n("MatMul", ["a", "w"])], [("a", r(2, 3, 4)), ("w", r(4, 5))], (2, 3, 5)),
    case("matmul_batch", [n("MatMul", ["a", "w"])], [("a", r(2, 3, 4)), ("w", r(1, 4, 5))], (2, 3, 5)),
    case("gemm", [n("Gemm", ["a", "w", "b"], transA=1, transB=1, alpha=0.5, beta=2.0)],
         [("a", r(4, 3)), ("w", r(5, 4)), ("b", r(5))], (3, 5)),
    case("reduce_sum", [n("ReduceSum", ["a", "ax"], keepdims=0)], [("a", A)], (3,),
         consts=[("ax", np.array([1], np.int64))]),
    case("reduce_mean", [n("ReduceMean", ["a", "ax"], keepdims=1)], [("a", r(2, 3, 4))], (1, 3, 1),
         consts=[("ax", np.array([0, 2], np.int64))]),
    case("softmax", [n("Softmax", ["a"], axis=0)], [("a", A)], (3, 4)),
    case("log_softmax", [n("LogSoftmax", ["a"])], [("a", A)], (3, 4)),
    # Attention's masked softmax (zero-recognize-patterns: bias_softmax), the
    # mask trainable here so that its gradient (summed over the broadcast
    # rows) is checked too; the NaN guard as PyTorch's SDPA export writes it.
    case("bias_softmax", [helper.make_node("Add", ["a", "mb"], ["z"]),
                          helper.make_node("Softmax", ["z"], ["p"], axis=-1),
                          helper.make_node("IsNaN", ["p"], ["nan"]),
                          helper.make_node("Constant", [], ["zf"],
                                           value=numpy_helper.from_array(np.zeros((), np.float32))),
                          n("Where", ["nan", "zf", "p"])],
         [("a", A), ("mb", r(4))], (3, 4)),
    case("layer_norm", [n("LayerNormalization", ["a", "g", "b"], epsilon=1e-5)],
         [("a", A), ("g", r(4)), ("b", B)], (3, 4)),
    case("rms_norm", [helper.make_node("Constant", [], ["two"], value_float=2.0),
                      helper.make_node("Constant", [], ["eps"], value_float=1e-6),
                      helper.make_node("Pow", ["a", "two"], ["sq"]),
                      helper.make_node("ReduceMean", ["sq", "ax"], ["ms"], keepdims=1),
                      helper.make_node("Add", ["ms", "eps"], ["mse"]),
                      helper.make_node("Sqrt", ["mse"], ["rt"]),
                      helper.make_node("Reciprocal", ["rt"], ["inv"]),
                      helper.make_node("Mul", ["a", "inv"], ["xn"]),
                      n("Mul", ["g", "xn"])],
         [("a", A), ("g", r(4))], (3, 4),
         consts=[("ax", np.array([-1], np.int64))]),
    case_cross_entropy(),
    # General convolution (issue 53), input, filters and bias: the gradients of
    # its taps' slices, concatenated padding and GEMMs.
    case("conv2d_stride_pad_groups", [n("Conv", ["a", "w", "b"], strides=[2, 1], pads=[1, 0, 1, 2],
                                        dilations=[1, 2], group=2)],
         [("a", r(2, 4, 5, 6)), ("w", r(6, 2, 3, 3)), ("b", r(6))], (2, 6, 3, 4)),
    case("conv2d_depthwise", [n("Conv", ["a", "w"], pads=[1, 1, 1, 1], group=3)],
         [("a", r(1, 3, 4, 4)), ("w", r(3, 1, 3, 3))], (1, 3, 4, 4)),
    case("conv1d", [n("Conv", ["a", "w", "b"], strides=[2], pads=[1, 1])],
         [("a", r(2, 3, 9)), ("w", r(4, 3, 3)), ("b", r(4))], (2, 4, 5)),
    case("conv_transpose", [n("ConvTranspose", ["a", "w", "b"], strides=[2, 2], pads=[1, 0, 1, 1],
                              output_padding=[1, 0], group=2)],
         [("a", r(1, 4, 3, 3)), ("w", r(4, 2, 3, 2)), ("b", r(4))], (1, 4, 6, 5)),
    case("maxpool", [n("MaxPool", ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
         # distinct values 0.1 apart: no tie within the finite difference's step
         [("a", (rng.permutation(60) * 0.1 - 3.0).astype(np.float32).reshape(1, 2, 5, 6))],
         (1, 2, 3, 3)),
    case("avgpool_ceil", [n("AveragePool", ["a"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 0, 0], ceil_mode=1)],
         [("a", r(1, 2, 6, 6))], (1, 2, 3, 3)),
    case("global_avgpool", [n("GlobalAveragePool", ["a"])], [("a", r(2, 3, 4, 5))], (2, 3, 1, 1)),
    # Resize (bilinear, align_corners False) and Pad's reflect: gathers at
    # constant positions; InstanceNormalization; BatchNormalization training
    # (the batch's statistics; its running ones, frozen buffers, are updated).
    case("resize_bilinear", [n("Resize", ["a", "", "", "sz"], mode="linear",
                               coordinate_transformation_mode="pytorch_half_pixel")],
         [("a", r(1, 2, 3, 4))], (1, 2, 5, 7), consts=[("sz", np.array([1, 2, 5, 7], np.int64))]),
    case("pad_reflect", [n("Pad", ["a", "pads"], mode="reflect")], [("a", r(1, 2, 3, 4))],
         (1, 2, 5, 7), consts=[("pads", np.array([0, 0, 1, 2, 0, 0, 1, 1], np.int64))]),
    case("instance_norm", [n("InstanceNormalization", ["a", "s", "b"])],
         [("a", r(2, 3, 4, 5)), ("s", r(3)), ("b", r(3))], (2, 3, 4, 5)),
    case("batch_norm_train", [n("BatchNormalization", ["a", "s", "b", "m", "v"])],
         [("a", r(3, 2, 4, 5)), ("s", r(2)), ("b", r(2))], (3, 2, 4, 5),
         consts=[("m", r(2)), ("v", np.ones(2, np.float32))]),
]
failed = [(n_, e) for n_, e in cases if e]
for n_, e in cases:
    print(("ok   " if not e else "FAIL ") + n_ + ("" if not e else ": " + e))
print(f"{len(cases) - len(failed)} of {len(cases)} gradient rules match finite differences")
sys.exit(1 if failed else 0)
