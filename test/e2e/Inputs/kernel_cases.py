"""Checks every CPU kernel against NumPy through the whole toolchain.

    kernel_cases.py ZCC ZRUN WORKDIR
For each case: an ONNX model with one op (plus a ReduceSum output that serves
as the plan's loss) is written, compiled with zcc, run with `zrun eval
--output y=...`, and y is compared with NumPy in float64 (relative error on
the whole tensor, 1e-5 for float32). Prints one line per case and a summary.
"""
import json, os, subprocess, sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
from math import erf as _erf

zcc, zrun, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(0)
F, I, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
NP = {F: np.float32, I: np.int64, B: np.bool_}
erf = np.vectorize(_erf)


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def bf16(a):
    """Rounds float32 values to bfloat16 (nearest even), returned as float64."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def fp16(a):
    """Rounds float32 values to IEEE float16 (nearest even), returned as float64."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float64)


def case(name, op, inputs, ref, attrs=None, consts=None, out_type=F, order=None, bf16_io=False,
         narrow=TensorProto.BFLOAT16, outputs=("y",), flags=(), const_nodes=()):
    """inputs: graph inputs (name, array), all with the same leading (sample)
    dimension; consts: initializers (name, array), i.e. constants (int, bool)
    or parameters (float); order: the node's input names if not inputs+consts;
    outputs: the node's outputs, one of them y; ref: numpy reference of y;
    flags: more zcc flags; const_nodes: (name, array) as Constant nodes (float
    initializers would be parameters)."""
    consts = consts or []
    names = order or [n for n, _ in inputs] + [n for n, _ in consts]
    nodes = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v, n))
             for n, v in const_nodes]
    nodes.append(helper.make_node(op, names, list(outputs), **(attrs or {})))
    if bf16_io:
        # The op computes on bfloat16 tensors: float inputs are cast in, the
        # result cast out (graph input/output types stay float32).
        floats = {n for n, a in list(inputs) + list(consts) if a.dtype == np.float32}
        nodes = [helper.make_node("Cast", [n], [n + "_bf"], to=narrow) for n in sorted(floats)]
        out = "y_bf" if out_type == F else "y"
        nodes.append(helper.make_node(op, [n + "_bf" if n in floats else n for n in names], [out], **(attrs or {})))
        if out_type == F:
            nodes.append(helper.make_node("Cast", ["y_bf"], ["y"], to=F))
    y = ref.astype(NP[out_type])
    # A scalar loss: the sum of y (as float).
    if out_type == F:
        nodes.append(helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0))
    else:
        nodes.append(helper.make_node("Cast", ["y"], ["yf"], to=F))
        nodes.append(helper.make_node("ReduceSum", ["yf"], ["loss"], keepdims=0))
    g_in = [helper.make_tensor_value_info(n, {np.float32: F, np.int64: I, np.bool_: B}[a.dtype.type],
                                          list(a.shape)) for n, a in inputs]
    g = helper.make_graph(nodes, name, g_in,
                          [helper.make_tensor_value_info("loss", F, []),
                           helper.make_tensor_value_info("y", out_type, list(y.shape))],
                          initializer=[numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "m.onnx"))
    args = []
    for n, a in inputs:
        # zrun's data arrays are [samples, ...]: one sample = the whole input.
        np.save(os.path.join(d, n + ".npy"), a[None])
        args += ["--data", f"{n}={os.path.join(d, n + '.npy')}"]
    shapes = []
    for n, a in inputs:
        shapes += ["--input-shape", f"{n}=" + "x".join(str(s) for s in a.shape)] if a.ndim else []
    r = subprocess.run([zcc, os.path.join(d, "m.onnx"), "-o", os.path.join(d, "m.zplan")] + shapes
                       + list(flags),
                       capture_output=True, text=True)
    if r.returncode:
        return name, f"zcc failed: {r.stderr.strip()[:300]}"
    # Inputs are batched by zrun with batch = the input's leading dim: feed
    # exactly one batch worth (the whole tensor).
    for n, a in inputs:
        np.save(os.path.join(d, n + ".npy"), a)
    # The inputs, by name, for tools/kernel_parity.py (the same plan on the GPU).
    with open(os.path.join(d, "inputs.json"), "w") as f:
        json.dump([n for n, _ in inputs], f)
    r = subprocess.run([zrun, "eval", os.path.join(d, "m.zplan"), "--output",
                        f"y={os.path.join(d, 'y.npy')}"] + args, capture_output=True, text=True)
    if r.returncode:
        return name, f"zrun failed: {r.stderr.strip()[:300]}"
    got = np.load(os.path.join(d, "y.npy"))
    if got.shape != y.shape or got.dtype != y.dtype:
        return name, f"got {got.dtype}{got.shape}, expected {y.dtype}{y.shape}"
    if out_type == F:
        err = np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
        # bfloat16 keeps 8 bits of mantissa, float16 11.
        tol = (8e-3 if narrow == TensorProto.BFLOAT16 else 1e-3) if bf16_io else 1e-5
        return name, None if err <= tol else f"relative error {err:.3g} (tolerance {tol})"
    return name, None if np.array_equal(got, y) else "values differ"


def r(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


a, b, c = r(3, 4), r(4), r(3, 1)
pos = r(3, 4, lo=0.1, hi=3.0)
ints = rng.integers(-5, 5, (3, 4)).astype(np.int64)
mask = rng.random((3, 4)) > 0.5
x3 = r(2, 3, 5)
xl = r(300, 40)     # 300 elements per output: a block each
xs = r(2, 40000)    # 40000 per output, 2 outputs: split over several blocks
xc = r(6, 50, 96)   # leading axes reduced, 96 columns: the column kernel (a bias gradient)
xw = r(3, 1600)     # norm rows of 1600 and 2048
xv = r(2, 2048)
w54, y152, b4 = r(5, 4), r(1, 5, 2), r(4)
results = [
    case("add", "Add", [("a", a)], a.astype(np.float64) + b, consts=[("b", b)]),
    case("sub", "Sub", [("a", a), ("c", c)], a.astype(np.float64) - c),
    case("mul", "Mul", [("a", a)], a.astype(np.float64) * b, consts=[("b", b)]),
    case("div", "Div", [("a", a), ("c", pos[:, :1])], a.astype(np.float64) / pos[:, :1]),
    case("pow", "Pow", [("p", pos)], pos.astype(np.float64) ** b, consts=[("b", b)]),
    case("max", "Max", [("a", a)], np.maximum(a, b).astype(np.float64), consts=[("b", b)]),
    case("min", "Min", [("a", a), ("c", c)], np.minimum(a, c).astype(np.float64)),
    case("add_i64", "Add", [("i", ints)], ints + ints[:1], consts=[("j", ints[:1])], out_type=I),
    case("and", "And", [("m", mask), ("n", mask[:, ::-1].copy())], mask & mask[:, ::-1], out_type=B),
    case("or", "Or", [("m", mask), ("n", mask[::-1].copy())], mask | mask[::-1], out_type=B),
    case("not", "Not", [("m", mask)], ~mask, out_type=B),
    case("less", "Less", [("a", a), ("c", np.broadcast_to(c, a.shape).copy())], a < c, out_type=B),
    case("equal_i64", "Equal", [("i", ints), ("j", ints[::-1].copy())], ints == ints[::-1], out_type=B),
    case("where", "Where", [("m", mask), ("a", a), ("c", c)], np.where(mask, a, c).astype(np.float64)),
    case("neg", "Neg", [("a", a)], -a.astype(np.float64)),
    case("isnan", "IsNaN", [("n", np.array([[1.0, np.nan, -np.inf, 0.0]], np.float32))],
         np.isnan(np.array([[1.0, np.nan, -np.inf, 0.0]])), out_type=B),
    case("abs", "Abs", [("a", a)], np.abs(a).astype(np.float64)),
    case("exp", "Exp", [("a", a)], np.exp(a.astype(np.float64))),
    case("log", "Log", [("p", pos)], np.log(pos.astype(np.float64))),
    case("sqrt", "Sqrt", [("p", pos)], np.sqrt(pos.astype(np.float64))),
    case("reciprocal", "Reciprocal", [("p", pos)], 1 / pos.astype(np.float64)),
    case("tanh", "Tanh", [("a", a)], np.tanh(a.astype(np.float64))),
    case("erf", "Erf", [("a", a)], erf(a.astype(np.float64))),
    case("sigmoid", "Sigmoid", [("a", a)], 1 / (1 + np.exp(-a.astype(np.float64)))),
    case("relu", "Relu", [("a", a)], np.maximum(a, 0).astype(np.float64)),
    case("cos", "Cos", [("a", a)], np.cos(a.astype(np.float64))),
    case("sin", "Sin", [("a", a)], np.sin(a.astype(np.float64))),
    case("gelu", "Gelu", [("a", a)], 0.5 * a * (1 + erf(a.astype(np.float64) / np.sqrt(2)))),
    case("cast", "Cast", [("a", a)], a.astype(np.int64), attrs={"to": I}, out_type=I),
    case("expand", "Expand", [("c", c)], np.broadcast_to(c, (2, 3, 4)).astype(np.float64),
         consts=[("s", np.array([2, 3, 4], np.int64))]),
    case("transpose", "Transpose", [("x", x3)], x3.transpose(2, 0, 1).astype(np.float64), attrs={"perm": [2, 0, 1]}),
    case("slice", "Slice", [("x", x3)], x3[:, 1:3, ::2].astype(np.float64),
         consts=[("st", np.array([1, 0], np.int64)), ("en", np.array([3, 5], np.int64)),
                 ("ax", np.array([1, 2], np.int64)), ("sp", np.array([1, 2], np.int64))]),
    case("concat", "Concat", [("a", a), ("c", c)], np.concatenate([a, c], 1).astype(np.float64), attrs={"axis": 1}),
    case("gather", "Gather", [("i", np.array([[2, 0], [1, 1]], np.int64))], a[[[2, 0], [1, 1]]].astype(np.float64),
         consts=[("w", a)], order=["w", "i"]),
    case("matmul", "MatMul", [("x", x3)], x3.astype(np.float64) @ w54.astype(np.float64),
         consts=[("w", w54)]),
    # Gemm with a bias: zero-fuse-epilogues makes it matmul_bias (cuBLASLt's bias epilogue).
    case("gemm_bias", "Gemm", [("x", x3[0])],
         x3[0].astype(np.float64) @ w54.astype(np.float64) + b4.astype(np.float64),
         consts=[("w", w54), ("b", b4)]),
    case("matmul_batch", "MatMul", [("x", x3)], x3.astype(np.float64) @ y152.astype(np.float64),
         consts=[("y", y152)]),
    case("reduce_max", "ReduceMax", [("x", x3)], x3.max(1, keepdims=True).astype(np.float64),
         consts=[("ax", np.array([1], np.int64))]),
    case("reduce_mean", "ReduceMean", [("x", x3)], x3.astype(np.float64).mean((0, 2), keepdims=True),
         consts=[("ax", np.array([0, 2], np.int64))]),
    # Long reductions (the CUDA backend's block and split-block paths).
    case("reduce_sum_long", "ReduceSum", [("x", xl)], xl.astype(np.float64).sum(0, keepdims=True),
         consts=[("ax", np.array([0], np.int64))]),
    # The gradient norm's sum of squares (zero-optimizer), long: the split-block path.
    case("reduce_sum_square_long", "ReduceSumSquare", [("x", xl)],
         np.square(xl.astype(np.float32)).astype(np.float64).sum(0, keepdims=True),
         consts=[("ax", np.array([0], np.int64))]),
    case("reduce_sum_columns", "ReduceSum", [("x", xc)], xc.astype(np.float64).sum((0, 1), keepdims=True),
         consts=[("ax", np.array([0, 1], np.int64))]),
    case("reduce_mean_columns", "ReduceMean", [("x", xc)], xc.astype(np.float64).mean((0, 1)),
         consts=[("ax", np.array([0, 1], np.int64))], attrs={"keepdims": 0}),
    case("reduce_max_split", "ReduceMax", [("x", xs)], xs.max(1, keepdims=True).astype(np.float64),
         consts=[("ax", np.array([1], np.int64))]),
    case("reduce_mean_split", "ReduceMean", [("x", xs)], xs.astype(np.float64).mean(1, keepdims=True),
         consts=[("ax", np.array([1], np.int64))]),
    case("softmax", "Softmax", [("x", x3)], softmax(x3.astype(np.float64), 1), attrs={"axis": 1}),
    case("log_softmax", "LogSoftmax", [("x", x3)], np.log(softmax(x3.astype(np.float64), -1))),
    case("layer_norm", "LayerNormalization", [("x", x3)],
         (x3 - x3.mean(-1, keepdims=True)) / np.sqrt(x3.astype(np.float64).var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25,
         consts=[("s", np.full(5, 1.5, np.float32)), ("bb", np.full(5, 0.25, np.float32))]),
    # Rows of 1600 (GPT-2 1.5B) and 2048 (Llama 1B): the CUDA backend's widest warp-per-row kernels.
    case("layer_norm_1600", "LayerNormalization", [("x", xw)],
         (xw - xw.mean(-1, keepdims=True)) / np.sqrt(xw.astype(np.float64).var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25,
         consts=[("s", np.full(1600, 1.5, np.float32)), ("bb", np.full(1600, 0.25, np.float32))]),
    case("bf16_layer_norm_2048", "LayerNormalization", [("x", xv)],
         (bf16(xv) - bf16(xv).mean(-1, keepdims=True)) / np.sqrt(bf16(xv).var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25,
         consts=[("s", np.full(2048, 1.5, np.float32)), ("bb", np.full(2048, 0.25, np.float32))], bf16_io=True),
]

# The same kernels on bfloat16 storage (float32 math), against NumPy on the
# bfloat16-rounded inputs.
ab, bb, x3b = bf16(a), bf16(b), bf16(x3)
results += [
    case("bf16_add", "Add", [("a", a)], ab + bb, consts=[("b", b)], bf16_io=True),
    case("bf16_mul", "Mul", [("a", a), ("c", np.broadcast_to(c, a.shape).copy())], ab * bf16(c), bf16_io=True),
    case("bf16_exp", "Exp", [("a", a)], np.exp(ab), bf16_io=True),
    case("bf16_tanh", "Tanh", [("a", a)], np.tanh(ab), bf16_io=True),
    case("bf16_gelu", "Gelu", [("a", a)], 0.5 * ab * (1 + erf(ab / np.sqrt(2))), bf16_io=True),
    # A gradient bucket's sum of squares: trailing axis, 16-byte loads of 8 bfloat16s.
    case("bf16_reduce_sum_square_split", "ReduceSumSquare", [("x", xs)],
         np.square(bf16(xs)).astype(np.float64).sum(1, keepdims=True),
         consts=[("ax", np.array([1], np.int64))], bf16_io=True),
    case("bf16_matmul", "MatMul", [("x", x3)], x3b @ bf16(w54), consts=[("w", w54)], bf16_io=True),
    case("bf16_softmax", "Softmax", [("x", x3)], softmax(x3b, -1), bf16_io=True),
    case("bf16_reduce_mean", "ReduceMean", [("x", x3)], x3b.mean((0, 2), keepdims=True),
         consts=[("ax", np.array([0, 2], np.int64))], bf16_io=True),
    case("bf16_layer_norm", "LayerNormalization", [("x", x3)],
         (x3b - x3b.mean(-1, keepdims=True)) / np.sqrt(x3b.var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25,
         consts=[("s", np.full(5, 1.5, np.float32)), ("bb", np.full(5, 0.25, np.float32))], bf16_io=True),
    case("bf16_transpose", "Transpose", [("x", x3)], x3b.transpose(2, 0, 1), attrs={"perm": [2, 0, 1]}, bf16_io=True),
    case("bf16_less", "Less", [("a", a), ("c", np.broadcast_to(c, a.shape).copy())], ab < bf16(c), out_type=B, bf16_io=True),
]
# And on float16 storage.
H = TensorProto.FLOAT16
ah, x3h = fp16(a), fp16(x3)
results += [
    case("fp16_add", "Add", [("a", a)], ah + fp16(b), consts=[("b", b)], bf16_io=True, narrow=H),
    case("fp16_exp", "Exp", [("a", a)], np.exp(ah), bf16_io=True, narrow=H),
    case("fp16_gelu", "Gelu", [("a", a)], 0.5 * ah * (1 + erf(ah / np.sqrt(2))), bf16_io=True, narrow=H),
    case("fp16_matmul", "MatMul", [("x", x3)], x3h @ fp16(w54), consts=[("w", w54)], bf16_io=True, narrow=H),
    case("fp16_softmax", "Softmax", [("x", x3)], softmax(x3h, -1), bf16_io=True, narrow=H),
    case("fp16_layer_norm", "LayerNormalization", [("x", x3)],
         (x3h - x3h.mean(-1, keepdims=True)) / np.sqrt(x3h.var(-1, keepdims=True) + 1e-5) * 1.5 + 0.25,
         consts=[("s", np.full(5, 1.5, np.float32)), ("bb", np.full(5, 0.25, np.float32))], bf16_io=True, narrow=H),
    # The range of float16: large values near 65504, and subnormals (3e-6 is
    # below the smallest normal, 2^-14) rounded on the way in.
    case("fp16_range", "Mul", [("big", np.array([[300.0, -300.0, 1e-3, 3e-6]], np.float32))],
         fp16(fp16(np.array([[300.0, -300.0, 1e-3, 3e-6]], np.float32)) * 200.0),
         consts=[("k", np.array(200.0, np.float32))], bf16_io=True, narrow=H),
]
# Ops the importer builds from other kernels (issue 21): their NumPy
# definitions through the whole toolchain.
xi = r(1, 3, 8, 8)
wp, bp = r(4, 3, 4, 4), r(4)
patches = xi.reshape(1, 3, 2, 4, 2, 4).transpose(0, 2, 4, 1, 3, 5).reshape(4, 48) @ wp.reshape(4, 48).T
hot = np.array([[0, 3, 1], [4, 2, 0]], np.int64)
q4, k3, w52, w23 = r(2, 3, 4, 8), r(3, 5, 8), r(5, 2), r(2, 3)
xg, sg, bg = r(2, 4, 3, 3), r(4), r(4)
tk = r(4, 8)
ties = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 5.0, -1.0]], np.float32)
# ScatterElements along axis 1: duplicates (add), one negative index, a
# permutation (none), and torch.bincount's int64 counts.
sc_data, sc_upd = r(3, 6), r(3, 4)
sc_idx = np.array([[0, 5, 5, -1], [2, 2, 1, 0], [3, 1, 4, 3]], np.int64)
sc_perm = np.array([[4, 0, 2, 1], [5, 3, 1, 0], [0, 1, 2, 3]], np.int64)


# CumSum over data: OPT's positions from an int64 attention mask, and floats.
cs_mask = np.array([[1, 1, 1, 0, 0, 1, 1], [0, 1, 1, 1, 1, 1, 1], [1, 0, 1, 0, 1, 0, 1]], np.int64)
cs_x = r(3, 7)


def cumsum_ref(x, exclusive=False, reverse=False):
    y = x.astype(np.float64)
    if reverse:
        y = y[:, ::-1]
    c = np.cumsum(y, 1)
    if exclusive:
        c = np.concatenate([np.zeros_like(c[:, :1]), c[:, :-1]], 1)
    return c[:, ::-1] if reverse else c


# Mod over data: Python's % on integers (fmod 0), C's fmod on floats (fmod 1).
mod_a = np.array([[7, -7, 7, -7, 0, 13], [5, -6, 100, -1, 3, 2]], np.int64)
mod_b = np.array([[3, 3, -3, -3, 5, 4], [5, 4, 7, 6, -2, -3]], np.int64)
mod_x, mod_y = r(2, 6) * 3, np.array([[1.5, -1.5, 0.7, 2.0, -0.3, 1.1]] * 2, np.float32)


def scatter_nd_ref(data, idx, upd, add):
    out = data.astype(np.float64).copy()
    for q in np.ndindex(idx.shape[:-1]):
        pos = tuple(int(i) % d for i, d in zip(idx[q], data.shape))
        out[pos] = out[pos] + upd[q] if add else upd[q]
    return out


nd_distinct = np.array([[3, 4], [0, 0], [1, 2], [-2, 1]], np.int64)
nd_pts = np.array([[0, 1], [2, 3], [0, 1], [-1, 0]], np.int64)
nd_x, nd_pts_upd = r(4, 5), r(4)


def scatter_ref(data, idx, upd, add):
    out = data.astype(np.float64).copy()
    for n in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            k = idx[n, j] % data.shape[1]
            out[n, k] = out[n, k] + upd[n, j] if add else upd[n, j]
    return out
x3b, bn_mean, bn_var = r(2, 3, 4), r(3), r(3, lo=0.5, hi=2.0)


def conv_ref(x, w, bias, strides=None, pads=None, dil=None, group=1):
    """ONNX Conv in float64: pads are [begin.., end..] per spatial axis."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    sp = x.ndim - 2
    strides, dil = strides or [1] * sp, dil or [1] * sp
    pads = pads or [0] * (2 * sp)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[d], pads[d + sp]) for d in range(sp)])
    k = w.shape[2:]
    out = [(xp.shape[2 + d] - dil[d] * (k[d] - 1) - 1) // strides[d] + 1 for d in range(sp)]
    m, cg = w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((x.shape[0], m, *out))
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[d] * dil[d], tap[d] * dil[d] + (out[d] - 1) * strides[d] + 1, strides[d])
                   for d in range(sp))
        xs = xp[(slice(None), slice(None)) + sl]
        for g in range(group):
            wg = w[(slice(g * mg, (g + 1) * mg), slice(None)) + tap]
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", xs[:, g * cg:(g + 1) * cg], wg)
    if bias is not None:
        y += bias.astype(np.float64).reshape((1, m) + (1,) * sp)
    return y


def pool_ref(x, k, strides, pads, kind, dil=None, ceil=False, include_pad=False):
    """ONNX MaxPool / AveragePool in float64, PyTorch's ceil_mode and divisor rules."""
    x = x.astype(np.float64)
    sp = x.ndim - 2
    dil = dil or [1] * sp
    out, extra = [], []
    for d in range(sp):
        size, span = x.shape[2 + d], dil[d] * (k[d] - 1) + 1
        padded = size + pads[d] + pads[d + sp]
        o = (padded - span + (strides[d] - 1 if ceil else 0)) // strides[d] + 1
        if ceil and (o - 1) * strides[d] >= size + pads[d]:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * strides[d] + span - padded))
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        idx, count = [], 1
        for d in range(sp):
            first = o[d] * strides[d] - pads[d]
            pos = [first + j * dil[d] for j in range(k[d])]
            inside = [p for p in pos if 0 <= p < x.shape[2 + d]]
            idx.append(inside)
            lo, hi = (-pads[d], x.shape[2 + d] + pads[d + sp]) if include_pad else (0, x.shape[2 + d])
            count *= sum(lo <= p < hi for p in pos)
        win = x[(slice(None), slice(None)) + np.ix_(*idx)]
        if kind == "max":
            y[(slice(None), slice(None)) + o] = win.reshape(x.shape[0], x.shape[1], -1).max(-1)
        else:
            y[(slice(None), slice(None)) + o] = win.reshape(x.shape[0], x.shape[1], -1).sum(-1) / count
    return y


def convt_ref(x, w, bias, strides, pads, dil=None, group=1, out_pad=None):
    """ONNX ConvTranspose in float64: every input element times its filters,
    added at i stride + k dilation, then cropped by the pads."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    sp = x.ndim - 2
    dil, out_pad = dil or [1] * sp, out_pad or [0] * sp
    c, mg, k = w.shape[0], w.shape[1], w.shape[2:]
    cg = c // group
    full = [(x.shape[2 + d] - 1) * strides[d] + dil[d] * (k[d] - 1) + 1 + out_pad[d] for d in range(sp)]
    y = np.zeros((x.shape[0], mg * group, *full))
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[d] * dil[d], tap[d] * dil[d] + (x.shape[2 + d] - 1) * strides[d] + 1,
                         strides[d]) for d in range(sp))
        for g in range(group):
            wg = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap]
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += np.einsum(
                "nc...,cm->nm...", x[:, g * cg:(g + 1) * cg], wg)
    y = y[(slice(None), slice(None)) + tuple(slice(pads[d], full[d] - pads[d + sp]) for d in range(sp))]
    if bias is not None:
        y = y + bias.astype(np.float64).reshape((1, -1) + (1,) * sp)
    return y


tx1, tw1, tb1 = r(1, 3, 4, 5), r(3, 2, 3, 3), r(2)
tx2, tw2 = r(1, 4, 3, 3), r(4, 3, 2, 2)
tx3, tw3 = r(2, 3, 5), r(3, 2, 4)
tx4, tw4 = r(1, 3, 4, 4), r(3, 1, 3, 3)
px1, px2, px3 = r(2, 3, 7, 6), r(1, 2, 7, 8), r(2, 3, 12)
cx1, cw1, cb1 = r(2, 3, 7, 6), r(4, 3, 3, 3), r(4)
cx2, cw2 = r(1, 2, 9, 8), r(3, 2, 3, 2)
cx3, cw3 = r(2, 4, 5, 5), r(6, 2, 3, 3)
cx4, cw4, cb4 = r(1, 4, 6, 6), r(4, 1, 3, 3), r(4)
cx5, cw5 = r(1, 2, 5, 5), r(4, 1, 3, 3)
cx6, cw6, cb6 = r(2, 5, 12), r(6, 5, 3), r(6)
cx7, cw7 = r(1, 2, 7, 7), r(3, 2, 4, 4)
cx8, cw8 = r(1, 2, 4, 4, 3), r(2, 2, 2, 2, 2)


def interp_ref(x, size, align_corners):
    """PyTorch's bilinear F.interpolate (upsample_bilinear2d's arithmetic)."""
    out = x.astype(np.float64)
    for axis, o in zip((2, 3), size):
        n = out.shape[axis]
        res = []
        for d in range(o):
            if align_corners:
                src = d * (n - 1) / (o - 1) if o > 1 else 0.0
            else:
                src = max((d + 0.5) * n / o - 0.5, 0.0)
            x0 = min(int(np.floor(src)), n - 1)
            x1 = x0 + (1 if x0 < n - 1 else 0)
            l1 = src - x0
            res.append(np.take(out, x0, axis) * (1 - l1) + np.take(out, x1, axis) * l1)
        out = np.stack(res, axis)
    return out


# (Its own generator: the other cases' data stay as they were.)
rz = np.random.default_rng(53).uniform(-2, 2, (2, 3, 3, 4)).astype(np.float32)


def gn_ref(x, groups, scale, bias):
    g = x.astype(np.float64).reshape(x.shape[0], groups, -1)
    g = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    return g.reshape(x.shape) * scale[:, None, None] + bias[:, None, None]

results += [
    case("clip", "Clip", [("a", a)], np.clip(a, -0.5, 0.7).astype(np.float64),
         consts=[("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))]),
    case("clip_min_only", "Clip", [("a", a)], np.maximum(a, -0.5).astype(np.float64),
         consts=[("lo", np.array(-0.5, np.float32))]),
    case("softplus", "Softplus", [("a", a * 20)], np.logaddexp(0, (a * 20).astype(np.float64))),
    case("tile", "Tile", [("x", x3)], np.tile(x3, (2, 1, 3)).astype(np.float64),
         consts=[("rep", np.array([2, 1, 3], np.int64))]),
    case("pad", "Pad", [("x", x3)],
         np.pad(x3[:, 1:, :], ((0, 0), (0, 0), (1, 2))).astype(np.float64),
         consts=[("pads", np.array([0, -1, 1, 0, 0, 2], np.int64))]),
    case("einsum_bmm", "Einsum", [("x", x3)], np.einsum("bij,jk->bik", x3.astype(np.float64), w54),
         attrs={"equation": "bij,jk->bik"}, consts=[("w", w54)]),
    case("einsum_transpose_sum", "Einsum", [("x", x3)], np.einsum("bij->jb", x3.astype(np.float64)),
         attrs={"equation": "bij->jb"}),
    case("einsum_attention", "Einsum", [("q", q4)], np.einsum("bhqd,hkd->bhqk", q4.astype(np.float64), k3),
         attrs={"equation": "bhqd,hkd->bhqk"}, consts=[("k", k3)]),
    case("einsum_implicit_ellipsis", "Einsum", [("x", x3)], np.einsum("...ij,jk", x3.astype(np.float64), w52),
         attrs={"equation": "...ij,jk"}, consts=[("w", w52)]),
    case("einsum_three", "Einsum", [("x", x3)],
         np.einsum("bij,jk,kl->bil", x3.astype(np.float64), w52, w23),
         attrs={"equation": "bij,jk,kl->bil"}, consts=[("w", w52), ("v", w23)], order=["x", "w", "v"]),
    case("scatter_add", "ScatterElements", [("d", sc_data), ("i", sc_idx), ("u", sc_upd)],
         scatter_ref(sc_data, sc_idx, sc_upd, True), attrs={"axis": 1, "reduction": "add"}),
    case("scatter_none", "ScatterElements", [("d", sc_data), ("i", sc_perm), ("u", sc_upd)],
         scatter_ref(sc_data, sc_perm, sc_upd, False), attrs={"axis": 1}),
    case("scatter_bincount", "ScatterElements",
         [("d", np.zeros((3, 6), np.int64)), ("i", sc_idx), ("u", np.ones((3, 4), np.int64))],
         scatter_ref(np.zeros((3, 6)), sc_idx, np.ones((3, 4)), True).astype(np.int64),
         attrs={"axis": 1, "reduction": "add"}, out_type=I),
    case("scatter_nd_none", "ScatterND", [("d", nd_x), ("i", nd_distinct), ("u", nd_pts_upd)],
         scatter_nd_ref(nd_x, nd_distinct, nd_pts_upd, False)),
    case("scatter_nd_add", "ScatterND", [("d", nd_x), ("i", nd_pts), ("u", nd_pts_upd)],
         scatter_nd_ref(nd_x, nd_pts, nd_pts_upd, True), attrs={"reduction": "add"}),
    case("scatter_nd_int", "ScatterND",
         [("d", np.arange(20, dtype=np.int64).reshape(4, 5)), ("i", nd_pts),
          ("u", np.array([7, 8, 9, 10], np.int64))],
         scatter_nd_ref(np.arange(20).reshape(4, 5), nd_pts, np.array([7, 8, 9, 10]), True)
         .astype(np.int64), attrs={"reduction": "add"}, out_type=I),
    case("mod_python", "Mod", [("a", mod_a), ("b", mod_b)], np.mod(mod_a, mod_b), out_type=I),
    case("mod_fmod_int", "Mod", [("a", mod_a), ("b", mod_b)], np.fmod(mod_a, mod_b),
         attrs={"fmod": 1}, out_type=I),
    case("mod_fmod", "Mod", [("a", mod_x), ("b", mod_y)],
         np.fmod(mod_x.astype(np.float64), mod_y.astype(np.float64)), attrs={"fmod": 1}),
    case("cumsum", "CumSum", [("x", cs_x)], cumsum_ref(cs_x),
         consts=[("axis", np.array(1, np.int64))]),
    case("cumsum_exclusive_reverse", "CumSum", [("x", cs_x)],
         cumsum_ref(cs_x, exclusive=True, reverse=True), attrs={"exclusive": 1, "reverse": 1},
         consts=[("axis", np.array(-1, np.int64))]),
    case("cumsum_positions", "CumSum", [("m", cs_mask)], np.cumsum(cs_mask, 1),
         consts=[("axis", np.array(1, np.int64))], out_type=I),
    case("onehot", "OneHot", [("i", hot)], np.eye(5)[hot] * 2.0 - 1.0,
         consts=[("depth", np.array(5, np.int64)), ("values", np.array([-1.0, 1.0], np.float32))]),
    case("onehot_axis0", "OneHot", [("i", hot)], np.moveaxis(np.eye(5)[hot], -1, 0),
         attrs={"axis": 0},
         consts=[("depth", np.array(5, np.int64)), ("values", np.array([0.0, 1.0], np.float32))]),
    case("groupnorm", "GroupNormalization", [("x", xg)], gn_ref(xg, 2, sg, bg),
         attrs={"num_groups": 2, "epsilon": 1e-5}, consts=[("s", sg), ("b", bg)]),
    case("groupnorm_per_group", "GroupNormalization", [("x", xg)],
         gn_ref(xg, 2, np.repeat(sg[:2], 2), np.repeat(bg[:2], 2)),
         attrs={"num_groups": 2, "epsilon": 1e-5}, consts=[("s", sg[:2].copy()), ("b", bg[:2].copy())]),
    # --batch-norm eval (model.eval()): the given statistics; the default
    # (model.train()) evaluates with them too (zrun eval runs @forward), its
    # running statistics frozen buffers as PyTorch's.
    case("batchnorm_eval", "BatchNormalization", [("x", x3b)],
         (x3b - bn_mean[:, None]) / np.sqrt(bn_var[:, None] + 1e-5) * sg[:3, None] + bg[:3, None],
         consts=[("s", sg[:3].copy()), ("b", bg[:3].copy()), ("m", bn_mean), ("v", bn_var)],
         flags=["--batch-norm", "eval"]),
    case("batchnorm_model_eval", "BatchNormalization", [("x", x3b)],
         (x3b - bn_mean[:, None]) / np.sqrt(bn_var[:, None] + 1e-5) * sg[:3, None] + bg[:3, None],
         consts=[("s", sg[:3].copy()), ("b", bg[:3].copy()), ("m", bn_mean), ("v", bn_var)],
         flags=["--frozen", "^[mv]$"]),
    case("batchnorm_train", "BatchNormalization", [("x", x3b)],
         (x3b - x3b.mean((0, 2), keepdims=True)) / np.sqrt(x3b.var((0, 2), keepdims=True) + 1e-5) *
         sg[:3, None] + bg[:3, None], attrs={"training_mode": 1},
         consts=[("s", sg[:3].copy()), ("b", bg[:3].copy()), ("m", bn_mean), ("v", bn_var)],
         flags=["--frozen", "^[mv]$"]),
    case("topk_values", "TopK", [("x", tk)], -np.sort(-tk, -1)[:, :3].astype(np.float64),
         consts=[("k", np.array([3], np.int64))], outputs=("y", "i")),
    case("topk_indices", "TopK", [("x", tk)], np.argsort(-tk, -1, kind="stable")[:, :3],
         consts=[("k", np.array([3], np.int64))], outputs=("v", "y"), out_type=I),
    case("topk_smallest_axis0", "TopK", [("x", tk)], np.sort(tk, 0)[:2].astype(np.float64),
         attrs={"axis": 0, "largest": 0}, consts=[("k", np.array([2], np.int64))],
         outputs=("y", "i")),
    case("argmax_ties", "ArgMax", [("x", ties)], np.argmax(ties, -1), attrs={"axis": -1, "keepdims": 0},
         out_type=I),
    case("argmin_last", "ArgMin", [("x", ties)], ties.shape[1] - 1 - np.argmin(ties[:, ::-1], 1),
         attrs={"axis": 1, "keepdims": 0, "select_last_index": 1}, out_type=I),
    # General convolution (issue 53): padding (explicit, asymmetric, auto_pad),
    # stride, dilation, groups, depthwise filters, 1-D and 3-D.
    case("conv2d_3x3_pad1_bias", "Conv", [("x", cx1)], conv_ref(cx1, cw1, cb1, pads=[1, 1, 1, 1]),
         attrs={"pads": [1, 1, 1, 1]}, consts=[("w", cw1), ("bias", cb1)]),
    case("conv2d_stride_dilation_asym_pads", "Conv", [("x", cx2)],
         conv_ref(cx2, cw2, None, strides=[2, 2], pads=[1, 0, 2, 1], dil=[2, 1]),
         attrs={"strides": [2, 2], "pads": [1, 0, 2, 1], "dilations": [2, 1]}, consts=[("w", cw2)]),
    case("conv2d_groups2", "Conv", [("x", cx3)], conv_ref(cx3, cw3, None, pads=[1, 1, 1, 1], group=2),
         attrs={"pads": [1, 1, 1, 1], "group": 2}, consts=[("w", cw3)]),
    case("conv2d_depthwise_bias", "Conv", [("x", cx4)],
         conv_ref(cx4, cw4, cb4, pads=[1, 1, 1, 1], group=4),
         attrs={"pads": [1, 1, 1, 1], "group": 4}, consts=[("w", cw4), ("bias", cb4)]),
    case("conv2d_depthwise_x2", "Conv", [("x", cx5)], conv_ref(cx5, cw5, None, group=2),
         attrs={"group": 2}, consts=[("w", cw5)]),
    case("conv1d_stride2_bias", "Conv", [("x", cx6)],
         conv_ref(cx6, cw6, cb6, strides=[2], pads=[1, 1]),
         attrs={"strides": [2], "pads": [1, 1]}, consts=[("w", cw6), ("bias", cb6)]),
    case("conv2d_same_upper", "Conv", [("x", cx7)],
         conv_ref(cx7, cw7, None, strides=[2, 2], pads=[1, 1, 2, 2]),
         attrs={"strides": [2, 2], "auto_pad": "SAME_UPPER"}, consts=[("w", cw7)]),
    case("conv3d", "Conv", [("x", cx8)], conv_ref(cx8, cw8, None), consts=[("w", cw8)]),
    # ConvTranspose (issue 53): a decoder's upsampling.
    case("convT2d_s2_pad1_outpad1_bias", "ConvTranspose", [("x", tx1)],
         convt_ref(tx1, tw1, tb1, [2, 2], [1, 1, 1, 1], out_pad=[1, 1]),
         attrs={"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
         consts=[("w", tw1), ("bias", tb1)]),
    case("convT2d_groups_dilation", "ConvTranspose", [("x", tx2)],
         convt_ref(tx2, tw2, None, [2, 1], [0, 1, 1, 0], dil=[1, 2], group=2),
         attrs={"strides": [2, 1], "pads": [0, 1, 1, 0], "dilations": [1, 2], "group": 2},
         consts=[("w", tw2)]),
    case("convT1d_s4", "ConvTranspose", [("x", tx3)], convt_ref(tx3, tw3, None, [4], [0, 0]),
         attrs={"strides": [4]}, consts=[("w", tw3)]),
    case("convT2d_depthwise", "ConvTranspose", [("x", tx4)],
         convt_ref(tx4, tw4, None, [2, 2], [1, 1, 1, 1], group=3),
         attrs={"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 3}, consts=[("w", tw4)]),
    # Pooling (issue 53): windows with padding, stride, dilation, ceil_mode.
    case("maxpool_3x3_s2_pad1", "MaxPool", [("x", px1)], pool_ref(px1, [3, 3], [2, 2], [1, 1, 1, 1], "max"),
         attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    case("maxpool_ceil_dilation", "MaxPool", [("x", px2)],
         pool_ref(px2, [2, 2], [2, 2], [0, 0, 0, 0], "max", dil=[2, 1], ceil=True),
         attrs={"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 1], "ceil_mode": 1}),
    case("avgpool_pad_excluded", "AveragePool", [("x", px1)],
         pool_ref(px1, [3, 3], [2, 2], [1, 1, 1, 1], "avg"),
         attrs={"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    case("avgpool_pad_included_ceil", "AveragePool", [("x", px2)],
         pool_ref(px2, [3, 2], [2, 2], [1, 0, 1, 1], "avg", include_pad=True, ceil=True),
         attrs={"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1],
                "count_include_pad": 1, "ceil_mode": 1}),
    case("avgpool1d", "AveragePool", [("x", px3)], pool_ref(px3, [4], [4], [0, 0], "avg"),
         attrs={"kernel_shape": [4], "strides": [4]}),
    case("global_avgpool", "GlobalAveragePool", [("x", px1)], px1.astype(np.float64).mean((2, 3), keepdims=True)),
    case("global_maxpool", "GlobalMaxPool", [("x", px1)], px1.astype(np.float64).max((2, 3), keepdims=True)),
    # Resize (issue 53) against PyTorch's F.interpolate arithmetic: nearest
    # (scale_factor: repeats; sizes: floor(dst x in / out)), bilinear with
    # align_corners False (source clamped at 0, pytorch_half_pixel) and True.
    case("resize_nearest_2x", "Resize", [("x", rz)], rz.repeat(2, 2).repeat(2, 3).astype(np.float64),
         attrs={"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                "nearest_mode": "floor"},
         order=["x", "", "scales"], const_nodes=[("scales", np.array([1, 1, 2, 2], np.float32))]),
    case("resize_nearest_sizes", "Resize", [("x", rz)], rz[:, :, np.arange(5) * 3 // 5, :][:, :, :, np.arange(3) * 4 // 3].astype(np.float64),
         attrs={"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                "nearest_mode": "floor"},
         order=["x", "", "", "sizes"], consts=[("sizes", np.array([2, 3, 5, 3], np.int64))]),
    case("resize_bilinear_2x", "Resize", [("x", rz)], interp_ref(rz, (6, 8), False),
         attrs={"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
         order=["x", "", "scales"], const_nodes=[("scales", np.array([1, 1, 2, 2], np.float32))]),
    case("resize_bilinear_align_corners", "Resize", [("x", rz)], interp_ref(rz, (5, 7), True),
         attrs={"mode": "linear", "coordinate_transformation_mode": "align_corners", "axes": [2, 3]},
         order=["x", "", "", "sizes"], consts=[("sizes", np.array([5, 7], np.int64))]),
    # Pad's other modes (np.pad's: reflect, edge, wrap) and InstanceNormalization.
    case("pad_reflect", "Pad", [("x", rz)], np.pad(rz, ((0, 0), (0, 0), (2, 1), (1, 3)), "reflect").astype(np.float64),
         attrs={"mode": "reflect"}, consts=[("pads", np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64))]),
    case("pad_edge", "Pad", [("x", rz)], np.pad(rz, ((0, 0), (0, 0), (1, 2), (0, 0)), "edge").astype(np.float64),
         attrs={"mode": "edge"}, consts=[("pads", np.array([0, 0, 1, 0, 0, 0, 2, 0], np.int64))]),
    case("pad_wrap", "Pad", [("x", rz)], np.pad(rz, ((0, 0), (0, 0), (0, 0), (3, 2)), "wrap").astype(np.float64),
         attrs={"mode": "wrap"}, consts=[("pads", np.array([0, 0, 0, 3, 0, 0, 0, 2], np.int64))]),
    case("instance_norm", "InstanceNormalization", [("x", rz)],
         gn_ref(rz, 3, sg[:3].astype(np.float64), bg[:3].astype(np.float64)),
         consts=[("s", sg[:3].copy()), ("b", bg[:3].copy())]),
    case("conv_patches", "Conv", [("x", xi)],
         (patches + bp).reshape(1, 2, 2, 4).transpose(0, 3, 1, 2).astype(np.float64),
         attrs={"strides": [4, 4], "kernel_shape": [4, 4]}, consts=[("w", wp), ("bias", bp)]),
]
failed = [(n, e) for n, e in results if e]
for n, e in results:
    print(f"{'ok  ' if not e else 'FAIL'} {n}" + (f": {e}" if e else ""))
print(f"{len(results) - len(failed)} of {len(results)} kernel cases match NumPy")
sys.exit(1 if failed else 0)
