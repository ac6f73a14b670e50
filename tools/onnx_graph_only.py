#!/usr/bin/env python3
"""Writes an ONNX model's graph without its float weights, for zcc --weights external.

    onnx_graph_only.py MODEL.onnx OUT.onnx

Exports of large models keep their tensors in an external data file (gigabytes). zcc with
--weights external reads no float initializer (zrun loads them from the full model at start),
but it does read the others: integer and boolean constants such as a traced attention mask,
which zero-fuse-attention proves causal. This keeps those inline (read from the external file)
and leaves every float initializer as the external reference it was, so OUT.onnx is the graph
alone: small, and compressible for the trip between machines.
"""
import os, sys
import onnx
from onnx import TensorProto, external_data_helper

FLOATS = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}

src, dst = sys.argv[1], sys.argv[2]
model = onnx.load(src, load_external_data=False)
base = os.path.dirname(os.path.abspath(src))
inlined = 0
for t in model.graph.initializer:
    if t.data_location == TensorProto.EXTERNAL and t.data_type not in FLOATS:
        external_data_helper.load_external_data_for_tensor(t, base)
        t.data_location = TensorProto.DEFAULT
        del t.external_data[:]
        inlined += 1
onnx.save(model, dst)
print(f"{dst}: {os.path.getsize(dst) / 2**20:.1f} MiB, {inlined} non-float initializers inlined")
