"""Prints where a plan's kernel keeps one of its inputs and its first result.

    buffer_slots.py PLAN.zrt KIND [INPUT]
For the first `zrt.kernel "KIND"` of the micro-step program with more than
INPUT inputs (INPUT: an index, default 2): "input INPUT and result: SLOT
SLOT", each slot as the plan's buffer declares it (device[N], state[N], ...).
Used to check that an in-place kernel shares its memory.
"""
import re
import sys

text = open(sys.argv[1]).read()
index = int(sys.argv[3]) if len(sys.argv) > 3 else 2
slots = dict(re.findall(r"zrt\.buffer @(\S+) (\w+\[\d+\])", text))
program = text[text.index("zrt.program @micro_step"):]
pattern = r'zrt\.kernel "%s" \[([^\]]*)\] -> \[@([^\],]+)' % re.escape(sys.argv[2])
m = next(m for m in re.finditer(pattern, program) if m.group(1).count(",") >= index)
operand = m.group(1).split(",")[index].strip().lstrip("@")
print("input %d and result:" % index, slots[operand], slots[m.group(2)])
