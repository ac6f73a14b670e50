"""Reads and writes safetensors by hand (the format: an 8-byte little-endian
header length, a JSON header {name: {dtype, shape, data_offsets}} padded with
spaces, then the little-endian data) for the tests, without the safetensors
package.

    safetensors_io.py edit IN OUT [--drop NAME] [--copy NAME=NEW] [--reshape NAME=D0,D1,...]
        IN's tensors, edited, as OUT (float32 as IN stores them).
    safetensors_io.py compare SOURCE_DIR EXPORTED_DIR
        Whether EXPORTED_DIR (zrun export --hf) holds the tensors of
        SOURCE_DIR (save_pretrained) by name and shape, its config.json the
        same but for the dtype, and its index (if sharded) consistent.
"""
import json, os, struct, sys
import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read(path):
    """{name: (dtype name, shape, raw bytes)} and the metadata."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, v in header.items():
        lo, hi = v["data_offsets"]
        out[name] = (v["dtype"], v["shape"], b[8 + n + lo:8 + n + hi])
    return out, meta


def write(path, tensors, meta):
    header, data = {"__metadata__": meta}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def folder(d):
    """Every tensor of a checkpoint folder, and the shard files."""
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        weight_map = json.load(open(index))["weight_map"]
        tensors = {}
        for f in sorted(set(weight_map.values())):
            part, _ = read(os.path.join(d, f))
            for name in part:
                if weight_map.get(name) != f:
                    sys.exit(f"{f} holds {name}, which the index puts in {weight_map.get(name)}")
            tensors.update(part)
        if set(tensors) != set(weight_map):
            sys.exit("the index and the shards list different tensors")
        return tensors, len(set(weight_map.values()))
    return read(os.path.join(d, "model.safetensors"))[0], 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "edit":
        src, dst, ops = sys.argv[2], sys.argv[3], sys.argv[4:]
        tensors, meta = read(src)
        for op, arg in zip(ops[::2], ops[1::2]):
            if op == "--drop":
                del tensors[arg]
            elif op == "--copy":
                name, new = arg.split("=")
                tensors[new] = tensors[name]
            elif op == "--reshape":
                name, dims = arg.split("=")
                dtype, _, raw = tensors[name]
                tensors[name] = (dtype, [int(d) for d in dims.split(",")], raw)
        write(dst, tensors, meta)
    else:
        src, out = sys.argv[2], sys.argv[3]
        a, _ = folder(src)
        b, shards = folder(out)
        same = set(a) == set(b) and all(a[k][1] == b[k][1] for k in a)
        ca, cb = json.load(open(os.path.join(src, "config.json"))), json.load(open(os.path.join(out, "config.json")))
        key = "dtype" if "dtype" in cb else "torch_dtype"
        dtype = cb.get(key)
        ca.pop(key, None), cb.pop(key, None)
        print(f"{len(b)} tensors, " + ("the same names and shapes" if same else
              f"different: only in the source {sorted(set(a) - set(b))}, only exported {sorted(set(b) - set(a))}")
              + "; config.json " + ("the same" if ca == cb else "different") + f" but dtype {dtype}"
              + (f"; {shards} shards indexed" if shards else ""))
