"""Structural mutation testing of the importer: a bounded, deterministic fuzzer.

    mutate.py ZCC MODEL.onnx COUNT WORKDIR
Applies 1-3 random mutations (seeded by the case number) to the model --
change a dimension, an attribute, an input name, an op type, an element type,
drop a node or an initializer, truncate tensor data -- writes it, runs
`ZCC model --emit=mlir --micro-batch 2` and classifies the outcome. Exit code 0
(imported) and 1 (one clear error) are fine; anything else -- a signal, an
assertion, a sanitizer report, exit code 2 -- is a crash and is printed with
the mutations that caused it (the model is kept as WORKDIR/crash-CASE.onnx).
The last line is 'N cases, I imported, R rejected,
C crashed'.
"""
import os, random, subprocess, sys
import onnx
from onnx import TensorProto

zcc, model_path, count, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.makedirs(work, exist_ok=True)
base = onnx.load(model_path)
OPS = ["Add", "MatMul", "Reshape", "Gather", "Slice", "Concat", "Transpose", "Softmax", "Where",
       "Expand", "Split", "Range", "CumSum", "Squeeze", "Unsqueeze", "Cast", "LayerNormalization",
       "ReduceMean", "Shape", "GatherND", "Identity", "Relu", "Pow", "Gemm", "NoSuchOp"]
TYPES = [TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.INT32,
         TensorProto.DOUBLE, TensorProto.STRING, TensorProto.FLOAT16, 0, 99]
VALUES = [-(2**63), -(2**31), -100, -3, -2, -1, 0, 1, 2, 3, 7, 64, 2**31, 2**40, 2**63 - 1]


def mutate(m, rng, log):
    g = m.graph
    kind = rng.choice(["dim", "attr", "input", "optype", "dtype", "drop_node", "drop_init",
                       "truncate", "const_value", "graph_input"])
    nodes = list(g.node)
    if kind == "dim" and g.initializer:
        t = rng.choice(g.initializer)
        if t.dims:
            i = rng.randrange(len(t.dims))
            t.dims[i] = rng.choice(VALUES)
            log.append(f"dim {t.name}[{i}]={t.dims[i]}")
    elif kind == "attr" and nodes:
        n = rng.choice(nodes)
        if n.attribute:
            a = rng.choice(n.attribute)
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(VALUES)
            elif a.type == onnx.AttributeProto.INTS and a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice(VALUES)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
            elif a.type == onnx.AttributeProto.TENSOR:
                a.t.data_type = rng.choice(TYPES)
            log.append(f"attr {n.name}.{a.name}")
    elif kind == "input" and nodes:
        n = rng.choice(nodes)
        if n.input:
            i = rng.randrange(len(n.input))
            others = [x for nn in nodes for x in nn.output] + ["", "ghost"]
            n.input[i] = rng.choice(others)
            log.append(f"input {n.name}[{i}]={n.input[i]}")
    elif kind == "optype" and nodes:
        n = rng.choice(nodes)
        n.op_type = rng.choice(OPS)
        log.append(f"optype {n.name}={n.op_type}")
    elif kind == "dtype" and g.initializer:
        t = rng.choice(g.initializer)
        t.data_type = rng.choice(TYPES)
        log.append(f"dtype {t.name}={t.data_type}")
    elif kind == "drop_node" and nodes:
        i = rng.randrange(len(nodes))
        log.append(f"drop node {nodes[i].name}")
        del g.node[i]
    elif kind == "drop_init" and g.initializer:
        i = rng.randrange(len(g.initializer))
        log.append(f"drop init {g.initializer[i].name}")
        del g.initializer[i]
    elif kind == "truncate" and g.initializer:
        t = rng.choice(g.initializer)
        if t.raw_data:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data))]
            log.append(f"truncate {t.name}")
    elif kind == "const_value":
        consts = [n for n in nodes if n.op_type == "Constant" and n.attribute]
        if consts:
            n = rng.choice(consts)
            a = n.attribute[0]
            if a.type == onnx.AttributeProto.INTS and a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice(VALUES)
            elif a.type == onnx.AttributeProto.TENSOR and a.t.dims:
                a.t.dims[0] = rng.choice(VALUES)
            log.append(f"const {n.name}")
    elif kind == "graph_input" and g.input:
        d = g.input[0].type.tensor_type.shape.dim
        if d:
            d[rng.randrange(len(d))].dim_value = rng.choice([0, 1, 3, 2**40])
            log.append("graph input dim")


imported = rejected = crashed = 0
for case in range(count):
    rng = random.Random(case)
    m = onnx.ModelProto()
    m.CopyFrom(base)
    log = []
    for _ in range(rng.randint(1, 3)):
        mutate(m, rng, log)
    path = os.path.join(work, "case.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    p = subprocess.run([zcc, path, "--emit=mlir", "--micro-batch", "2", "-o", os.devnull],
                       capture_output=True, text=True, timeout=120)
    bad = p.returncode not in (0, 1) or "Sanitizer" in p.stderr or "Assertion" in p.stderr \
        or "LLVM ERROR" in p.stderr or "Stack dump" in p.stderr
    if bad:
        os.replace(path, os.path.join(work, f"crash-{case}.onnx"))
        crashed += 1
        print(f"CRASH case {case} rc={p.returncode}: {'; '.join(log)}\n{p.stderr[-1500:]}")
    elif p.returncode == 0:
        imported += 1
    else:
        rejected += 1
        # Warnings (e.g. buffer-like initializers without an export record) may
        # come first; the first other line must be the error.
        lines = [l for l in p.stderr.splitlines() if not l.startswith("zcc: warning:")]
        if not lines or not lines[0].startswith("zcc: error:"):
            os.replace(path, os.path.join(work, f"crash-{case}.onnx"))
            crashed += 1
            print(f"UNCLEAR case {case}: {p.stderr[:300]}")
print(f"{count} cases, {imported} imported, {rejected} rejected, {crashed} crashed")
