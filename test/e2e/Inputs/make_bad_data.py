"""Writes malformed and mismatched .npy files next to a good int64 token array.

    make_bad_data.py TOKENS.npy OUTDIR
"""
import os, sys
import numpy as np

ids = np.load(sys.argv[1])
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, "float.npy"), ids.astype(np.float32))
np.save(os.path.join(out, "seq16.npy"), ids[:, :16])
np.save(os.path.join(out, "fewer.npy"), ids[:8])
np.save(os.path.join(out, "bigendian.npy"), ids.astype(">i8"))
bad = ids.copy()
bad[0, 3] = 256  # the vocabulary has 256 tokens
np.save(os.path.join(out, "bad-token.npy"), bad)
labels = np.zeros_like(ids)
labels[0, 0] = 999
np.save(os.path.join(out, "bad-label.npy"), labels)
np.save(os.path.join(out, "full.npy"), ids)
with open(os.path.join(out, "full.npy"), "rb") as f:
    data = f.read()
with open(os.path.join(out, "truncated.npy"), "wb") as f:
    f.write(data[:-96])
