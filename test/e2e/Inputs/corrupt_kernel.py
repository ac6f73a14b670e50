"""Negative controls: sets integer attribute INDEX of every KERNEL instruction
of a plan to VALUE, making its result wrong (but the plan still valid).

    corrupt_kernel.py IN.zplan OUT.zplan KERNEL INDEX VALUE   (plan_pb2 on PYTHONPATH)
"""
import sys
import plan_pb2

src, dst, kernel, index, value = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
p = plan_pb2.Plan()
p.ParseFromString(open(src, "rb").read())
n = 0
for prog in p.programs:
    for inst in prog.instructions:
        if inst.HasField("kernel") and inst.kernel.name == kernel:
            inst.kernel.ints[index] = value
            n += 1
assert n, "no " + kernel + " instruction"
open(dst, "wb").write(p.SerializeToString())
print("changed", n)
