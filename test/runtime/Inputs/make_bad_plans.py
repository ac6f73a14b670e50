"""Derives malformed plans from a valid one; each exercises one check of the
plan validator (runtime/plan/PlanLoader.cpp).

    make_bad_plans.py GOOD.zplan OUTDIR
Writes OUTDIR/NAME.zplan for every case and OUTDIR/expected-errors.txt with
'NAME: text the error must contain' lines. Needs plan_pb2 on PYTHONPATH
(protoc --python_out=DIR runtime/plan/plan.proto).
"""
import os, sys
import plan_pb2

good = plan_pb2.Plan()
good.ParseFromString(open(sys.argv[1], "rb").read())
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
expected = []


def case(name, error, mutate=None, raw=None):
    if raw is None:
        p = plan_pb2.Plan()
        p.CopyFrom(good)
        mutate(p)
        raw = p.SerializeToString()
    with open(os.path.join(out, name + ".zplan"), "wb") as f:
        f.write(raw)
    expected.append(f"{name}: {error}")


def kernel(p, name):
    for inst in p.programs[0].instructions:
        if inst.kernel.name == name:
            return inst.kernel
    raise KeyError(name)


def buffer_named(p, prefix):
    for b in p.buffers:
        if b.name.startswith(prefix):
            return b
    raise KeyError(prefix)


data = good.SerializeToString()
# The valid plan too, as a fuzzing seed (not listed in expected-errors.txt).
with open(os.path.join(out, "valid.zplan"), "wb") as f:
    f.write(data)
case("empty", "the plan file is empty", raw=b"")
def truncated():
    # Cut in the middle of a field (a cut between fields still parses).
    for cut in range(len(data) // 2, len(data)):
        try:
            plan_pb2.Plan().ParseFromString(data[:cut])
        except Exception:
            return data[:cut]
    raise RuntimeError("no cut point breaks the plan")


case("truncated", "not a valid plan", raw=truncated())
case("garbage", "not a valid plan", raw=bytes(range(256)) * 4)
case("version", "plan format version 7 is not supported", lambda p: setattr(p, "version", 7))
case("world-size", "the plan's world size 0 is not in [1, 4096]", lambda p: setattr(p, "world_size", 0))
case("zero-stage", "the plan's ZeRO stage 7 is not 0-3", lambda p: setattr(p, "zero_stage", 7))
case("arena-size", "arena DEVICE has an invalid size", lambda p: setattr(p, "device_arena_bytes", -5))
case("offset-out-of-arena", "are outside its DEVICE arena",
     lambda p: setattr(buffer_named(p, "t"), "offset", p.device_arena_bytes))
case("negative-offset", "are outside its", lambda p: setattr(buffer_named(p, "t"), "offset", -64))
case("misaligned", "offset 2 is not a multiple of its 4-byte elements",
     lambda p: setattr(buffer_named(p, "t"), "offset", 2))
case("huge-shape", "has an invalid shape",
     lambda p: buffer_named(p, "t").shape.extend([1 << 40, 1 << 40]))
case("bad-dtype", "has an unknown element type", lambda p: setattr(buffer_named(p, "t"), "dtype", 42))
case("bad-arena", "is in an unknown arena", lambda p: setattr(buffer_named(p, "t"), "arena", 9))
case("short-weights", "needs 48 bytes of initial data, the plan has 47",
     lambda p: setattr(buffer_named(p, "w"), "initial_data", buffer_named(p, "w").initial_data[:-1]))
case("data-on-device", "arena, which has no initial data",
     lambda p: setattr(buffer_named(p, "t"), "initial_data", b"\0" * 4))
case("unknown-kernel", "unknown kernel 'fused_magic'", lambda p: setattr(kernel(p, "relu"), "name", "fused_magic"))
case("operand-index", "refers to buffer 999", lambda p: kernel(p, "matmul").inputs.__setitem__(0, 999))
case("kernel-arity", "kernel 'relu' expects 1 inputs and 1 outputs", lambda p: kernel(p, "relu").inputs.append(0))
case("kernel-shape", "kernel 'matmul' operands", lambda p: kernel(p, "matmul").ints.__setitem__(1, 1))
case("kernel-attrs", "kernel 'matmul' expects 2 integer attributes", lambda p: kernel(p, "matmul").ints.append(1))
case("write-input", "which is read-only (INPUT)",
     lambda p: kernel(p, "relu").outputs.__setitem__(0, kernel(p, "matmul").inputs[0]))
case("input-index", "input 'labels' refers to buffer -3", lambda p: setattr(p.programs[0].inputs[0], "buffer", -3))
case("input-arena", "input 'labels' is not in the input arena",
     lambda p: setattr(p.programs[0].inputs[0], "buffer", kernel(p, "relu").outputs[0]))
case("output-index", "output 'logits' refers to buffer 12345", lambda p: setattr(p.programs[0].outputs[0], "buffer", 12345))
case("duplicate-program", "program 'eval' is defined twice", lambda p: p.programs.append(p.programs[0]))
case("no-instruction-kind", "unknown instruction kind", lambda p: p.programs[0].instructions.add())
case("view-with-data", "is a view, which has no initial data",
     lambda p: (setattr(buffer_named(p, "w"), "view", True)))



def buffer_index(p, pred):
    return next(i for i, b in enumerate(p.buffers) if pred(b))


def add_copy(p, source, target):
    copy = p.programs[-1].instructions.add().copy
    copy.source, copy.target = source, target


case("fill-on-device", "a fill value is for owning float state or constant buffers",
     lambda p: setattr(buffer_named(p, "t"), "fill", 1.0))
case("external-on-device", "an external weight is an owning float32 state buffer",
     lambda p: setattr(buffer_named(p, "t"), "external", True))
case("external-with-data", "an external weight is an owning float32 state buffer",
     lambda p: setattr(buffer_named(p, "w"), "external", True))
case("copy-size", "of another type or size",
     lambda p: add_copy(p, buffer_index(p, lambda b: b.trainable and len(b.shape) == 2),
                        buffer_index(p, lambda b: b.role == "step")))
case("copy-into-input", "which is read-only",
     lambda p: add_copy(p, buffer_index(p, lambda b: b.role == "step"),
                        buffer_index(p, lambda b: b.arena == plan_pb2.INPUT)))
case("training-accum", "the plan's training section is invalid (grad_accum_steps 0",
     lambda p: setattr(p.training, "grad_accum_steps", 0))



def add_collective(p, kind, source, target):
    c = p.programs[-1].instructions.add().collective
    c.kind, c.input, c.output = kind, source, target


def shard_mismatch(p):
    b = p.buffers[buffer_index(p, lambda b: b.role == "step")]
    b.shard_of = 3


case("shard-size", "a shard is a 1-D state buffer of shard_of / shards elements", shard_mismatch)
case("collective-size", "does not fit its 1 ranks",
     lambda p: add_collective(p, plan_pb2.Collective.ALL_GATHER,
                              buffer_index(p, lambda b: b.trainable and len(b.shape) == 2),
                              buffer_index(p, lambda b: b.role == "step")))
def mesh_collective(p):
    add_collective(p, plan_pb2.Collective.ALL_REDUCE, buffer_index(p, lambda b: b.role == "step"),
                   buffer_index(p, lambda b: b.role == "step"))
    p.programs[-1].instructions[-1].collective.group = plan_pb2.Collective.GROUP


case("mesh-divide", "the plan's mesh groups of 3 ranks do not divide its 1 ranks",
     lambda p: setattr(p, "group_size", 3))
case("mesh-shards", "the plan's state is split over 2 ranks: that is neither its world size",
     lambda p: setattr(p, "state_shards", 2))
case("mesh-missing", "a collective over a mesh group (GROUP) in a plan without a mesh",
     mesh_collective)
case("collective-dtype", "collectives move float32, bfloat16 or float16 buffers",
     lambda p: add_collective(p, plan_pb2.Collective.ALL_REDUCE,
                              buffer_index(p, lambda b: b.arena == plan_pb2.INPUT and b.dtype == plan_pb2.I64),
                              buffer_index(p, lambda b: b.role == "step")))
case("all-to-all-size", "collective ALL_TO_ALL of",
     lambda p: add_collective(p, plan_pb2.Collective.ALL_TO_ALL,
                              buffer_index(p, lambda b: b.trainable and len(b.shape) == 2),
                              buffer_index(p, lambda b: b.role == "step")))
case("collective-kind", "unknown collective kind",
     lambda p: add_collective(p, 9, buffer_index(p, lambda b: b.role == "step"),
                              buffer_index(p, lambda b: b.role == "step")))

def async_collective(p, wait=False, read_early=False):
    step = buffer_index(p, lambda b: b.role == "step")
    prog = p.programs[-1]
    # A scratch float32 scalar: the step buffer's twin in the device arena.
    scratch = buffer_index(p, lambda b: b.arena == plan_pb2.DEVICE and b.dtype == plan_pb2.F32
                           and len(b.shape) == 0)
    c = prog.instructions.add().collective
    c.kind, c.input, c.output = plan_pb2.Collective.ALL_REDUCE, step, scratch
    setattr(c, "async", True)  # a Python keyword
    if read_early:
        add_copy(p, scratch, step)
    if wait:
        prog.instructions.add().wait.output = scratch


def wait_only(p):
    p.programs[-1].instructions.add().wait.output = buffer_index(p, lambda b: b.role == "step")


case("never-waited", "is never waited for", lambda p: async_collective(p))
case("wait-without-start", "which no async collective, copy or kernel in flight writes last", wait_only)
case("read-before-wait", "which an async collective writes until its wait",
     lambda p: async_collective(p, wait=True, read_early=True))
def nvme_buffer(p, fill=0.0):
    """A 4-element float32 buffer in an NVMe arena of 4096 bytes; its index."""
    p.nvme_arena_bytes, p.nvme_path = 4096, "/tmp"
    b = p.buffers.add()
    b.name, b.arena, b.offset, b.dtype, b.fill = "nvme.m", plan_pb2.NVME, 0, plan_pb2.F32, fill
    b.shape.append(4)
    return len(p.buffers) - 1


def nvme_into_kernel(p):
    nv = nvme_buffer(p)
    for inst in p.programs[0].instructions:
        if inst.HasField("kernel") and len(inst.kernel.inputs) > 0:
            inst.kernel.inputs[0] = nv
            return


def async_state_copy(p):
    step = buffer_index(p, lambda b: b.role == "step")
    add_copy(p, step, step)
    setattr(p.programs[-1].instructions[-1].copy, "async", True)
    p.programs[-1].instructions.add().wait.output = step


case("nvme-without-path", "an NVMe arena but no nvme_path",
     lambda p: setattr(p, "nvme_arena_bytes", 4096))
case("nvme-nonzero-fill", "NVMe state is owning and starts at zero", lambda p: nvme_buffer(p, 1.0))


def nvme_shard_not_param(p):
    """A sharded NVMe buffer with values that is no parameter shard."""
    b = p.buffers[nvme_buffer(p)]
    b.ClearField("fill")
    b.shard_of, b.role, b.initial_data = 4, "adam_m", bytes(16)


case("nvme-shard-not-param", "or is a parameter shard (with data or external)",
     nvme_shard_not_param)
case("nvme-kernel-operand", "which is in the NVMe arena (copy it to the host first)",
     nvme_into_kernel)
case("nvme-to-device", "the NVMe arena is read and written from the host arena only",
     lambda p: add_copy(p, nvme_buffer(p),
                        buffer_index(p, lambda b: b.arena == plan_pb2.DEVICE)))
case("async-state-copy", "only copies between the host and NVMe arenas are async", async_state_copy)
def async_kernel(p):
    # micro_step's first kernel with two or more outputs... or any: marked
    # async, its last output read by a copy before any wait.
    prog = [q for q in p.programs if q.name == "micro_step"][0]
    for i, inst in enumerate(prog.instructions):
        if inst.HasField("kernel") and len(inst.kernel.outputs) > 0:
            setattr(inst.kernel, "async", True)
            out = inst.kernel.outputs[-1]
            copy = plan_pb2.Instruction()
            copy.copy.source, copy.copy.target = out, out
            prog.instructions.insert(i + 1, copy)
            prog.instructions.add().wait.output = out
            return


case("kernel-read-before-wait", "which an async kernel writes until its wait", async_kernel)
case("micro-batch", "the plan's micro_batch 3 is not its micro_step's 2",
     lambda p: setattr(p, "micro_batch", 3))

with open(os.path.join(out, "expected-errors.txt"), "w") as f:
    f.write("\n".join(expected) + "\n")
print(len(expected), "malformed plans written")
