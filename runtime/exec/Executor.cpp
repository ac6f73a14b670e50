//===- Executor.cpp - run a validated plan on the CPU ---------------------===//
#include "exec/Executor.h"

#include "plan/PlanLoader.h"

#include <cstdlib>
#include <cstring>

using namespace zrt;

static void allocateArena(int64_t bytes, std::unique_ptr<char, void (*)(void *)> &data,
                          int64_t &size, int64_t &total) {
  // 64-byte alignment, as planned; zero-filled so that nothing reads garbage.
  size_t rounded = ((size_t)std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
  data.reset(static_cast<char *>(std::aligned_alloc(64, rounded)));
  if (!data)
    throw std::bad_alloc();
  std::memset(data.get(), 0, rounded);
  size = bytes;
  total += bytes;
}

Executor::Executor(const plan::Plan &plan) : plan_(plan) {
  allocateArena(plan.device_arena_bytes(), device_.data, device_.bytes, allocated_);
  allocateArena(plan.state_arena_bytes(), state_.data, state_.bytes, allocated_);
  allocateArena(plan.constant_arena_bytes(), constant_.data, constant_.bytes, allocated_);
  allocateArena(plan.input_arena_bytes(), input_.data, input_.bytes, allocated_);
  allocateArena(plan.host_arena_bytes(), host_.data, host_.bytes, allocated_);
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const plan::Buffer &b = plan.buffers(i);
    if (!b.initial_data().empty())
      std::memcpy(arenaBase(b.arena()) + b.offset(), b.initial_data().data(),
                  b.initial_data().size());
    if (b.has_fill()) {
      TensorRef t = buffer(i);
      for (int64_t k = 0, n = t.numel(); k < n; ++k) {
        if (t.dtype == DType::F32)
          t.as<float>()[k] = (float)b.fill();
        else
          t.as<double>()[k] = b.fill();
      }
    }
  }
}

char *Executor::arenaBase(int arena) const {
  switch (arena) {
  case plan::DEVICE: return device_.data.get();
  case plan::STATE: return state_.data.get();
  case plan::CONSTANT: return constant_.data.get();
  case plan::INPUT: return input_.data.get();
  default: return host_.data.get();
  }
}

const plan::Program *Executor::program(const std::string &name) const {
  for (const plan::Program &p : plan_.programs())
    if (p.name() == name)
      return &p;
  return nullptr;
}

TensorRef Executor::buffer(int index) const {
  const plan::Buffer &b = plan_.buffers(index);
  TensorRef t;
  toDType(b.dtype(), t.dtype);
  t.shape.assign(b.shape().begin(), b.shape().end());
  t.data = arenaBase(b.arena()) + b.offset();
  return t;
}

Status Executor::run(const plan::Program &program) {
  KernelCall call;
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    if (inst.has_copy()) {
      TensorRef src = buffer(inst.copy().source()), dst = buffer(inst.copy().target());
      std::memmove(dst.data, src.data, src.numel() * dtypeSize(src.dtype));
      continue;
    }
    const plan::Kernel &k = inst.kernel();
    call.in.clear();
    call.out.clear();
    for (int index : k.inputs())
      call.in.push_back(buffer(index));
    for (int index : k.outputs())
      call.out.push_back(buffer(index));
    call.ints.assign(k.ints().begin(), k.ints().end());
    call.floats.assign(k.floats().begin(), k.floats().end());
    Status s = findKernel(k.name())->run(call);
    if (!s)
      return errorf("program '", program.name(), "', instruction ", i,
                    k.location().empty() ? "" : " (" + k.location() + ")", ", kernel '", k.name(),
                    "': ", s.message());
  }
  return Status::ok();
}
