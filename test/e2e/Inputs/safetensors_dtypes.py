"""Summarises a .safetensors file's dtypes; with a second file, checks that
the first (BF16) holds the second's float32 values rounded to nearest even.

    safetensors_dtypes.py FILE [FLOAT32_FILE]
prints "T tensors: DTYPE xN ..." and, with the second file, "bf16 = rounded
float32 in T tensors" (or the first tensor that differs, exit 1).
"""
import json, struct, sys
import numpy as np


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__", None)
    data = b[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


first = load(sys.argv[1])
counts = {}
for dtype, _, _ in first.values():
    counts[dtype] = counts.get(dtype, 0) + 1
print(f"{len(first)} tensors: " + " ".join(f"{d} x{n}" for d, n in sorted(counts.items())))
if len(sys.argv) > 2:
    wide = load(sys.argv[2])
    for name, (dtype, shape, raw) in first.items():
        f = np.frombuffer(wide[name][2], dtype=np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        if dtype != "BF16" or not np.array_equal(np.frombuffer(raw, dtype=np.uint16), rounded):
            print(f"{name}: not the float32 values rounded to bf16")
            sys.exit(1)
    print(f"bf16 = rounded float32 in {len(first)} tensors")
