"""A one-layer attention language model in the form torch.onnx exports
scaled_dot_product_attention, for zero-fuse-attention.

    attention_lm.py MODEL.onnx IDS.npy LABELS.npy [HEAD_DIM [FORM [MASK [SOFTCAP]]]]

ids [2, 80] -> embedding -> qkv projection -> split -> heads [2, 2, 80, D]
-> q k^T * 1/sqrt(D) + mask -> softmax -> NaN guard -> . v -> heads back
-> output projection to 96 logits. 80 positions: a full 64-row tile and a
partial one. The mask is causal, and query row 5 sees no key at all (every
score -inf): the guard's zeros, which the fused kernel must reproduce.
16 samples of random ids; the labels are their shift. With "separate", q, k
and v come from three projections (Llama's and BERT's form) instead of one
split (GPT-2's, which zcc fuses as zero.attention_packed). With "gqa",
4 query heads share 2 k/v heads: separate projections, k and v repeated
per group as transformers' repeat_kv does (reshape, expand, reshape);
"mqa" 2 query heads on one k/v head (multi-query). MASK "causal": plainly
causal; "window=W": causal within the last W positions (a sliding window),
float32's lowest where masked, as transformers writes it. SOFTCAP c: the
scaled scores soft-capped, c tanh(s / c), as Gemma 2 writes it (Div, Tanh,
Mul) before the mask.
"""
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper

D = int(sys.argv[4]) if len(sys.argv) > 4 else 16
form = sys.argv[5] if len(sys.argv) > 5 else "packed"
separate = form in ("separate", "gqa", "mqa")
B, S, V = 2, 80, 96
H, HK = {"gqa": (4, 2), "mqa": (2, 1)}.get(form, (2, 2))
E, EK = H * D, HK * D
rng = np.random.default_rng(0)
init = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)
kind = sys.argv[6] if len(sys.argv) > 6 else "empty-row"
softcap = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
mask = np.triu(np.full((S, S), -np.inf, np.float32), 1)
if kind == "empty-row":
    mask[5, :] = -np.inf
elif kind.startswith("window="):
    w = int(kind.split("=")[1])
    i, j = np.indices((S, S))
    mask = np.where((j <= i) & (j > i - w), 0, np.finfo(np.float32).min).astype(np.float32)
tensors = {"wte": init(V, E), "w_qkv": init(E, E + 2 * EK), "w_o": init(E, V)}
constants = {"mask": mask.reshape(1, 1, S, S), "scale": np.array(1 / np.sqrt(D), np.float32),
             "zero": np.array(0, np.float32), "heads": np.array([B, S, H, D], np.int64),
             "kvheads": np.array([B, S, HK, D], np.int64), "unit": np.array([B, HK, 1, S, D], np.int64),
             "grouped": np.array([B, HK, H // HK, S, D], np.int64),
             "repeated": np.array([B, H, S, D], np.int64),
             "flat": np.array([B, S, E], np.int64), "split": np.array([E, EK, EK], np.int64),
             "cap": np.array(softcap, np.float32)}
n = helper.make_node
nodes = [n("Constant", [], [k], value=numpy_helper.from_array(a, k)) for k, a in constants.items()]
nodes += [n("Gather", ["wte", "input_ids"], ["h"])]
if separate:
    nodes += [n("Split", ["w_qkv", "split"], ["w_q", "w_k", "w_v"], axis=1)]
    nodes += [n("MatMul", ["h", "w_" + x], [x]) for x in "qkv"]
else:
    nodes += [n("MatMul", ["h", "w_qkv"], ["qkv"]),
              n("Split", ["qkv", "split"], ["q", "k", "v"], axis=2)]
for x in "qkv":
    shape = "heads" if x == "q" else "kvheads"
    nodes += [n("Reshape", [x, shape], [x + "4"]),
              n("Transpose", [x + "4"], [x + ("t" if x == "q" or HK == H else "h")],
                perm=[0, 2, 1, 3])]
    if x != "q" and HK != H:  # repeat_kv
        nodes += [n("Reshape", [x + "h", "unit"], [x + "5"]),
                  n("Expand", [x + "5", "grouped"], [x + "e"]),
                  n("Reshape", [x + "e", "repeated"], [x + "t"])]
nodes += [n("Transpose", ["kt"], ["kT"], perm=[0, 1, 3, 2]),
          n("MatMul", ["qt", "kT"], ["scores"]),
          n("Mul", ["scores", "scale"], ["scaled" if not softcap else "raw"])]
if softcap:
    nodes += [n("Div", ["raw", "cap"], ["over"]), n("Tanh", ["over"], ["th"]),
              n("Mul", ["th", "cap"], ["scaled"])]
nodes += [n("Add", ["scaled", "mask"], ["masked"]),
          n("Softmax", ["masked"], ["p"], axis=-1),
          n("IsNaN", ["p"], ["nan"]),
          n("Where", ["nan", "zero", "p"], ["p0"]),
          n("MatMul", ["p0", "vt"], ["o"]),
          n("Transpose", ["o"], ["ob"], perm=[0, 2, 1, 3]),
          n("Reshape", ["ob", "flat"], ["attn"]),
          n("MatMul", ["attn", "w_o"], ["logits"])]
g = helper.make_graph(nodes, "attention_lm",
                      [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, S])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, S, V])],
                      [numpy_helper.from_array(a, k) for k, a in tensors.items()])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), sys.argv[1])
ids = rng.integers(0, V, (16, S)).astype(np.int64)
np.save(sys.argv[2], ids)
np.save(sys.argv[3], np.roll(ids, -1, axis=1))
