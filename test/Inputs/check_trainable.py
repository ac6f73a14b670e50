"""Checks that the trainable globals in MLIR (stdin) are exactly the PyTorch
parameters that references.json lists for a model.

    check_trainable.py REFERENCES_JSON MODEL < module.mlir
Prints 'trainable match: N' or the differences (and exits 1).
"""
import json, re, sys

refs = json.load(open(sys.argv[1]))
expected = set(refs["models"][sys.argv[2]]["trainable"])
got = set()
for line in sys.stdin:
    m = re.match(r'\s*zero\.global @("?)([^" ]+)\1 param trainable', line)
    if m:
        got.add(m.group(2))
if got != expected:
    print("missing:", sorted(expected - got))
    print("unexpected:", sorted(got - expected))
    sys.exit(1)
print("trainable match:", len(got))
