"""Prints how many times each zero op occurs in MLIR read from stdin.

One line per op, sorted by name: 'zero.add 15'. Globals are split by role:
'zero.global param trainable 28', 'zero.global buffer 1'. Lit tests of whole
models check these histograms, so that an op that should have been folded or
fused (or one that goes missing) fails the test.
"""
import collections, re, sys

counts = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*zero\.global @\S+ (\w+)( trainable)?", line)
    if m:
        counts["zero.global " + m.group(1) + (m.group(2) or "")] += 1
        continue
    m = re.match(r"\s*(?:%[\w:#]+\s*=\s*)?(zero\.\w+)", line)
    if m:
        counts[m.group(1)] += 1
for name in sorted(counts):
    print(name, counts[name])
