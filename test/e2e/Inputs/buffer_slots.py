"""Prints where a plan's kernel KIND keeps its last input and its result.

    buffer_slots.py PLAN.zrt KIND
For the first `zrt.kernel "KIND"` with three inputs or more in the micro-step
program: "addend and
result: SLOT SLOT", each slot as the plan's buffer declares it (device[N],
state[N], ...). Used to check that an in-place kernel shares its memory.
"""
import re
import sys

text = open(sys.argv[1]).read()
slots = dict(re.findall(r"zrt\.buffer @(\S+) (\w+\[\d+\])", text))
program = text[text.index("zrt.program @micro_step"):]
m = next(m for m in re.finditer(r'zrt\.kernel "%s" \[([^\]]*)\] -> \[@([^\],]+)'
                              % re.escape(sys.argv[2]), program) if m.group(1).count(",") >= 2)
last = m.group(1).split(",")[-1].strip().lstrip("@")
print("addend and result:", slots[last], slots[m.group(2)])
