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
  // The training step's settings, as resolved from flags and --deepspeed.
  if (auto training = module->getAttrOfType<DictionaryAttr>("zero.training")) {
    auto f = [&](DictionaryAttr d, StringRef key) {
      auto attr = d.getAs<FloatAttr>(key);
      return attr ? attr.getValueAsDouble() : 0.0;
    };
    auto opt = training.getAs<StringAttr>("optimizer");
    os << llvm::format("  training: %s lr %g", opt ? opt.getValue().str().c_str() : "?",
                       f(training, "lr"));
    if (opt && opt.getValue() == "adamw")
      os << llvm::format(" betas (%g, %g) eps %g", f(training, "beta1"), f(training, "beta2"),
                         f(training, "eps"));
    os << llvm::format(" weight_decay %g, grad_clip %g, grad_accum %g\n",
                       f(training, "weight_decay"), f(training, "grad_clip"),
                       f(training, "grad_accum_steps"));
    if (auto sched = training.getAs<DictionaryAttr>("schedule")) {
      auto i = [&](StringRef key) {
        auto attr = sched.getAs<IntegerAttr>(key);
        return attr ? attr.getInt() : 0;
      };
      auto name = sched.getAs<StringAttr>("name");
      auto steps = [](int64_t n) { return n < 0 ? std::string("auto") : std::to_string(n); };
      auto log = sched.getAs<BoolAttr>("warmup_log");
      os << "  schedule: " << (name ? name.getValue() : "?")
         << llvm::format(" lr %g", f(sched, "lr")) << ", warmup " << steps(i("warmup_steps"))
         << " steps (" << (!log || log.getValue() ? "log" : "linear") << ")"
         << ", total " << steps(i("total_steps"))
         << llvm::format(", warmup_min_lr %g, warmup_min_ratio %g, cos_min_ratio %g\n",
                         f(sched, "warmup_min_lr"), f(sched, "warmup_min_ratio"),
                         f(sched, "cos_min_ratio"));
    }
  }
  if (auto ls = module->getAttrOfType<DictionaryAttr>("zero.loss_scaling")) {
    auto num = [&](StringRef key) -> double {
      Attribute a = ls.get(key);
      if (auto fa = dyn_cast_or_null<FloatAttr>(a))
        return fa.getValueAsDouble();
      if (auto ia = dyn_cast_or_null<IntegerAttr>(a))
        return (double)ia.getInt();
      return 0;
    };
    if (num("loss_scale") > 0)
      os << llvm::format("  loss scaling: static %g\n", num("loss_scale"));
    else
      os << llvm::format("  loss scaling: dynamic, initial 2^%g, window %g, hysteresis %g, "
                         "min %g\n",
                         num("initial_scale_power"), num("loss_scale_window"),
                         num("hysteresis"), num("min_loss_scale"));
  }
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
