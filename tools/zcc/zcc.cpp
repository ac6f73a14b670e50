//===- zcc.cpp - the zcc compiler driver ----------------------------------===//
//
// zcc MODEL.onnx|MODEL.onnxtxt -o OUT [options]: imports the model, runs the
// pipeline and writes the result. MLIR's pass-manager options
// (--mlir-print-ir-after-all, --mlir-print-ir-before=PASS, --mlir-timing, ...)
// apply to zcc's own pipeline.
//
// The settings' flags are generated from include/zcc/Pipelines/Settings.def;
// main still holds the driver's checks, the estimate command and the emit
// switch (issue 51: thin drivers).
//
//===----------------------------------------------------------------------===//
#include "DriverSupport.h"
#include "Settings.h"

#include "zcc/Conversion/Passes.h"
#include "zcc/Import/OnnxImporter.h"
#include "zcc/Pipelines/AutoPlan.h"
#include "zcc/Pipelines/Pipelines.h"
#include "zcc/Target/Plan.h"
#include "zcc/Transforms/Passes.h"
#include "zero/ZeroOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "observe/MemoryMap.h"
#include "plan/plan.pb.h"
#include "support/ByteSize.h"
#include "llvm/Config/llvm-config.h" // LLVM_VERSION_STRING
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory zccCategory("zcc options");

/// The settings' flags, one per entry of include/zcc/Pipelines/Settings.def
/// (flag::zeroStage is --zero-stage), with its default and help.
namespace flag {
#define ZCC_PIPELINE_FLAG(member, type, dflt, option, flag, value, help)                           \
  static cl::opt<type> member(flag, cl::desc(help), cl::value_desc(value), cl::init(dflt),         \
                              cl::cat(zccCategory));
#define ZCC_FLAG(member, type, dflt, flag, value, help)                                            \
  static cl::opt<type> member(flag, cl::desc(help), cl::value_desc(value), cl::init(dflt),         \
                              cl::cat(zccCategory));
#include "zcc/Pipelines/Settings.def"
} // namespace flag
static cl::OptionCategory
    irCategory("8. IR inspection (MLIR's options, applied to zcc's pipeline)");

/// libLLVM registers hundreds of backend options; --help shows zcc's own,
/// grouped by what they decide, and the MLIR options that inspect the
/// pipeline (--help-hidden shows all).
static void selectHelpOptions() {
  auto &options = cl::getRegisteredOptions();
  // Numbered: --help lists categories in name order.
  static cl::OptionCategory io("1. Model and output"), training("2. Training step"),
      precision("3. Precision and loss scaling"), zero("4. ZeRO and ranks"),
      memory("5. Memory: offload, recompute, budgets"), target("6. Target and kernels"),
      scaling("7. Scaling model and zcc estimate");
  const std::pair<cl::OptionCategory *, std::vector<llvm::StringRef>> groups[] = {
      {&io,
       {"o", "emit", "format", "weights", "deepspeed", "allow-unknown-keys", "micro-batch",
        "input-shape", "trainable", "frozen", "padding-idx", "per-document"}},
      {&training,
       {"loss", "logits", "aux-loss", "optimizer", "lr", "betas", "eps", "weight-decay", "momentum",
        "nesterov", "grad-clip", "grad-accum"}},
      {&precision,
       {"precision", "loss-scale", "initial-scale-power", "loss-scale-window", "hysteresis",
        "consecutive-hysteresis", "min-loss-scale"}},
      {&zero,
       {"zero-stage", "world-size", "reduce-bucket-size", "allgather-bucket-size",
        "stage3-param-persistence-threshold", "stage3-max-reuse-distance", "overlap-comm",
        "comm-dtype", "grad-accum-dtype", "mics-shard-size", "hpz-partition-size",
        "quantized-weights", "quantized-gradients", "quantized-gradient-bits"}},
      {&memory,
       {"recompute", "memory-budget", "host-memory-budget", "auto", "offload-optimizer",
        "offload-param", "nvme-path", "nvme-chunk"}},
      {&target, {"target", "fuse-elementwise", "optimizer-in-backward"}},
      {&scaling, {"link", "gpus-per-node", "flop-rate", "world-sizes"}},
  };
  SmallVector<const cl::OptionCategory *> shown;
  for (const auto &[category, names] : groups) {
    shown.push_back(category);
    for (llvm::StringRef name : names)
      if (cl::Option *option = options.lookup(name))
        option->Categories.assign({category}); // one group each
  }
  shown.push_back(&zccCategory); // any flag the table misses still shows
  shown.push_back(&irCategory);
  for (llvm::StringRef name :
       {"mlir-print-ir-after-all", "mlir-print-ir-before-all", "mlir-print-ir-after",
        "mlir-print-ir-before", "mlir-print-ir-after-change", "mlir-print-ir-after-failure",
        "mlir-print-ir-module-scope", "mlir-print-ir-tree-dir", "mlir-timing",
        "mlir-timing-display", "mlir-elide-elementsattrs-if-larger",
        "mlir-elide-resource-strings-if-larger", "mlir-print-debuginfo", "mlir-pass-statistics"})
    if (cl::Option *option = options.lookup(name))
      option->addCategory(irCategory);
  cl::HideUnrelatedOptions(shown);
}

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("MODEL.onnx|MODEL.onnxtxt"),
                                      cl::Required, cl::cat(zccCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output file ('-' for stdout)"),
                                       cl::value_desc("OUT"), cl::init("-"), cl::cat(zccCategory));
enum class EmitKind { Plan, Mlir, Zrt, Report, MemoryJson, MemoryHtml };
static cl::opt<EmitKind>
    emit("emit", cl::desc("what to write"), cl::init(EmitKind::Plan),
         cl::values(clEnumValN(EmitKind::Plan, "plan", "the runtime plan, for zrun (default)"),
                    clEnumValN(EmitKind::Mlir, "mlir",
                               "the zero dialect forward after import and the "
                               "forward's rewrites (no training step)"),
                    clEnumValN(EmitKind::Zrt, "zrt",
                               "the plan as zrt IR: what zcc-opt --zero-training-pipeline prints"),
                    clEnumValN(EmitKind::Report, "report", "per-rank memory table of the plan"),
                    clEnumValN(EmitKind::MemoryHtml, "memory-html",
                               "the memory over the step as a self-contained HTML page "
                               "(docs/observability.md)"),
                    clEnumValN(EmitKind::MemoryJson, "memory-json",
                               "the data of --emit=memory-html as JSON")),
         cl::cat(zccCategory));
static cl::opt<std::string>
    lossKind("loss",
             cl::desc("cross-entropy: the logits output becomes the mean cross-entropy against "
                      "a new int64 input 'labels' (ignore_index -100); none: the graph's "
                      "scalar output is the loss"),
             cl::value_desc("cross-entropy|none"), cl::init("none"), cl::cat(zccCategory));
static cl::opt<std::string>
    logitsOutput("logits",
                 cl::desc("--loss cross-entropy: the output that holds the logits (default: the "
                          "first floating-point output of rank >= 1)"),
                 cl::value_desc("OUTPUT"), cl::init(""), cl::cat(zccCategory));
static cl::list<std::string>
    auxLoss("aux-loss",
            cl::desc("add COEF x the scalar output NAME to the loss, e.g. a mixture of experts' "
                     "aux_loss=0.02 (Hugging Face's router_aux_loss_coef; repeatable)"),
            cl::value_desc("NAME=COEF"), cl::cat(zccCategory));
static cl::opt<int64_t> quantizedGradientBits(
    "quantized-gradient-bits",
    cl::desc("--quantized-gradients' bits per value: 8, or 4 (two a byte, as DeepSpeed's qgZ; "
             "half the bytes, 18x the rounding step)"),
    cl::value_desc("8|4"), cl::init(8), cl::cat(zccCategory));
static cl::opt<std::string>
    target("target",
           cl::desc("where the plan runs by default: cpu, or cuda (zrun --backend overrides)"),
           cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(zccCategory));
static cl::opt<bool> perDocument(
    "per-document",
    cl::desc("packed training data: attention stays inside each document and positions restart "
             "at each (the plan takes position_ids [batch, sequence], which zrun computes from "
             "--tokens with --eos, or reads with --data); docs/finetune.md"),
    cl::init(false), cl::cat(zccCategory));
static cl::opt<std::string> batchNormMode(
    "batch-norm",
    cl::desc("how BatchNormalization trains: train (PyTorch's model.train(): each rank's "
             "micro-batch statistics; the running statistics, frozen buffers, updated each "
             "micro-step and read by evaluation), sync (SyncBatchNorm: statistics over every "
             "data-parallel rank) or eval (model.eval(): the running statistics, fixed)"),
    cl::value_desc("train|sync|eval"), cl::init("train"), cl::cat(zccCategory));
static cl::opt<bool> fuseElementwise(
    "fuse-elementwise",
    cl::desc("--target cuda: fuse trees of elementwise arithmetic into kernels generated through "
             "MLIR's GPU -> NVVM -> PTX path (default on)"),
    cl::init(true), cl::cat(zccCategory));
static cl::opt<std::string> optimizerInBackward(
    "optimizer-in-backward",
    cl::desc("each parameter's AdamW update inside the micro-step as soon as its gradient is "
             "final (no gradient bucket; on the GPU beside the backward on a second stream), "
             "where a step is one micro-step on one rank without clipping, fp16 loss scaling "
             "or offload (else the update follows the backward): auto (default: on with "
             "--target cuda), on, off"),
    cl::value_desc("auto|on|off"), cl::init("auto"), cl::cat(zccCategory));
/// The CUDA backend's fixed device allocation besides the arenas
/// (runtime/cuda/CudaExecutor.cu: the cuBLASLt workspace).
constexpr int64_t kCudaWorkspaceBytes = 32 << 20;
static cl::opt<std::string>
    link("link",
         cl::desc("--emit=report: add the scaling model, ring collectives over these links per "
                  "GPU, e.g. nvlink=370GB/s,ib=50GB/s,hop=5us (docs/zero.md)"),
         cl::value_desc("spec"), cl::cat(zccCategory));
static cl::opt<int64_t> gpusPerNode("gpus-per-node",
                                    cl::desc("the scaling model's GPUs a node (default 8)"),
                                    cl::init(8), cl::cat(zccCategory));
static cl::opt<double>
    flopRate("flop-rate",
             cl::desc("the scaling model's sustained matmul TFLOP/s a GPU, the rest of the "
                      "step folded in (default 400)"),
             cl::init(400), cl::cat(zccCategory));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("the most device memory a rank may use, e.g. 16GiB or 1.5GB: recorded in the plan "
             "(zrun refuses to exceed it); with --auto, zcc picks a plan that fits"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(zccCategory));
static cl::opt<std::string> hostMemoryBudget(
    "host-memory-budget",
    cl::desc("the most pinned host memory a rank may use for offloaded state and its staging "
             "buffers (the host arena), e.g. 32GiB: recorded in the plan (zrun refuses to exceed "
             "it); with --auto, an offload that does not fit it moves to NVMe (--nvme-path)"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(zccCategory));
static cl::opt<bool> autoPlan(
    "auto",
    cl::desc("with --memory-budget: the fastest ZeRO stage (with --world-size > 1) and "
             "--recompute policy whose planned peak fits, and why (flags and DeepSpeed config "
             "keys that set them keep them fixed)"),
    cl::init(false), cl::cat(zccCategory));
static cl::opt<std::string> weightsMode(
    "weights",
    cl::desc("embed (default): the plan carries the model's initial weights; external: it "
             "carries none and zrun --weights MODEL.onnx loads them at start (plans of large "
             "models stay small)"),
    cl::value_desc("embed|external"), cl::init("embed"), cl::cat(zccCategory));
static cl::opt<std::string> deepspeedConfig(
    "deepspeed",
    cl::desc("a DeepSpeed JSON config: its optimizer, scheduler, fp16/bf16, gradient_clipping, "
             "batch sizes and zero_optimization; flags fill its \"auto\" values"),
    cl::value_desc("FILE.json"), cl::cat(zccCategory));
static cl::opt<bool> allowUnknownKeys(
    "allow-unknown-keys",
    cl::desc("with --deepspeed: warn about keys zcc does not know instead of refusing the "
             "config (a misspelt key would otherwise be ignored silently)"),
    cl::cat(zccCategory));
static cl::opt<std::string> betas("betas", cl::desc("AdamW betas (default 0.9,0.999)"),
                                  cl::value_desc("B1,B2"), cl::init("0.9,0.999"),
                                  cl::cat(zccCategory));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("static shape of a graph input, e.g. input_ids=4x1024 (repeatable)"),
                cl::value_desc("NAME=AxB"), cl::cat(zccCategory));
static cl::list<std::string>
    paddingIdx("padding-idx",
               cl::desc("PyTorch nn.Embedding padding index of an embedding table (ONNX drops it): "
                        "that row gets no gradient, e.g. BERT's word embeddings =0 (repeatable)"),
               cl::value_desc("INITIALIZER=IDX"), cl::cat(zccCategory));
static cl::opt<std::string>
    trainable("trainable",
              cl::desc("float initializers whose name matches REGEX train (default: all)"),
              cl::value_desc("REGEX"), cl::cat(zccCategory));
static cl::opt<std::string>
    frozen("frozen", cl::desc("float initializers whose name matches REGEX stay frozen"),
           cl::value_desc("REGEX"), cl::cat(zccCategory));

static cl::list<int64_t> estimateWorldSizes(
    "world-sizes", cl::desc("zcc estimate: the world sizes of the table (default 1,2,4,8,16,64)"),
    cl::CommaSeparated, cl::cat(zccCategory));

static cl::opt<std::string>
    reportFormat("format", cl::desc("--emit=report and zcc estimate: text (default) or json"),
                 cl::value_desc("text|json"), cl::init("text"), cl::cat(zccCategory));

/// The settings: the flags, checked, merged with the DeepSpeed config of
/// --deepspeed (read into |dsConfig|) and checked together; nullopt after
/// saying why (zcc exits 2).
static std::optional<zcc::Settings> resolveFlags(std::optional<zcc::DeepSpeedConfig> &dsConfig) {
  for (const std::string &spec : auxLoss) {
    auto [name, coef] = StringRef(spec).rsplit('=');
    double value;
    if (name.empty() || coef.getAsDouble(value) || !std::isfinite(value)) {
      llvm::errs() << "zcc: error: --aux-loss '" << spec
                   << "': expected OUTPUT=COEF with a finite COEF, e.g. aux_loss=0.02\n";
      return std::nullopt;
    }
  }
  if (!logitsOutput.empty() && lossKind != "cross-entropy") {
    llvm::errs() << "zcc: error: --logits " << logitsOutput
                 << " names the output of --loss cross-entropy; add --loss cross-entropy\n";
    return std::nullopt;
  }
  if (lossKind != "none" && lossKind != "cross-entropy") {
    llvm::errs() << "zcc: error: --loss '" << lossKind << "': expected cross-entropy or none\n";
    return std::nullopt;
  }
  // The flags, then the DeepSpeed config merged in (Settings.cpp).
  zcc::FlagValues flags;
  flags.given = [](StringRef name) {
    auto &options = cl::getRegisteredOptions();
    auto it = options.find(name);
    return it != options.end() && it->second->getNumOccurrences() > 0;
  };
  {
    zcc::Settings &f = flags.settings;
    auto [b1, b2] = StringRef(betas).split(',');
    if (b1.getAsDouble(f.beta1) || b2.getAsDouble(f.beta2) || !(f.beta1 >= 0 && f.beta1 < 1) ||
        !(f.beta2 >= 0 && f.beta2 < 1)) {
      llvm::errs() << "zcc: error: --betas '" << betas << "': expected B1,B2 in [0, 1)\n";
      return std::nullopt;
    }
    if (flag::microBatch.getNumOccurrences() && flag::microBatch <= 0) {
      llvm::errs() << "zcc: error: --micro-batch must be a positive integer, got "
                   << flag::microBatch << "\n";
      return std::nullopt;
    }
#define ZCC_PIPELINE_FLAG(member, type, dflt, option, name, value, help) f.member = flag::member;
#define ZCC_FLAG(member, type, dflt, name, value, help) f.member = flag::member;
#include "zcc/Pipelines/Settings.def"
    // PyTorch's defaults differ: AdamW decays by 0.01, SGD not at all.
    if (!flag::weightDecay.getNumOccurrences() && flag::optimizer != "adamw")
      f.weightDecay = 0.0;
  }
  if (!deepspeedConfig.empty()) {
    auto config = zcc::readDeepSpeedConfig(deepspeedConfig);
    if (!config) {
      llvm::errs() << "zcc: error: " << llvm::toString(config.takeError()) << "\n";
      return std::nullopt;
    }
    dsConfig = std::move(*config);
    for (const std::string &key : dsConfig->unknownKeys)
      llvm::errs() << "zcc: " << (allowUnknownKeys ? "warning: " : "error: ") << key
                   << (allowUnknownKeys ? "; ignored" : "") << "\n";
    if (!dsConfig->unknownKeys.empty() && !allowUnknownKeys) {
      llvm::errs() << "zcc: error: --deepspeed " << deepspeedConfig << ": "
                   << dsConfig->unknownKeys.size() << " unknown key"
                   << (dsConfig->unknownKeys.size() == 1 ? "" : "s")
                   << "; correct them, or pass --allow-unknown-keys to ignore them\n";
      return std::nullopt;
    }
  }
  auto resolved =
      zcc::resolveSettings(flags, dsConfig ? &*dsConfig : nullptr, [](const std::string &w) {
        llvm::errs() << "zcc: warning: " << w << "\n";
      });
  if (!resolved) {
    llvm::errs() << "zcc: error: " << llvm::toString(resolved.takeError()) << "\n";
    return std::nullopt;
  }
  const zcc::Settings &S = *resolved;
  if (llvm::Error e = zcc::checkSettings(S)) {
    llvm::errs() << "zcc: error: " << llvm::toString(std::move(e)) << "\n";
    return std::nullopt;
  }
  return *resolved;
}

/// What the driver's own flags decide beside the settings.
struct Choices {
  bool recomputeAuto = false;                // --recompute auto: --auto over the policies only
  std::optional<zcc::ScalingModel> scaling;  // --link, --gpus-per-node, --flop-rate
  std::optional<int64_t> budget, hostBudget; // --memory-budget, --host-memory-budget
};

/// Checks the driver's own flags (and the files) against |S| into |c|: 0,
/// or zcc's exit code after saying why.
static int checkDriverFlags(const zcc::Settings &S, bool estimate, Choices &c) {
  if (target != "cpu" && target != "cuda") {
    llvm::errs() << "zcc: error: --target '" << target << "': expected cpu or cuda\n";
    return 2;
  }
  if (optimizerInBackward != "auto" && optimizerInBackward != "on" &&
      optimizerInBackward != "off") {
    llvm::errs() << "zcc: error: --optimizer-in-backward '" << optimizerInBackward
                 << "': expected auto, on or off\n";
    return 2;
  }
  // --recompute auto: --auto over the recompute policies only.
  c.recomputeAuto = S.recompute == "auto";
  if (S.offloadOptimizer != "nvme" && S.offloadParam != "nvme" && !S.nvmePath.empty() &&
      !autoPlan) {
    llvm::errs() << "zcc: error: --nvme-path goes with --offload-optimizer nvme or --offload-param "
                    "nvme (or --auto, which may choose it)\n";
    return 2;
  }
  if (reportFormat != "text" && reportFormat != "json") {
    llvm::errs() << "zcc: error: --format " << reportFormat << ": expected text or json\n";
    return 2;
  }
  if (reportFormat == "json" && emit != EmitKind::Report && !estimate) {
    llvm::errs() << "zcc: error: --format json goes with --emit=report or zcc estimate (the "
                    "memory page's data is --emit=memory-json)\n";
    return 2;
  }
  if (reportFormat == "json" && estimate && link.getNumOccurrences()) {
    llvm::errs() << "zcc: error: --format json: zcc estimate --link's scaling table is text "
                    "only; compile a plan per world size with --emit=report --format json\n";
    return 2;
  }
  if (!link.empty() || link.getNumOccurrences() || gpusPerNode.getNumOccurrences() ||
      flopRate.getNumOccurrences()) {
    zcc::ScalingModel model;
    std::string bad = link.empty() ? "" : zcc::parseLink(link, model);
    if (!bad.empty()) {
      llvm::errs() << "zcc: error: --link '" << link << "': " << bad << "\n";
      return 2;
    }
    if (gpusPerNode < 1 || !(flopRate > 0)) {
      llvm::errs() << "zcc: error: " << (gpusPerNode < 1 ? "--gpus-per-node" : "--flop-rate")
                   << " must be positive\n";
      return 2;
    }
    if (emit != EmitKind::Report && !estimate) {
      llvm::errs() << "zcc: error: --link, --gpus-per-node and --flop-rate set the scaling "
                      "model of --emit=report; add it\n";
      return 2;
    }
    model.gpusPerNode = gpusPerNode;
    model.flopsPerSecond = flopRate * 1e12;
    c.scaling = model;
  }
  // --memory-budget, --host-memory-budget: a size, or nullopt when not given.
  for (auto [flag, text, into] :
       {std::tuple{"--memory-budget", &memoryBudget, &c.budget},
        std::tuple{"--host-memory-budget", &hostMemoryBudget, &c.hostBudget}}) {
    if (text->empty())
      continue;
    *into = zrt::parseByteSize(*text);
    if (!*into || **into <= 0) {
      llvm::errs() << "zcc: error: " << flag << " '" << *text
                   << "': expected a size such as 16GiB, 1.5GB or 4096\n";
      return 2;
    }
  }
  if ((autoPlan || c.recomputeAuto) && !c.budget) {
    llvm::errs() << "zcc: error: " << (autoPlan ? "--auto" : "--recompute auto")
                 << " picks a plan that fits --memory-budget; give one\n";
    return 2;
  }
  if (weightsMode != "embed" && weightsMode != "external") {
    llvm::errs() << "zcc: error: --weights '" << weightsMode << "': expected embed or external\n";
    return 2;
  }
  if (quantizedGradientBits != 8 && quantizedGradientBits != 4) {
    llvm::errs() << "zcc: error: --quantized-gradient-bits " << quantizedGradientBits
                 << ": qgZ quantizes gradients to 8 or 4 bits\n";
    return 2;
  }
  if (emit == EmitKind::Plan && outputFile == "-" && llvm::sys::Process::StandardOutIsDisplayed()) {
    llvm::errs() << "zcc: error: a plan is binary; write it to a file with -o MODEL.zplan\n";
    return 2;
  }
  if (std::string why = zcc::checkOutput(outputFile, {inputFile, deepspeedConfig}); !why.empty()) {
    llvm::errs() << "zcc: error: -o " << outputFile << ": " << why << "\n";
    return 2;
  }
  if (std::string why = zcc::checkInputFile(inputFile); !why.empty()) {
    llvm::errs() << "zcc: error: " << inputFile << ": " << why << "\n";
    return 1;
  }
  return 0;
}

/// The importer's options from the flags; nullopt after saying why (exit 2).
static std::optional<zcc::OnnxImportOptions> importOptions(const zcc::Settings &S) {
  zcc::OnnxImportOptions options;
  if (S.microBatch > 0)
    options.microBatch = S.microBatch;
  for (const std::string &spec : inputShapes) {
    std::string name;
    SmallVector<int64_t> dims;
    if (failed(zcc::parseInputShape(spec, name, dims))) {
      llvm::errs() << "zcc: error: --input-shape '" << spec
                   << "': expected NAME=AxBx... with positive dimensions, e.g. "
                      "input_ids=4x1024\n";
      return std::nullopt;
    }
    options.inputShapes[name] = dims;
  }
  for (const std::string &spec : paddingIdx) {
    auto [name, idx] = StringRef(spec).rsplit('=');
    int64_t value;
    if (name.empty() || idx.getAsInteger(10, value)) {
      llvm::errs()
          << "zcc: error: --padding-idx '" << spec
          << "': expected INITIALIZER=INDEX, e.g. m.bert.embeddings.word_embeddings.weight=0\n";
      return std::nullopt;
    }
    options.paddingIdx[name] = value;
  }
  options.trainableRegex = trainable;
  options.frozenRegex = frozen;
  options.skipWeightData = weightsMode == "external";
  options.perDocument = perDocument;
  using BatchNorm = zcc::OnnxImportOptions::BatchNorm;
  if (batchNormMode != "train" && batchNormMode != "sync" && batchNormMode != "eval") {
    llvm::errs() << "zcc: error: --batch-norm '" << batchNormMode
                 << "': expected train, sync or eval\n";
    return std::nullopt;
  }
  options.batchNorm = batchNormMode == "sync"   ? BatchNorm::Sync
                      : batchNormMode == "eval" ? BatchNorm::Eval
                                                : BatchNorm::Train;
  options.worldSize = S.worldSize;
  return options;
}

/// Runs the pipeline on |m| with |S| and recomputation |recompute|
/// (--recompute's, or a candidate of --auto).
static LogicalResult compile(MLIRContext &context, ModuleOp m, const zcc::Settings &S,
                             StringRef recompute) {
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  DefaultTimingManager tm;
  applyDefaultTimingManagerCLOptions(tm);
  TimingScope timing = tm.getRootScope();
  pm.enableTiming(timing);
  // Plans of models with parameters train: backward, then the optimizer.
  auto trainable = zcc::zero::attrs(m).getTrainableCountAttrHelper().getAttr(m);
  zcc::TrainingPipelineOptions o;
  zcc::setPipelineOptions(o, S, recompute);
  o.loss = lossKind == "cross-entropy" ? zcc::LossKind::CrossEntropy : zcc::LossKind::None;
  o.logits = logitsOutput;
  o.auxLoss = std::vector<std::string>(auxLoss.begin(), auxLoss.end());
  o.target = target == "cuda" ? zcc::Target::CUDA : zcc::Target::CPU;
  o.fuseElementwise = fuseElementwise;
  o.perDocument = perDocument;
  o.optimizerInBackward = optimizerInBackward == "on"    ? zcc::InBackward::On
                          : optimizerInBackward == "off" ? zcc::InBackward::Off
                                                         : zcc::InBackward::Auto;
  o.lower = emit != EmitKind::Mlir;
  o.train = emit != EmitKind::Mlir && trainable && trainable.getInt() > 0;
  o.quantizedGradientBits = quantizedGradientBits;
  zcc::buildTrainingPipeline(pm, o);
  return pm.run(m);
}

/// zcc estimate --link: the model-state table, then the scaling model's step
/// at each world size (one plan compiled per size, --zero-stage's).
static int runEstimate(MLIRContext &context, ModuleOp module, const zcc::Settings &S,
                       const zcc::ScalingModel &scaling) {
  if (zcc::printEstimate(
          module, llvm::outs(), S.precision != "fp32", reportFormat == "json",
          SmallVector<int64_t>(estimateWorldSizes.begin(), estimateWorldSizes.end())) != 0)
    return 1;
  llvm::outs() << llvm::format(
      "\nscaling model, ZeRO stage %lld, %lld GPUs a node (the report's, docs/zero.md):\n"
      "  %8s %6s %12s %14s %12s %12s %10s\n",
      (long long)S.zeroStage, (long long)scaling.gpusPerNode, "W", "nodes", "compute ms", "comm ms",
      "exposed ms", "step ms", "of compute");
  for (int64_t w : estimateWorldSizes.empty() ? SmallVector<int64_t>{1, 2, 4, 8, 16, 64}
                                              : SmallVector<int64_t>(estimateWorldSizes.begin(),
                                                                     estimateWorldSizes.end())) {
    OwningOpRef<ModuleOp> copy = module.clone();
    zcc::Settings at = S;
    at.worldSize = w;
    if (failed(compile(context, *copy, at, S.recompute)))
      return 1;
    zcc::ScalingEstimate e = zcc::estimateScaling(*copy, scaling);
    llvm::outs() << llvm::format("  %8lld %6lld %12.2f %14.2f %12.2f %12.2f %9.1f%%\n",
                                 (long long)w, (long long)e.nodes, e.compute * 1e3,
                                 e.communication * 1e3, e.exposed * 1e3, e.step * 1e3,
                                 e.step > 0 ? 100 * e.compute / e.step : 100.0);
  }
  return 0;
}

/// Bytes of |arena| a rank of a compiled module allocates.
static int64_t arenaBytes(ModuleOp m, zcc::zrt::Arena arena) {
  return std::max<int64_t>(0, zcc::zrt::arenaBytes(m, arena));
}
/// Device bytes a rank of a compiled module allocates: its arenas, and the
/// CUDA backend's fixed cuBLASLt workspace (runtime/cuda).
static int64_t devicePeak(ModuleOp m) {
  int64_t bytes = 0;
  for (zcc::zrt::Arena arena : {zcc::zrt::Arena::device, zcc::zrt::Arena::state,
                                zcc::zrt::Arena::constant, zcc::zrt::Arena::input})
    bytes += arenaBytes(m, arena);
  return bytes + (target == "cuda" ? kCudaWorkspaceBytes : 0);
}

/// Compiles |module| in place: as the settings say, or by --auto's search
/// (lib/Pipelines/AutoPlan.cpp) within the budgets, where what the flags or
/// the DeepSpeed config fixed stays.
static LogicalResult plan(MLIRContext &context, OwningOpRef<ModuleOp> &module,
                          const zcc::Settings &S, const Choices &c,
                          const std::optional<zcc::DeepSpeedConfig> &dsConfig) {
  if (!autoPlan && !c.recomputeAuto) {
    if (failed(compile(context, *module, S, S.recompute)))
      return failure();
    if (c.budget && emit != EmitKind::Mlir && devicePeak(*module) > *c.budget)
      llvm::errs() << "zcc: warning: the plan needs " << zrt::showByteSize(devicePeak(*module))
                   << " per rank, more than --memory-budget " << zrt::showByteSize(*c.budget)
                   << ": zrun will refuse it; zcc --auto picks a plan that fits\n";
    if (c.hostBudget && emit != EmitKind::Mlir &&
        arenaBytes(*module, zcc::zrt::Arena::host) > *c.hostBudget)
      llvm::errs() << "zcc: warning: the plan needs "
                   << zrt::showByteSize(arenaBytes(*module, zcc::zrt::Arena::host))
                   << " of pinned host memory per rank, more than --host-memory-budget "
                   << zrt::showByteSize(*c.hostBudget)
                   << ": zrun will refuse it; --offload-optimizer nvme keeps the optimizer state "
                      "on disk, and zcc --auto with --nvme-path picks a plan that fits\n";
  } else {
    // --auto (lib/Pipelines/AutoPlan.cpp): what the flags or the DeepSpeed
    // config fixed stays; the rest is searched.
    zcc::AutoPlanRequest request;
    request.budget = *c.budget;
    request.hostBudget = c.hostBudget.value_or(0);
    request.nvme = !S.nvmePath.empty();
    request.worldSize = S.worldSize;
    request.stage = S.zeroStage;
    request.recompute = S.recompute;
    request.offloadOptimizer = S.offloadOptimizer;
    request.offloadParam = S.offloadParam;
    request.stageFixed =
        c.recomputeAuto || flag::zeroStage.getNumOccurrences() || (dsConfig && dsConfig->zeroStage);
    request.recomputeFixed = !c.recomputeAuto && (flag::recompute.getNumOccurrences() ||
                                                  (dsConfig && dsConfig->activationCheckpointing));
    request.offloadFixed = c.recomputeAuto || flag::offloadOptimizer.getNumOccurrences() ||
                           flag::offloadParam.getNumOccurrences() ||
                           (dsConfig && (dsConfig->offloadOptimizer || dsConfig->offloadParam));
    auto chosen = zcc::chooseAutoPlan(
        *module, request,
        [&](ModuleOp m, const zcc::AutoCandidate &c) {
          zcc::Settings T = S;
          T.zeroStage = c.stage;
          T.recompute = c.recompute;
          StringRef offload = c.offload;
          T.offloadOptimizer = offload.starts_with("nvme") ? "nvme"
                               : offload == "none"         ? "none"
                                                           : "cpu";
          T.offloadParam = offload.ends_with("+nvmeparam") ? "nvme"
                           : offload.ends_with("+param")   ? "cpu"
                                                           : "none";
          return compile(context, m, T, c.recompute);
        },
        devicePeak, [&](ModuleOp m) { return arenaBytes(m, zcc::zrt::Arena::host); }, llvm::errs());
    if (failed(chosen))
      return failure();
    module = std::move(*chosen);
  }
  return success();
}

/// Records the budgets in the compiled |module| and checks it: an arena past
/// what a plan may hold is an error, stage 3 that shards nothing a warning.
static LogicalResult finishPlan(ModuleOp module, const zcc::Settings &S, const Choices &c) {
  if (c.budget)
    zcc::zero::attrs(module).getMemoryBudgetAttrHelper().setAttr(
        module, Builder(module.getContext()).getI64IntegerAttr(*c.budget));
  if (c.hostBudget)
    zcc::zero::attrs(module).getHostMemoryBudgetAttrHelper().setAttr(
        module, Builder(module.getContext()).getI64IntegerAttr(*c.hostBudget));
  // zrun's plan validator holds every arena to zrt::kMaxArenaBytes: a plan
  // that needs more is refused here, with its size, not written for zrun to
  // call invalid.
  if (emit == EmitKind::Plan)
    for (zcc::zrt::Arena arena :
         {zcc::zrt::Arena::device, zcc::zrt::Arena::state, zcc::zrt::Arena::constant,
          zcc::zrt::Arena::input, zcc::zrt::Arena::host, zcc::zrt::Arena::nvme}) {
      int64_t bytes = arenaBytes(module, arena);
      if (bytes <= zrt::kMaxArenaBytes)
        continue;
      llvm::errs() << "zcc: error: the plan's " << zcc::zrt::stringifyArena(arena)
                   << " arena needs " << zrt::showByteSize(bytes) << " per rank"
                   << (S.microBatch ? " (micro-batch " + std::to_string(S.microBatch) + ")" : "")
                   << ", more than the " << zrt::showByteSize(zrt::kMaxArenaBytes)
                   << " a plan may hold: lower --micro-batch or the sequence length "
                      "(--input-shape), or partition the state over more ranks (--world-size "
                      "with --zero-stage)\n";
      return failure();
    }

  // Stage 3 that shards nothing (every parameter under the persistence
  // threshold, as with small models): said, not left to the report.
  if (S.zeroStage == 3 && S.worldSize > 1)
    if (auto buckets = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module);
        buckets && !buckets.empty() &&
        llvm::none_of(buckets.getAsRange<zcc::zero::BucketAttr>(),
                      [](zcc::zero::BucketAttr d) { return d.getParamSharded() && !d.getCopy(); }))
      llvm::errs() << "zcc: warning: --zero-stage 3 partitions no parameter: each has fewer "
                      "elements than --stage3-param-persistence-threshold ("
                   << S.persistenceThreshold
                   << ") and stays whole on every rank, as DeepSpeed keeps them; lower the "
                      "threshold to shard them\n";
  return success();
}

/// Writes what --emit asks for of the compiled |module| to -o: 0, or 1.
static int emitOutput(ModuleOp module, const Choices &c, const std::vector<std::string> &command) {
  std::string errorMessage;
  auto output = openOutputFile(outputFile, &errorMessage);
  if (!output) {
    llvm::errs() << "zcc: error: -o " << outputFile << ": " << errorMessage << "\n";
    return 1;
  }
  switch (emit) {
  case EmitKind::Mlir:
  case EmitKind::Zrt:
    module->print(output->os(), OpPrintingFlags());
    output->os() << "\n";
    break;
  case EmitKind::Plan:
    if (failed(zcc::writePlan(module, output->os(),
                              {/*externalWeights=*/weightsMode == "external", command})))
      return 1;
    break;
  case EmitKind::Report:
    if (failed(zcc::printReport(module, output->os(), c.scaling ? &*c.scaling : nullptr,
                                reportFormat == "json")))
      return 1;
    break;
  case EmitKind::MemoryJson:
  case EmitKind::MemoryHtml: {
    // The page reads the plan zrun would run (weights left out: external).
    std::string bytes;
    llvm::raw_string_ostream os(bytes);
    if (failed(zcc::writePlan(module, os, {/*externalWeights=*/true, command})))
      return 1;
    zrt::plan::Plan plan;
    if (!plan.ParseFromString(os.str())) {
      llvm::errs() << "zcc: error: --emit=memory-*: the plan did not read back\n";
      return 1;
    }
    std::string source = llvm::sys::path::filename(inputFile).str();
    output->os() << (emit == EmitKind::MemoryHtml ? zrt::memoryPageHtml(plan, source)
                                                  : zrt::memoryMapJson(plan, source));
    break;
  }
  }
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // zcc estimate MODEL [--world-sizes 1,2,4] [--trainable/--frozen ...]
  bool estimate = argc > 1 && StringRef(argv[1]) == "estimate";
  SmallVector<char *> args(argv, argv + argc);
  std::vector<std::string> command = zcc::recordedCommand(argc, argv);
  if (estimate)
    args.erase(args.begin() + 1);
  argc = args.size();
  argv = args.data();
  // Passes are registered so that --mlir-print-ir-before=PASS can name them.
  registerTransformsPasses();
  zcc::registerZeroPasses();
  zcc::registerConversionPasses();
  zcc::registerTrainingPipeline();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  selectHelpOptions();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "zcc " << ZCC_VERSION << " (MLIR/LLVM " << LLVM_VERSION_STRING << ")\n";
  });
  // A bad option exits 2, as zcc's other usage errors (docs/runtime.md).
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "zcc: compiles an ONNX model into a sharded (ZeRO) training step\n\n"
          "  zcc model.onnx --micro-batch 4 --loss cross-entropy -o model.zplan   (zrun runs it)\n"
          "  zcc model.onnx --micro-batch 4 --emit=mlir -o model.mlir\n"
          "  zcc estimate model.onnx --world-sizes 1,8,64   (model-state memory per ZeRO stage "
          "and world size, DeepSpeed's estimator; no plan)\n\n"
          "Passes of the pipeline (zero-training-pipeline; for "
          "--mlir-print-ir-before/after=PASS):\n"
          "zero-training-config, canonicalize, zero-recognize-patterns, cse, zero-attach-loss,\n"
          "zero-mixed-precision, zero-fuse-attention and zero-pad-gemms (--target cuda),\n"
          "zero-autodiff, zero-recompute, zero-partition, zero-optimizer, zero-schedule,\n"
          "zero-offload, zero-fuse-epilogues, zero-fuse-optimizer, zero-group-casts, "
          "zero-fuse-elementwise\n"
          "(--target cuda), zero-optimizer-in-backward, zero-plan-memory, convert-zero-to-zrt.\n"
          "--help-hidden lists every LLVM/MLIR option.\n",
          &llvm::errs()))
    return 2;

  DialectRegistry registry;
  zcc::registerCodegenInterfaces(registry);
  MLIRContext context(registry);
  context.loadDialect<zcc::zero::ZeroDialect, zcc::zrt::ZrtDialect, func::FuncDialect>();
  zcc::printDiagnostics(context);

  std::optional<zcc::DeepSpeedConfig> dsConfig;
  std::optional<zcc::Settings> settings = resolveFlags(dsConfig);
  if (!settings)
    return 2;
  const zcc::Settings &S = *settings;
  Choices c;
  if (int code = checkDriverFlags(S, estimate, c))
    return code;
  std::optional<zcc::OnnxImportOptions> options = importOptions(S);
  if (!options)
    return 2;
  if (estimate && !options->microBatch && !c.scaling)
    options->microBatch = 1; // the batch does not change the parameter count (it does the step's)
  OwningOpRef<ModuleOp> module = zcc::importOnnxFile(inputFile, *options, &context);
  if (!module)
    return 1;
  if (estimate && !c.scaling)
    return zcc::printEstimate(
        *module, llvm::outs(), S.precision != "fp32", reportFormat == "json",
        SmallVector<int64_t>(estimateWorldSizes.begin(), estimateWorldSizes.end()));
  if (estimate)
    return runEstimate(context, *module, S, *c.scaling);
  if (failed(plan(context, module, S, c, dsConfig)) || failed(finishPlan(*module, S, c)))
    return 1;
  return emitOutput(*module, c, command);
}
