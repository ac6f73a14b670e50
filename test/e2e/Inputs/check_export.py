"""Checks zrun export's outputs against each other.

    check_export.py OUT.safetensors TRAINED.onnx ORIGINAL.onnx
The safetensors header is well formed (8-byte length, JSON, contiguous
offsets); every tensor of it equals the trained model's initializer of that
name bit for bit; the trained model (which zcc then compiles) differs from the
original in exactly the trained initializers.
"""
import json, struct, sys
import numpy as np
import onnx
from onnx import numpy_helper

st, trained, original = sys.argv[1:4]
raw = open(st, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
meta = header.pop("__metadata__")
data = raw[8 + n:]
end = 0
tensors = {}
for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    b, e = info["data_offsets"]
    assert b == end, f"{name}: data not contiguous"
    assert info["dtype"] == "F32"
    tensors[name] = np.frombuffer(data[b:e], np.float32).reshape(info["shape"])
    end = e
assert end == len(data), "trailing bytes"
model = onnx.load(trained)

inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
orig = {i.name: numpy_helper.to_array(i) for i in onnx.load(original).graph.initializer}
changed = 0
for name, t in tensors.items():
    assert name in inits, f"{name} is not an initializer of {trained}"
    assert np.array_equal(inits[name], t), f"{name}: safetensors and onnx differ"
    changed += not np.array_equal(orig[name], t)
print(f"export consistent: {len(tensors)} tensors ({meta['steps']} steps), "
      f"{changed} differ from the original")
