//===- Report.cpp - the per-rank memory table -----------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Target/Plan.h"
#include "zrt/ZrtOps.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace zcc;

LogicalResult zcc::printReport(ModuleOp module, llvm::raw_ostream &os) {
  auto arena = [&](StringRef name) -> int64_t {
    auto attr = module->getAttrOfType<IntegerAttr>(("zrt." + name + "_arena_bytes").str());
    return attr ? attr.getInt() : -1;
  };
  int64_t device = arena("device"), state = arena("state"), constant = arena("constant"),
          input = arena("input");
  if (device < 0 || state < 0 || constant < 0 || input < 0)
    return module.emitError("the module has no arena sizes; run convert-zero-to-zrt first");
  int64_t params = 0, frozen = 0, grads = 0, optimizer = 0, numParams = 0, kernels = 0;
  for (auto buffer : module.getOps<zcc::zrt::BufferOp>()) {
    if (buffer.getArena() != zcc::zrt::Arena::state || buffer.getView())
      continue;
    int64_t bytes = alignArena(storageBytes(buffer.getType()));
    StringRef role = buffer.getRole() ? *buffer.getRole() : "param";
    if (buffer.getTrainable()) {
      params += bytes;
      numParams += cast<RankedTensorType>(buffer.getType()).getNumElements();
    } else if (role == "grad") {
      grads += bytes;
    } else if (role == "adam_m" || role == "adam_v" || role == "step") {
      optimizer += bytes;
    } else {
      frozen += bytes;
    }
  }
  std::string programs;
  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    int64_t n = llvm::range_size(program.getBody().front());
    kernels += n;
    programs += (programs.empty() ? "" : ", ") + program.getSymName().str() + " " +
                std::to_string(n);
  }

  auto row = [&](StringRef what, int64_t bytes, StringRef note) {
    os << llvm::format("  %-24s %14lld B %12.3f MiB  ", what.str().c_str(), (long long)bytes,
                       bytes / 1048576.0)
       << note << "\n";
  };
  auto precision = module->getAttrOfType<StringAttr>("zero.precision");
  os << "zcc memory report (per rank; world size 1, ZeRO stage 0, "
     << (precision ? precision.getValue() : "fp32") << ")\n";
  if (auto source = module->getAttrOfType<StringAttr>("zero.source"))
    os << "  model: " << source.getValue() << ", " << numParams << " trainable parameters\n";
  os << "  instructions: " << programs << "\n";
  row("parameters", params, "trainable state");
  row("gradients", grads, "accumulated over micro-steps");
  row("optimizer state", optimizer, "AdamW moments and step");
  row("frozen buffers", frozen, "state that does not train");
  row("constants", constant, "folded at compile time");
  row("inputs", input, "one micro-batch of data");
  row("activations+workspace", device, "device arena: peak of live temporaries");
  row("peak", state + constant + input + device, "sum of the arenas the runtime allocates");
  return success();
}
