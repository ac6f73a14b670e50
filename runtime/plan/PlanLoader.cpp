//===- PlanLoader.cpp - read and validate a plan --------------------------===//
#include "plan/PlanLoader.h"

#include "support/ByteSize.h"
#include "support/Files.h"

#include "cpu/Kernels.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

using namespace zrt;

bool zrt::toDType(int d, DType &out) {
  switch (d) {
  case plan::F32:
    out = DType::F32;
    return true;
  case plan::F64:
    out = DType::F64;
    return true;
  case plan::F16:
    out = DType::F16;
    return true;
  case plan::BF16:
    out = DType::BF16;
    return true;
  case plan::I64:
    out = DType::I64;
    return true;
  case plan::I32:
    out = DType::I32;
    return true;
  case plan::BOOL:
    out = DType::Bool;
    return true;
  case plan::I8:
    out = DType::I8;
    return true;
  default:
    return false;
  }
}

/// Largest arena a plan may ask for (1 TiB): a guard against corrupt sizes.

static int64_t arenaSize(const plan::Plan &p, int arena) {
  switch (arena) {
  case plan::DEVICE:
    return p.device_arena_bytes();
  case plan::STATE:
    return p.state_arena_bytes();
  case plan::CONSTANT:
    return p.constant_arena_bytes();
  case plan::INPUT:
    return p.input_arena_bytes();
  case plan::HOST:
    return p.host_arena_bytes();
  case plan::NVME:
    return p.nvme_arena_bytes();
  default:
    return -1;
  }
}

std::vector<int> zrt::groupRanks(int world, int groupSize, plan::Collective::Group g, int rank) {
  std::vector<int> ranks;
  if (g == plan::Collective::GROUP)
    for (int r = rank / groupSize * groupSize, end = r + groupSize; r < end; ++r)
      ranks.push_back(r);
  else if (g == plan::Collective::ACROSS)
    for (int r = rank % groupSize; r < world; r += groupSize)
      ranks.push_back(r);
  else
    for (int r = 0; r < world; ++r)
      ranks.push_back(r);
  return ranks;
}

Status zrt::validatePlan(const plan::Plan &p) {
  if (p.version() != kPlanVersion)
    return errorf("plan format version ", p.version(), " is not supported (this zrun reads ",
                  "version ", kPlanVersion, "); recompile the model with this zcc");
  if (p.has_training()) {
    // 65536: zcc's bound (more micro-steps per step never ends in practice).
    bool ok = p.training().grad_accum_steps() >= 1 && p.training().grad_accum_steps() <= 65536 &&
              p.training().lr() >= 0;
    bool hasPrograms[2] = {false, false};
    for (const plan::Program &prog : p.programs()) {
      hasPrograms[0] |= prog.name() == "micro_step";
      hasPrograms[1] |= prog.name() == "apply";
    }
    if (!ok || !hasPrograms[0] || !hasPrograms[1])
      return errorf("the plan's training section is invalid (grad_accum_steps ",
                    p.training().grad_accum_steps(), ", lr ", p.training().lr(),
                    ") or its micro_step/apply programs are missing");
    if (p.training().has_loss_scaling()) {
      const plan::LossScaling &ls = p.training().loss_scaling();
      if (!(ls.static_scale() >= 0) || !(ls.initial_scale() > 0) || ls.window() < 1 ||
          ls.hysteresis() < 1 || !(ls.min_scale() > 0) || !std::isfinite(ls.initial_scale()) ||
          !std::isfinite(ls.static_scale()))
        return errorf("the plan's loss scaling is invalid (static ", ls.static_scale(),
                      ", initial ", ls.initial_scale(), ", window ", ls.window(), ", hysteresis ",
                      ls.hysteresis(), ", min ", ls.min_scale(), ")");
    }
  }
  if (p.world_size() < 1 || p.world_size() > kMaxWorldSize)
    return errorf("the plan's world size ", p.world_size(), " is not in [1, ", kMaxWorldSize, "]");
  if (p.zero_stage() < 0 || p.zero_stage() > 3)
    return errorf("the plan's ZeRO stage ", p.zero_stage(), " is not 0-3");
  const int64_t world = p.world_size();
  if (p.group_size() < 0 || (p.group_size() > 0 && world % p.group_size()))
    return errorf("the plan's mesh groups of ", p.group_size(), " ranks do not divide its ", world,
                  " ranks");
  if (p.state_shards() != 0 && p.state_shards() != world && p.state_shards() != p.group_size())
    return errorf("the plan's state is split over ", p.state_shards(),
                  " ranks: that is neither its world size ", world, " nor its mesh group size ",
                  p.group_size());
  // Sharded state: split over these ranks.
  const int64_t shards = stateShards(p);
  if (p.host_state_bytes() < 0 || p.host_state_bytes() > p.host_arena_bytes())
    return errorf("the plan's host state (", p.host_state_bytes(),
                  " bytes) is not inside its host arena (", p.host_arena_bytes(), " bytes)");
  if (p.nvme_arena_bytes() > 0 && p.nvme_path().empty())
    return errorf("the plan has an NVMe arena but no nvme_path (zcc --nvme-path DIR)");
  if (p.nvme_io().block_size() < 0 || p.nvme_io().queue_depth() < 0 ||
      p.nvme_io().queue_depth() > 4096)
    return errorf("the plan's NVMe I/O settings are invalid (block size ", p.nvme_io().block_size(),
                  ", queue depth ", p.nvme_io().queue_depth(), ")");
  for (int a = plan::DEVICE; a <= plan::NVME; ++a)
    if (arenaSize(p, a) < 0 || arenaSize(p, a) > kMaxArenaBytes)
      return errorf("arena ", plan::Arena_Name(static_cast<plan::Arena>(a)),
                    " has an invalid size ", arenaSize(p, a));

  // Buffers: type, shape, bounds, data.
  std::vector<int64_t> bytesOf(p.buffers_size());
  for (int i = 0; i < p.buffers_size(); ++i) {
    const plan::Buffer &b = p.buffers(i);
    auto where = [&] {
      std::ostringstream os;
      os << "buffer " << i << " ('" << b.name() << "')";
      return os.str();
    };
    DType dtype;
    if (!toDType(b.dtype(), dtype))
      return errorf(where(), " has an unknown element type ", b.dtype());
    int64_t n = 1;
    for (int64_t d : b.shape()) {
      if (d < 0 || (d > 0 && n > kMaxArenaBytes / d))
        return errorf(where(), " has an invalid shape");
      n *= d;
    }
    int64_t bytes = n * (int64_t)dtypeSize(dtype);
    bytesOf[i] = bytes;
    int64_t size = arenaSize(p, b.arena());
    if (size < 0)
      return errorf(where(), " is in an unknown arena ", b.arena());
    if (b.offset() < 0 || b.offset() > size || bytes > size - b.offset())
      return errorf(where(), ": bytes [", b.offset(), ", ", b.offset() + bytes,
                    ") are outside its ", plan::Arena_Name(b.arena()), " arena of ", size,
                    " bytes");
    if (b.offset() % (int64_t)dtypeSize(dtype))
      return errorf(where(), ": offset ", b.offset(), " is not a multiple of its ",
                    dtypeSize(dtype), "-byte elements");
    // Owning state (and the host arena's offloaded state) starts from data.
    bool hasData =
        (b.arena() == plan::STATE || b.arena() == plan::CONSTANT || b.arena() == plan::NVME ||
         (b.arena() == plan::HOST && b.offset() < p.host_state_bytes())) &&
        !b.view();
    // NVMe state starts zero-filled (the swap file is created empty), but
    // for parameter shards (offload_param nvme), which start from their
    // values (or the external weights).
    if (b.arena() == plan::NVME && !b.view() &&
        (b.shard_of() != 0 ? b.has_fill() || b.role() != "param"
                           : !b.has_fill() || b.fill() != 0.0 || b.external()))
      return errorf(where(), ": NVMe state is owning and starts at zero (a fill of 0, no initial "
                             "data, not external), or is a parameter shard (with data or "
                             "external)");
    // 16-bit buffers take a zero fill only (a bf16 gradient bucket).
    bool fillable = dtype == DType::F32 || dtype == DType::F64 ||
                    ((dtype == DType::BF16 || dtype == DType::F16) && b.fill() == 0.0);
    if (b.has_fill() && (!hasData || !b.initial_data().empty() || !fillable))
      return errorf(where(), ": a fill value is for owning float state or constant buffers "
                             "without initial data (16-bit ones: zero only)");
    // A shard's initial data holds every rank's elements.
    int64_t dataBytes = bytes;
    if (b.shard_of() != 0) {
      if ((b.arena() != plan::STATE && b.arena() != plan::HOST && b.arena() != plan::NVME) ||
          b.view() || b.shape_size() != 1 || b.shard_of() != n * shards)
        return errorf(where(),
                      ": a shard is a 1-D state buffer of shard_of / shards "
                      "elements (shard_of ",
                      b.shard_of(), ", ", n, " elements, state split over ", shards, " ranks)");
      dataBytes = bytes * shards;
    }
    if (b.external() &&
        ((b.arena() != plan::STATE && b.arena() != plan::HOST && b.arena() != plan::NVME) ||
         b.view() || dtype != DType::F32 || b.has_fill() || !b.initial_data().empty()))
      return errorf(where(), ": an external weight is an owning float32 state buffer without "
                             "initial data or fill");
    if (hasData && !b.has_fill() && !b.external() && (int64_t)b.initial_data().size() != dataBytes)
      return errorf(where(), " needs ", dataBytes, " bytes of initial data, the plan has ",
                    b.initial_data().size());
    if (!hasData && !b.initial_data().empty())
      return errorf(where(), b.view() ? " is a view, which has no initial data" : " is in the ",
                    b.view() ? "" : plan::Arena_Name(b.arena()),
                    b.view() ? "" : " arena, which has no initial data");
  }

  // Parameter layout: inside buckets of the right size.
  for (const plan::ParamLayout &l : p.params()) {
    auto bad = [&](const std::string &what) {
      return errorf("parameter '", l.name(), "': ", what);
    };
    if (l.bucket() < 0 || l.bucket() >= p.buffers_size() || l.grad() < -1 ||
        l.grad() >= p.buffers_size())
      return bad("bucket or gradient buffer index out of range");
    int64_t n = 1;
    for (int64_t d : l.shape()) {
      if (d < 0 || (d > 0 && n > kMaxArenaBytes / d))
        return bad("invalid shape");
      n *= d;
    }
    if (l.bucket_size() < 1 || l.bucket_size() % shards || l.offset() < 0 ||
        l.offset() > l.bucket_size() - n)
      return bad("elements [" + std::to_string(l.offset()) + ", " + std::to_string(l.offset() + n) +
                 ") are outside its bucket of " + std::to_string(l.bucket_size()));
    int64_t shard = l.bucket_size() / shards;
    // The parameters are float32; a gradient bucket may be 16-bit (mixed
    // precision's gradients, written whole once per step: zero-partition).
    for (auto [index, sharded] :
         {std::pair{l.bucket(), l.sharded()}, {l.grad(), l.grad_sharded()}}) {
      if (index < 0)
        continue; // no gradient bucket
      plan::DType dt = p.buffers(index).dtype();
      bool narrow = index == l.grad() && (dt == plan::BF16 || dt == plan::F16);
      if ((dt != plan::F32 && !narrow) ||
          bytesOf[index] != (narrow ? 2 : 4) * (sharded ? shard : l.bucket_size()))
        return bad("buffer " + std::to_string(index) + " is not a float32 " +
                   (index == l.grad() ? "(or 16-bit gradient) " : "") + "bucket of " +
                   std::to_string(sharded ? shard : l.bucket_size()) + " elements");
    }
  }

  // Programs.
  std::set<std::string> programNames;
  for (const plan::Program &prog : p.programs()) {
    if (!programNames.insert(prog.name()).second)
      return errorf("program '", prog.name(), "' is defined twice");
    auto checkIndex = [&](int index, const std::string &what) -> Status {
      if (index < 0 || index >= p.buffers_size())
        return errorf("program '", prog.name(), "': ", what, " refers to buffer ", index,
                      ", but the plan has ", p.buffers_size());
      return Status::ok();
    };
    for (const plan::NamedBuffer &nb : prog.inputs()) {
      ZRT_RETURN_IF_ERROR(checkIndex(nb.buffer(), "input '" + nb.name() + "'"));
      if (p.buffers(nb.buffer()).arena() != plan::INPUT)
        return errorf("program '", prog.name(), "': input '", nb.name(),
                      "' is not in the input arena");
    }
    for (const plan::NamedBuffer &nb : prog.outputs())
      ZRT_RETURN_IF_ERROR(checkIndex(nb.buffer(), "output '" + nb.name() + "'"));
    // Async collectives and kernels in flight: their inputs must not be
    // written and their outputs neither read nor written until their wait
    // (on the last output).
    struct InFlight {
      std::vector<int> inputs, outputs;
      const char *what;
      int output() const { return outputs.back(); }
    };
    std::vector<InFlight> inFlight;
    auto overlaps = [&](int a, int b) {
      const plan::Buffer &x = p.buffers(a), &y = p.buffers(b);
      return x.arena() == y.arena() && x.offset() < y.offset() + bytesOf[b] &&
             y.offset() < x.offset() + bytesOf[a];
    };
    auto hazard = [&](const std::string &where, int index, bool writes) -> Status {
      for (const InFlight &f : inFlight) {
        for (int out : f.outputs)
          if (overlaps(index, out))
            return errorf(where, ": ", writes ? "writes" : "reads", " buffer ", index,
                          ", which an async ", f.what, " writes until its wait");
        for (int in : f.inputs)
          if (writes && overlaps(index, in))
            return errorf(where, ": writes buffer ", index, ", which an async ", f.what,
                          " reads until its wait");
      }
      return Status::ok();
    };
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction &inst = prog.instructions(i);
      std::ostringstream where;
      where << "program '" << prog.name() << "', instruction " << i;
      if (inst.has_wait()) {
        int out = inst.wait().output();
        auto it = std::find_if(inFlight.begin(), inFlight.end(),
                               [&](const InFlight &f) { return f.output() == out; });
        if (it == inFlight.end())
          return errorf(where.str(), ": waits for buffer ", out,
                        ", which no async collective, copy or kernel in flight writes last");
        inFlight.erase(it);
        continue;
      }
      if (inst.has_copy()) {
        ZRT_RETURN_IF_ERROR(checkIndex(inst.copy().source(), where.str() + " copy source"));
        ZRT_RETURN_IF_ERROR(checkIndex(inst.copy().target(), where.str() + " copy target"));
        ZRT_RETURN_IF_ERROR(hazard(where.str(), inst.copy().source(), false));
        ZRT_RETURN_IF_ERROR(hazard(where.str(), inst.copy().target(), true));
        bool nvme = p.buffers(inst.copy().source()).arena() == plan::NVME ||
                    p.buffers(inst.copy().target()).arena() == plan::NVME;
        if (inst.copy().async() && !nvme)
          return errorf(where.str(), ": only copies between the host and NVMe arenas are async");
        if (inst.copy().async())
          inFlight.push_back({{inst.copy().source()}, {inst.copy().target()}, "copy"});
      } else if (inst.has_kernel()) {
        for (int index : inst.kernel().inputs()) {
          ZRT_RETURN_IF_ERROR(checkIndex(index, where.str() + " operand"));
          ZRT_RETURN_IF_ERROR(hazard(where.str(), index, false));
        }
        for (int index : inst.kernel().outputs()) {
          ZRT_RETURN_IF_ERROR(checkIndex(index, where.str() + " operand"));
          ZRT_RETURN_IF_ERROR(hazard(where.str(), index, true));
        }
        if (inst.kernel().async()) {
          if (inst.kernel().outputs_size() == 0)
            return errorf(where.str(), ": an async kernel needs an output to wait on");
          inFlight.push_back({{inst.kernel().inputs().begin(), inst.kernel().inputs().end()},
                              {inst.kernel().outputs().begin(), inst.kernel().outputs().end()},
                              "kernel"});
        }
      } else if (inst.has_collective()) {
        ZRT_RETURN_IF_ERROR(
            checkIndex(inst.collective().input(), where.str() + " collective input"));
        ZRT_RETURN_IF_ERROR(
            checkIndex(inst.collective().output(), where.str() + " collective output"));
        ZRT_RETURN_IF_ERROR(hazard(where.str(), inst.collective().input(), false));
        ZRT_RETURN_IF_ERROR(hazard(where.str(), inst.collective().output(), true));
        if (inst.collective().async()) {
          if (inst.collective().kind() == plan::Collective::LOCAL_SHARD)
            return errorf(where.str(), ": local_shard is not communication; it cannot be async");
          inFlight.push_back(
              {{inst.collective().input()}, {inst.collective().output()}, "collective"});
        }
      }
      if (inst.has_copy()) {
        const plan::Copy &c = inst.copy();
        ZRT_RETURN_IF_ERROR(checkIndex(c.source(), where.str() + " copy source"));
        ZRT_RETURN_IF_ERROR(checkIndex(c.target(), where.str() + " copy target"));
        const plan::Buffer &src = p.buffers(c.source()), &dst = p.buffers(c.target());
        if (dst.arena() == plan::CONSTANT || dst.arena() == plan::INPUT)
          return errorf(where.str(), ": copies into buffer ", c.target(), ", which is read-only");
        if ((src.arena() == plan::NVME || dst.arena() == plan::NVME) &&
            (src.arena() == plan::NVME ? dst.arena() : src.arena()) != plan::HOST)
          return errorf(where.str(), ": copies between buffers ", c.source(), " and ", c.target(),
                        ": the NVMe arena is read and written from the host arena only");
        if (src.dtype() != dst.dtype() || bytesOf[c.source()] != bytesOf[c.target()])
          return errorf(where.str(), ": copies buffer ", c.source(), " into buffer ", c.target(),
                        " of another type or size");
        continue;
      }
      if (inst.has_collective()) {
        const plan::Collective &c = inst.collective();
        if (!c.location().empty())
          where << " (" << c.location() << ")";
        ZRT_RETURN_IF_ERROR(checkIndex(c.input(), where.str() + " collective input"));
        ZRT_RETURN_IF_ERROR(checkIndex(c.output(), where.str() + " collective output"));
        const plan::Buffer &in = p.buffers(c.input()), &out = p.buffers(c.output());
        bool floats =
            in.dtype() == plan::F32 || in.dtype() == plan::BF16 || in.dtype() == plan::F16;
        bool movesBytes = (in.dtype() == plan::I8 && (c.kind() == plan::Collective::ALL_GATHER ||
                                                      c.kind() == plan::Collective::ALL_TO_ALL)) ||
                          (in.dtype() == plan::I64 && (c.kind() == plan::Collective::ALL_GATHER ||
                                                       c.kind() == plan::Collective::LOCAL_SHARD));
        if ((!floats && !movesBytes) || out.dtype() != in.dtype())
          return errorf(where.str(), ": collectives move float32, bfloat16 or float16 buffers "
                                     "(and all-gathers and all-to-alls int8 ones, all-gathers "
                                     "and local shards int64 ones), input and output of one type");
        if (out.arena() == plan::CONSTANT || out.arena() == plan::INPUT)
          return errorf(where.str(), ": a collective writes buffer ", c.output(),
                        ", which is read-only");
        if (in.arena() == plan::NVME || out.arena() == plan::NVME)
          return errorf(where.str(),
                        ": a collective on an NVMe buffer (copy it to the host first)");
        if (!plan::Collective::Group_IsValid(c.group()))
          return errorf(where.str(), ": unknown collective group ", (int)c.group());
        if (c.group() != plan::Collective::WORLD && p.group_size() == 0)
          return errorf(where.str(), ": a collective over a mesh group (",
                        plan::Collective::Group_Name(c.group()), ") in a plan without a mesh");
        // The ranks it spans.
        const int64_t ranks = c.group() == plan::Collective::WORLD   ? world
                              : c.group() == plan::Collective::GROUP ? p.group_size()
                                                                     : world / p.group_size();
        int64_t elem = in.dtype() == plan::F32   ? 4
                       : in.dtype() == plan::I8  ? 1
                       : in.dtype() == plan::I64 ? 8
                                                 : 2;
        int64_t ni = bytesOf[c.input()] / elem, no = bytesOf[c.output()] / elem;
        bool ok = false;
        switch (c.kind()) {
        case plan::Collective::ALL_REDUCE:
          ok = ni == no;
          break;
        case plan::Collective::REDUCE_SCATTER:
        case plan::Collective::LOCAL_SHARD:
          ok = in.shape_size() == 1 && out.shape_size() == 1 && ni == no * ranks;
          break;
        case plan::Collective::ALL_GATHER:
          ok = in.shape_size() == 1 && out.shape_size() == 1 && no == ni * ranks;
          break;
        case plan::Collective::ALL_TO_ALL:
          ok = in.shape_size() == 1 && out.shape_size() == 1 && ni == no && ni % ranks == 0;
          break;
        default:
          return errorf(where.str(), ": unknown collective kind ", (int)c.kind());
        }
        if (!ok)
          return errorf(where.str(), ": collective ", plan::Collective::Kind_Name(c.kind()), " of ",
                        ni, " into ", no, " elements does not fit its ", ranks, " ranks (",
                        plan::Collective::Group_Name(c.group()), ")");
        if (c.reduce() != plan::Collective::SUM && c.reduce() != plan::Collective::AVG)
          return errorf(where.str(), ": unknown reduction ", (int)c.reduce());
        continue;
      }
      if (!inst.has_kernel())
        return errorf(where.str(), ": unknown instruction kind");
      const plan::Kernel &k = inst.kernel();
      if (!k.location().empty())
        where << " (" << k.location() << ")";
      std::optional<KernelId> id = lookupKernel(k.name());
      if (!id)
        return errorf(where.str(), ": unknown kernel '", k.name(), "' (known: ", kernelNameList(),
                      ")");
      const KernelInfo *info = &cpuKernel(*id);
      for (const auto *list : {&k.inputs(), &k.outputs()})
        for (int index : *list) {
          ZRT_RETURN_IF_ERROR(checkIndex(index, where.str() + " operand"));
          if (p.buffers(index).arena() == plan::NVME)
            return errorf(where.str(), ": kernel '", k.name(), "' reads or writes buffer ", index,
                          ", which is in the NVMe arena (copy it to the host first)");
        }
      KernelCall call = describeKernel(p, k);
      for (int index : k.outputs()) {
        int arena = p.buffers(index).arena();
        if (arena == plan::CONSTANT || arena == plan::INPUT)
          return errorf(where.str(), ": kernel '", k.name(), "' writes buffer ", index,
                        ", which is read-only (", plan::Arena_Name(p.buffers(index).arena()), ")");
      }
      std::string problem = info->check(call);
      if (!problem.empty())
        return errorf(where.str(), ": kernel '", k.name(), "' ", problem);
    }
    if (!inFlight.empty())
      return errorf("program '", prog.name(), "': the async ", inFlight.front().what,
                    " writing buffer ", inFlight.front().output(), " is never waited for");
  }
  // Plans of zcc before the field have none.
  if (p.micro_batch() != 0 && p.micro_batch() != planMicroBatch(p))
    return errorf("the plan's micro_batch ", p.micro_batch(), " is not its micro_step's ",
                  planMicroBatch(p));
  return Status::ok();
}

int64_t zrt::planMicroBatch(const plan::Plan &plan) {
  const plan::Program *micro = plan.has_training() ? findProgram(plan, "micro_step") : nullptr;
  if (micro)
    for (const plan::NamedBuffer &in : micro->inputs()) {
      if (isTrainerInput(in.name()) || in.buffer() < 0 || in.buffer() >= plan.buffers_size())
        continue;
      const plan::Buffer &b = plan.buffers(in.buffer());
      if (b.shape_size() > 0)
        return b.shape(0);
    }
  return 0;
}

Status zrt::parsePlan(const std::string &bytes, plan::Plan &out) {
  if (bytes.empty())
    return Status::error("the plan file is empty");
  if (!out.ParseFromString(bytes))
    return Status::error("not a valid plan (corrupt or truncated file?); compile one with "
                         "zcc MODEL.onnx -o MODEL.zplan");
  return validatePlan(out);
}

Status zrt::loadPlan(const std::string &path, plan::Plan &out) {
  std::string bytes;
  // Protobuf reads at most 2 GiB; a plan carries no weights beyond that.
  ZRT_RETURN_IF_ERROR(readRegularFile(path, bytes, int64_t(2) << 30));
  Status s = parsePlan(bytes, out);
  if (!s)
    return errorf(path, ": ", s.message());
  return Status::ok();
}

Status zrt::loadPlanHeader(const std::string &path, plan::Plan &out) {
  namespace io = google::protobuf::io;
  using google::protobuf::internal::WireFormatLite;
  int fd;
  int64_t size;
  ZRT_RETURN_IF_ERROR(openRegularFile(path, fd, size));
  io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  // The small fields copied as they are, the large ones skipped (a seek).
  std::string kept;
  bool ok = true;
  {
    io::CodedInputStream in(&file);
    io::StringOutputStream keptStream(&kept);
    io::CodedOutputStream keep(&keptStream);
    while (uint32_t tag = in.ReadTag()) {
      switch (WireFormatLite::GetTagFieldNumber(tag)) {
      case plan::Plan::kBuffersFieldNumber:
      case plan::Plan::kProgramsFieldNumber:
      case plan::Plan::kParamsFieldNumber:
      case plan::Plan::kRecordFieldNumber:
        ok = WireFormatLite::SkipField(&in, tag);
        break;
      default:
        ok = WireFormatLite::SkipField(&in, tag, &keep);
      }
      if (!ok)
        break;
    }
    ok = ok && in.ConsumedEntireMessage();
  }
  if (file.GetErrno())
    return errorf(path, ": ", std::strerror(file.GetErrno()));
  if (!ok || !out.ParseFromString(kept))
    return errorf(path, ": not a plan file (compile one with zcc)");
  if (out.micro_batch() == 0 && out.has_training()) {
    // A plan of zcc before the field: read it all.
    plan::Plan full;
    ZRT_RETURN_IF_ERROR(loadPlan(path, full));
    out.set_micro_batch(planMicroBatch(full));
  }
  return Status::ok();
}

const plan::Program *zrt::findProgram(const plan::Plan &plan, const std::string &name) {
  for (const plan::Program &p : plan.programs())
    if (p.name() == name)
      return &p;
  return nullptr;
}

int zrt::namedBuffer(const plan::Program *program, bool output, const std::string &name) {
  if (!program)
    return -1;
  for (const plan::NamedBuffer &b : output ? program->outputs() : program->inputs())
    if (b.name() == name)
      return b.buffer();
  return -1;
}

TensorRef zrt::describeBuffer(const plan::Buffer &b) {
  TensorRef t;
  toDType(b.dtype(), t.dtype);
  t.shape.assign(b.shape().begin(), b.shape().end());
  return t;
}

KernelCall zrt::describeKernel(const plan::Plan &p, const plan::Kernel &k) {
  KernelCall call;
  for (int index : k.inputs())
    call.in.push_back(describeBuffer(p.buffers(index)));
  for (int index : k.outputs())
    call.out.push_back(describeBuffer(p.buffers(index)));
  call.ints.assign(k.ints().begin(), k.ints().end());
  call.floats.assign(k.floats().begin(), k.floats().end());
  call.code = k.code().empty() ? nullptr : &k.code();
  return call;
}
