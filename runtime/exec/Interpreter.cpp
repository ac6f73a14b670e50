//===- Interpreter.cpp - the instruction walk both backends share ---------===//
#include "exec/Interpreter.h"

#include "plan/PlanLoader.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace zrt;

double zrt::traceClockUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const plan::Program *Interpreter::program(const std::string &name) const {
  return findProgram(plan_, name);
}

Status Interpreter::refreshDerivedState(const plan::Program &next) {
  if (!derivedStateStale_)
    return Status::ok();
  derivedStateStale_ = false;
  const plan::Program *refresh = program("refresh");
  if (!refresh || refresh == &next)
    return Status::ok();
  return run(*refresh);
}

Status Interpreter::openNvme(const std::string &dir, int rank) {
  if (plan_.nvme_arena_bytes() == 0)
    return Status::ok();
  SwapFile::Options options;
  if (plan_.nvme_io().block_size() > 0)
    options.blockSize = plan_.nvme_io().block_size();
  if (plan_.nvme_io().queue_depth() > 0)
    options.queueDepth = plan_.nvme_io().queue_depth();
  ZRT_RETURN_IF_ERROR(SwapFile::open("--nvme-path", dir.empty() ? plan_.nvme_path() : dir, rank,
                                     plan_.nvme_arena_bytes(), options, nvme_));
  // The file starts as zeros (the moments); parameter shards kept there
  // (offload_param nvme) start from the plan's values, this rank's part.
  return writeInitialContents(plan::NVME, rank,
                              [&](int64_t offset, const char *data, int64_t bytes) {
                                return writeNvme(offset, data, bytes);
                              });
}

Status Interpreter::writeNvme(int64_t offset, const char *data, int64_t bytes) {
  if (!nvme_)
    return errorf("the plan's NVMe state cannot be written: no swap file is open");
  // Bytes whose address and file offset disagree modulo 4 KiB (a weight
  // read into a vector, a plan's initial data) cannot go to the file
  // straight under O_DIRECT: they are staged where they agree, so that the
  // swap file writes them with requests in flight, not through its bounce
  // buffer a block at a time.
  constexpr int64_t kPage = 4096;
  if (nvme_->direct() && bytes > 2 * kPage &&
      offset % kPage != (int64_t)(reinterpret_cast<uintptr_t>(data) % kPage)) {
    const int64_t shift = offset % kPage;
    std::unique_ptr<char, void (*)(void *)> staged(
        static_cast<char *>(std::aligned_alloc(kPage, (shift + bytes + kPage - 1) / kPage * kPage)),
        std::free);
    if (staged) {
      std::memcpy(staged.get() + shift, data, (size_t)bytes);
      return nvme_->write(offset, staged.get() + shift, bytes);
    }
  }
  return nvme_->write(offset, data, bytes);
}

Status Interpreter::readNvme(int64_t offset, char *data, int64_t bytes) {
  if (!nvme_)
    return errorf("the plan's NVMe state cannot be read: no swap file is open");
  return nvme_->read(offset, data, bytes);
}

Status Interpreter::nvmeCopy(const Step &step, char *host) {
  if (!nvme_)
    return errorf("the plan has an NVMe arena, but no swap file is open (zrun opens one under "
                  "--nvme-path)");
  const plan::Copy &c = step.inst->copy();
  const plan::Buffer &src = plan_.buffers(c.source()), &dst = plan_.buffers(c.target());
  bool write = dst.arena() == plan::NVME;
  const plan::Buffer &file = write ? dst : src;
  TensorRef t = describeBuffer(file);
  int64_t bytes = t.numel() * (int64_t)dtypeSize(t.dtype);
  if (!c.async())
    return write ? nvme_->write(file.offset(), host, bytes)
                 : nvme_->read(file.offset(), host, bytes);
  nvmePending_[c.target()] = nvme_->submit(write, file.offset(), host, bytes);
  return Status::ok();
}

Status Interpreter::nvmeWait(int target, bool &found) {
  auto it = nvmePending_.find(target);
  found = it != nvmePending_.end();
  if (!found)
    return Status::ok();
  int64_t ticket = it->second;
  nvmePending_.erase(it);
  return nvme_->wait(ticket);
}

Status Interpreter::saveNvme(std::vector<char> &bytes) {
  if (plan_.nvme_arena_bytes() == 0)
    return Status::ok();
  if (!nvme_)
    return errorf("the plan's NVMe state cannot be saved: no swap file is open");
  size_t at = bytes.size();
  bytes.resize(at + plan_.nvme_arena_bytes());
  return nvme_->read(0, bytes.data() + at, plan_.nvme_arena_bytes());
}

Status Interpreter::loadNvme(const char *data) {
  if (plan_.nvme_arena_bytes() == 0)
    return Status::ok();
  if (!nvme_)
    return errorf("the plan's NVMe state cannot be loaded: no swap file is open");
  return nvme_->write(0, data, plan_.nvme_arena_bytes());
}

const std::vector<Interpreter::Step> &Interpreter::prepared(const plan::Program &program) {
  auto it = prepared_.find(&program);
  if (it != prepared_.end())
    return it->second;
  std::vector<Step> &steps = prepared_[&program];
  steps.reserve(program.instructions_size());
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    Step step{Step::Kernel, &program, i, &inst, {}, {}, {}};
    const std::string *location = nullptr;
    if (inst.has_copy()) {
      step.kind = Step::Copy;
      location = &inst.copy().location();
    } else if (inst.has_wait()) {
      step.kind = Step::Wait;
      location = &inst.wait().location();
    } else if (inst.has_collective()) {
      step.kind = Step::Collective;
      location = &inst.collective().location();
    } else {
      const plan::Kernel &k = inst.kernel();
      location = &k.location();
      // validatePlan resolved every name already: this cannot fail.
      step.kernel = *lookupKernel(k.name());
      for (int index : k.inputs())
        step.call.in.push_back(operand(index));
      for (int index : k.outputs())
        step.call.out.push_back(operand(index));
      step.call.ints.assign(k.ints().begin(), k.ints().end());
      step.call.floats.assign(k.floats().begin(), k.floats().end());
      step.call.code = k.code().empty() ? nullptr : &k.code();
    }
    if (!location->empty())
      step.location = " (" + *location + ")";
    steps.push_back(std::move(step));
  }
  return steps;
}

Status Interpreter::walk(const plan::Program &program) {
  for (const Step &step : prepared(program)) {
    Status s = beforeStep(step);
    if (s) {
      switch (step.kind) {
      case Step::Kernel:
        s = runKernel(step);
        break;
      case Step::Copy:
        s = runCopy(step);
        break;
      case Step::Collective:
        s = runCollective(step);
        break;
      case Step::Wait:
        s = runWait(step);
        break;
      }
    }
    afterStep(step);
    if (s)
      continue;
    std::string what =
        step.kind == Step::Kernel ? std::string("kernel '") + kernelName(step.kernel) + "'"
        : step.kind == Step::Copy ? std::string("copy")
        : step.kind == Step::Wait ? std::string("wait")
                                  : plan::Collective::Kind_Name(step.inst->collective().kind());
    return errorf("program '", program.name(), "', instruction ", step.index, step.location, ", ",
                  what, where(), ": ", s.message());
  }
  return Status::ok();
}

void Interpreter::writeInitialContents(int arena, int rank, char *base) const {
  (void)writeInitialContents(arena, rank, [&](int64_t offset, const char *data, int64_t bytes) {
    std::memcpy(base + offset, data, (size_t)bytes);
    return Status::ok();
  });
}

Status Interpreter::writeInitialContents(
    int arena, int rank, const std::function<Status(int64_t, const char *, int64_t)> &write) const {
  // Fills (16-bit ones are zero: the loader checks), a buffer at a time.
  std::vector<char> piece;
  for (const plan::Buffer &b : plan_.buffers()) {
    if (b.arena() != arena || !b.has_fill() || b.fill() == 0.0)
      continue;
    TensorRef t = describeBuffer(b);
    if (t.dtype != DType::F32 && t.dtype != DType::F64)
      continue;
    piece.assign((size_t)t.numel() * dtypeSize(t.dtype), 0);
    t.data = piece.data();
    for (int64_t k = 0, n = t.numel(); k < n; ++k) {
      if (t.dtype == DType::F32)
        t.as<float>()[k] = (float)b.fill();
      else
        t.as<double>()[k] = b.fill();
    }
    ZRT_RETURN_IF_ERROR(write(b.offset(), piece.data(), (int64_t)piece.size()));
  }
  for (const plan::Buffer &b : plan_.buffers()) {
    if (b.arena() != arena || b.initial_data().empty())
      continue;
    size_t bytes = b.initial_data().size(), skip = 0;
    if (b.shard_of() != 0) {
      bytes /= stateShards(plan_);
      skip = bytes * stateShardOf(plan_, rank);
    }
    ZRT_RETURN_IF_ERROR(write(b.offset(), b.initial_data().data() + skip, (int64_t)bytes));
  }
  return Status::ok();
}
