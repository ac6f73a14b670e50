"""Writes an ONNX model's float initializers as safetensors, by hand (the
format: an 8-byte little-endian header length, a JSON header {name: {dtype,
shape, data_offsets}} padded with spaces, then the little-endian data), as
Hugging Face's save_pretrained lays a checkpoint out.

    to_safetensors.py MODEL.onnx OUT [--dtype F32|BF16|F16] [--shards N]
                      [--drop NAME] [--extra NAME] [--reshape NAME] [--rounded-onnx OUT.onnx]

OUT is a .safetensors file, or with --shards a folder of
model-0000i-of-0000N.safetensors files and model.safetensors.index.json.
BF16/F16 round the values to nearest even; --rounded-onnx also writes the
model with its float initializers rounded the same way (still float32), so a
run from the 16-bit checkpoint can be compared with one from that model.
"""
import argparse, json, os, numpy as np, onnx
from onnx import numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("model"); ap.add_argument("out")
ap.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
ap.add_argument("--shards", type=int, default=0)
ap.add_argument("--drop"); ap.add_argument("--extra"); ap.add_argument("--reshape")
ap.add_argument("--rounded-onnx")
a = ap.parse_args()

m = onnx.load(a.model)
tensors = {}
for t in m.graph.initializer:
    v = numpy_helper.to_array(t)
    if v.dtype == np.float32:
        tensors[t.name] = v


def to_bits(v):
    """float32 -> (dtype name, raw little-endian bytes, the rounded float32 values)."""
    if a.dtype == "F32":
        return "F32", v.astype("<f4").tobytes(), v
    if a.dtype == "F16":
        h = v.astype("<f2")
        return "F16", h.tobytes(), h.astype(np.float32)
    u = v.astype(np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    s16, one = np.uint64(16), np.uint64(1)
    b = ((u + np.uint64(0x7FFF) + ((u >> s16) & one)) >> s16).astype("<u2")  # nearest even
    return "BF16", b.tobytes(), (b.astype(np.uint32) << np.uint32(16)).view(np.float32).reshape(v.shape)


if a.drop:
    del tensors[a.drop]
if a.extra:
    tensors[a.extra] = np.zeros(3, np.float32)
if a.reshape:
    tensors[a.reshape] = np.zeros((2,) + tensors[a.reshape].shape, np.float32)
encoded = {n: to_bits(v) for n, v in tensors.items()}
if a.rounded_onnx:
    for t in m.graph.initializer:
        if t.name in encoded:
            t.CopyFrom(numpy_helper.from_array(encoded[t.name][2].reshape(tensors[t.name].shape), t.name))
    onnx.save(m, a.rounded_onnx)


def write(path, names):
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for n in names:
        dtype, raw, _ = encoded[n]
        header[n] = {"dtype": dtype, "shape": list(tensors[n].shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)


names = list(encoded)
if not a.shards:
    write(a.out, names)
else:
    os.makedirs(a.out, exist_ok=True)
    weight_map = {}
    for i in range(a.shards):
        file = f"model-{i + 1:05d}-of-{a.shards:05d}.safetensors"
        part = names[i::a.shards]
        write(os.path.join(a.out, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(e[1]) for e in encoded.values())},
                   "weight_map": weight_map}, f, indent=2)
