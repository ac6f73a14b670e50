//===- zrun.cpp - run a zcc plan ------------------------------------------===//
//
// The runtime half of zcc: no LLVM/MLIR in this process. This file is the
// command line (CLI11) and calls into the runtime: each command's body is in
// runtime/run/Run.h, the launchers in runtime/launch/Launch.h. Everything is
// validated before anything runs; every error names what and where.
//
// Size (991 lines): the CLI11 declarations of every command's flags and
// help (train's alone are 160 lines, in addTrain); the bodies are in
// runtime/run, run() parses and dispatches. Moving train's declarations and
// the CLI helpers they share with the other commands to files of their own,
// and the flags' shared groups (data, checkpoints, backend) to a table, is
// open in issue 51.
//
//===----------------------------------------------------------------------===//
#include "comm/Rendezvous.h"
#include "cuda/CudaExecutor.h"
#include "exec/Trace.h"
#include "launch/Launch.h"
#include "plan/PlanLoader.h"
#include "run/Run.h"
#include "support/ByteSize.h"
#include "support/Files.h"
#include "support/Signals.h"
#include "train/Checkpoint.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

using namespace zrt;

namespace {

int fail(const Status &s) {
  std::fprintf(stderr, "zrun: error: %s\n", s.message().c_str());
  return 1;
}

/// A command-line mistake: the error and where to read about the options.
int usageError(const std::string &message, const std::string &command) {
  std::fprintf(stderr, "zrun: error: %s\n(zrun %s--help lists the options)\n", message.c_str(),
               command.empty() ? "" : (command + " ").c_str());
  return 2;
}

//===--- option values ----------------------------------------------------===//
// CLI11 validators whose messages read "--flag: expected WHAT, got 'VALUE'".

CLI::Validator check(std::string what, std::function<bool(const std::string &)> ok) {
  return CLI::Validator(
      [what, ok](std::string &value) -> std::string {
        return ok(value) ? "" : "expected " + what + ", got '" + value + "'";
      },
      "");
}

CLI::Validator integer(int64_t min, std::string what, int64_t max = INT64_MAX) {
  return check(std::move(what), [min, max](const std::string &v) {
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(v.c_str(), &end, 10);
    return !v.empty() && !*end && errno == 0 && n >= min && n <= max;
  });
}

CLI::Validator number(double min, bool strict, std::string what) {
  return check(std::move(what), [min, strict](const std::string &v) {
    char *end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    return !v.empty() && !*end && std::isfinite(x) && (strict ? x > min : x >= min);
  });
}

CLI::Validator oneOf(std::set<std::string> values, std::string what) {
  return check(std::move(what), [values](const std::string &v) { return values.count(v) > 0; });
}

const CLI::Validator kAssignment = check("NAME=FILE", [](const std::string &v) {
  size_t eq = v.find('=');
  return eq != std::string::npos && eq > 0 && eq + 1 < v.size();
});

NamedFiles splitAssignments(const std::vector<std::string> &values) {
  NamedFiles out;
  for (const std::string &v : values) {
    size_t eq = v.find('=');
    out.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  return out;
}

/// Sets |out| when the option is given (the plan's value stays otherwise).
template <typename T>
CLI::Option *optional(CLI::App *app, const std::string &name, std::optional<T> &out,
                      const std::string &help) {
  return app->add_option_function<T>(
      name, [&out](const T &v) { out = v; }, help);
}

//===--- the options every command takes ----------------------------------===//

struct Common {
  RunOptions run;
  std::vector<std::string> data;
};

void addCommon(CLI::App *cmd, Common &c, const std::string &planHelp) {
  cmd->allow_extras(); // reported as "unknown option" (unknownArgument)
  cmd->add_option("PLAN", c.run.plan, planHelp)->required();
  cmd->add_option("--data", c.data,
                  "an array of samples (.npy, first axis samples) for the plan input NAME")
      ->type_name("NAME=FILE.npy")
      ->allow_extra_args(false) // one value per --data
      ->check(kAssignment);
  // A size (16GiB, 1.5GB, 4096), turned into bytes for the int64 option
  // (one validator: CLI11 runs a transform before the checks added earlier).
  auto sizeOption = [&](const char *name, int64_t &into, const char *help) {
    cmd->add_option(name, into, help)
        ->type_name("SIZE")
        ->transform(CLI::Validator(
            [](std::string &v) -> std::string {
              std::optional<int64_t> bytes = parseByteSize(v);
              if (!bytes || *bytes <= 0)
                return "expected a size such as 16GiB, 1.5GB or 4096, got '" + v + "'";
              v = std::to_string(*bytes);
              return "";
            },
            ""));
  };
  sizeOption("--memory-budget", c.run.memoryBudget,
             "device memory a rank may use, e.g. 16GiB (default: the plan's, from zcc "
             "--memory-budget); refused if exceeded");
  sizeOption("--host-memory-budget", c.run.hostMemoryBudget,
             "pinned host memory a rank may use for offloaded state, e.g. 32GiB (default: the "
             "plan's, from zcc --host-memory-budget); refused if exceeded");
  cmd->add_option("--weights", c.run.weights,
                  "initial weights: this ONNX model's initializers, or safetensors (a Hugging "
                  "Face checkpoint folder, sharded or not, or one file; F32/BF16/F16) by tensor "
                  "name (needed by plans compiled with zcc --weights external)")
      ->type_name("MODEL.onnx|DIR|FILE.safetensors");
  cmd->add_option("--backend", c.run.backend, "cpu or cuda (default: the plan's zcc --target)")
      ->type_name("cpu|cuda")
      ->check(oneOf({"cpu", "cuda"}, "cpu or cuda"));
  cmd->add_flag("--print-memory", c.run.printMemory, "print the bytes of the arenas");
  cmd->add_option("--nvme-path", c.run.nvmePath,
                  "a plan of zcc --offload-optimizer nvme: the directory of the swap files "
                  "(default: the plan's zcc --nvme-path)")
      ->type_name("DIR");
  cmd->add_flag("--cuda-graphs", c.run.cuda.graphs,
                "--backend cuda: run one-rank programs as CUDA graphs (captured on their "
                "second run)");
  cmd->add_flag("--gemm-tune", c.run.cuda.gemmTune,
                "--backend cuda: time cuBLASLt's 8 best-ranked algorithms for each GEMM shape on "
                "its first call and keep the fastest (runs may then differ in the last bits)");
  cmd->add_option("--offload-chunk", c.run.cuda.offloadChunk,
                  "--backend cuda, zero-offload: elements per chunk of the host optimizer "
                  "(default 16M; 0: whole kernels)")
      ->type_name("N")
      ->check(integer(0, "a number of elements (0: whole kernels)"));
}

/// Arguments the command did not take: the first one, as an error.
std::optional<std::string> unknownArgument(const CLI::App *cmd) {
  for (const std::string &a : cmd->remaining())
    return (a.size() > 1 && a[0] == '-' ? "unknown option '" : "unexpected argument '") + a + "'";
  return std::nullopt;
}

//===--- launching --------------------------------------------------------===//

struct LaunchFlags {
  int nprocPerNode = 0, masterPort = 29500;
  HostLaunch hosts; // hostfile empty: no hostfile launch
  Restarts restarts;
};

/// --nproc-per-node and --master-port: ranks as processes of this node.
void addLocalLaunch(CLI::App *cmd, LaunchFlags &l, const char *group) {
  cmd->add_option("--nproc-per-node", l.nprocPerNode,
                  "run N ranks as processes of this node (NCCL on GPUs, Gloo on the CPU; "
                  "torchrun's environment)")
      ->type_name("N")
      ->check(integer(1, "1 to 4096 processes", 4096))
      ->group(group);
  cmd->add_option("--master-port", l.masterPort, "the rendezvous port (default 29500)")
      ->type_name("P")
      ->check(integer(1, "a port (1-65535)", 65535))
      ->group(group);
}

void addLaunch(CLI::App *cmd, LaunchFlags &l) {
  const char *group = "Launch (one process per GPU; DeepSpeed's hostfile over ssh)";
  addLocalLaunch(cmd, l, group);
  cmd->add_option("--hostfile", l.hosts.hostfile,
                  "DeepSpeed's hostfile ('HOST slots=N'): one zrun per node over ssh")
      ->type_name("FILE")
      ->group(group);
  cmd->add_option("--include", l.hosts.include, "only these hosts and GPUs")
      ->type_name("H[:GPUS]@..")
      ->group(group);
  cmd->add_option("--exclude", l.hosts.exclude, "not these hosts and GPUs")
      ->type_name("H[:GPUS]@..")
      ->group(group);
  cmd->add_option("--num_nodes", l.hosts.numNodes, "the first N hosts")
      ->type_name("N")
      ->check(integer(1, "a positive number"))
      ->group(group);
  cmd->add_option("--num_gpus", l.hosts.numGpus, "the first N GPUs of each host")
      ->type_name("N")
      ->check(integer(1, "a positive number"))
      ->group(group);
  cmd->add_flag("--dry-run", l.hosts.dryRun, "print the ssh commands instead")->group(group);
  cmd->add_option("--max-restarts", l.restarts.max,
                  "start a failed job again up to K times, from its last checkpoint "
                  "(--checkpoint-dir)")
      ->type_name("K")
      ->check(integer(0, "0 to 1000 restarts", 1000))
      ->group(group);
  cmd->add_option("--min-nodes", l.restarts.minNodes,
                  "a restarted --hostfile job goes on with N or more nodes that answer "
                  "(default: all)")
      ->type_name("N")
      ->check(integer(1, "a positive number"))
      ->group(group);
}

/// The index in |args| (zrun COMMAND ...) of |cmd|'s first positional
/// argument: the first that is neither an option nor an option's value.
size_t positionalIndex(const CLI::App *cmd, const std::vector<std::string> &args) {
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a.size() < 2 || a[0] != '-')
      return i;
    if (a.find('=') != std::string::npos)
      continue;
    const CLI::Option *o = cmd->get_option_no_throw(a);
    if (o && o->get_items_expected_min() > 0)
      ++i;
  }
  return 0;
}

/// argv without the options in |withValue| (and their values) and the flags
/// in |flags|; both spellings, "--name VALUE" and "--name=VALUE".
std::vector<std::string> without(int argc, char **argv, const std::set<std::string> &withValue,
                                 const std::set<std::string> &flags) {
  std::vector<std::string> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    std::string name = a.substr(0, a.find('='));
    if (withValue.count(a) && i + 1 < argc) {
      ++i;
      continue;
    }
    if ((withValue.count(name) && name != a) || flags.count(a))
      continue;
    rest.push_back(a);
  }
  return rest;
}

std::string selfPath(const char *argv0) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, n) : argv0;
}

//===--- the commands, after parsing --------------------------------------===//

/// The inputs of a run, which no output may overwrite.
/// What a command reads, for its outputs' checks (OutputPaths).
OutputPaths inputsOf(const Common &c) {
  OutputPaths outputs;
  outputs.addInput(c.run.plan);
  outputs.addInput(c.run.weights);
  std::error_code ec;
  if (!c.run.weights.empty() && std::filesystem::is_directory(c.run.weights, ec))
    outputs.addInputFolder(c.run.weights); // a Hugging Face checkpoint folder
  for (const auto &[name, path] : c.run.data)
    outputs.addInput(path);
  return outputs;
}

/// --tokens and the options that say how a token file is cut.
void addTokenOptions(CLI::App *cmd, TokenSource &tokens) {
  cmd->add_option("--tokens", tokens.path,
                  "token ids (uint16, or uint32 with --token-bytes 4; raw as nanoGPT writes "
                  "them or with llm.c's header) cut into input_ids and labels shifted by one")
      ->type_name("FILE.bin");
  cmd->add_option("--token-bytes", tokens.bytesPerToken, "2 (uint16, default) or 4 (uint32)")
      ->type_name("2|4")
      ->check(oneOf({"2", "4"}, "2 (uint16) or 4 (uint32)"));
  cmd->add_option("--eos", tokens.eos,
                  "documents are separated by this token: the label after it (the next "
                  "document's first token) is -100, not trained on; a plan of zcc "
                  "--per-document gets each token's position in its document (position_ids) "
                  "and attends within each")
      ->type_name("ID")
      ->check(integer(0, "a token id (a non-negative integer)"));
  cmd->add_option("--prompt-mask", tokens.promptMask,
                  "one byte per token of --tokens; a label whose byte is nonzero (a prompt "
                  "token) is -100, not trained on")
      ->type_name("FILE");
}

int runEval(const Common &c, const EvalOptions &eval) {
  OutputPaths outputs = inputsOf(c);
  outputs.addInput(eval.tokens.path);
  outputs.addInput(eval.tokens.promptMask);
  for (const auto &[name, path] : eval.outputs)
    if (Status s = outputs.claim("--output " + name, path); !s)
      return fail(s);
  std::optional<double> loss;
  if (Status s = evaluate(c.run, eval, loss); !s)
    return fail(s);
  if (loss)
    std::printf("loss: %.9g\n", *loss);
  return 0;
}

int runGradcheck(const Common &c, const GradCheckOptions &options) {
  std::vector<GradCheckResult> results;
  if (Status s = gradcheck(c.run, options, results); !s)
    return fail(s);
  double worst = 0;
  int failed = 0;
  for (const GradCheckResult &r : results) {
    bool ok = r.relativeError <= options.tolerance;
    worst = std::max(worst, r.relativeError);
    failed += !ok;
    std::printf("%-60s analytic %+.6e numeric %+.6e (+-%.1e) rel %.2e%s\n", r.name.c_str(),
                r.analytic, r.numeric, r.resolution, r.relativeError, ok ? "" : "  FAIL");
  }
  std::printf("gradcheck: %zu parameters, worst relative error %.2e, %d above %.0e\n",
              results.size(), worst, failed, options.tolerance);
  return failed ? 1 : 0;
}

int runKernels(const Common &c, const std::string &ptxDir) {
  plan::Plan plan;
  if (Status s = loadRunPlan(c.run, plan); !s)
    return fail(s);
  std::string why;
  bool cuda = cudaUsable(why) || why.find("built without") == std::string::npos;
  KernelReport report =
      kernelReport(plan, [&](const plan::Kernel &k) { return cudaRunsNatively(plan, k); });
  if (cuda)
    for (const FallbackInstruction &f : report.fallback)
      std::printf("host fallback: %s:%d %s (%s) %s\n", f.program.c_str(), f.index, f.kernel.c_str(),
                  f.location.c_str(), f.shapes.c_str());
  if (!ptxDir.empty()) {
    int written = 0;
    if (Status s = writeGeneratedPtx(plan, ptxDir, written); !s)
      return fail(s);
    std::printf("generated: %d distinct kernels (PTX) written to %s\n", written, ptxDir.c_str());
  }
  int64_t total = 0, fallback = 0;
  for (const auto &[name, kind] : report.kinds) {
    std::string note = cuda && kind.fallback
                           ? "  (" + std::to_string(kind.fallback) + " on the host fallback)"
                           : "";
    std::printf("%-24s %6lld%s\n", name.c_str(), (long long)kind.count, note.c_str());
    total += kind.count;
    fallback += kind.fallback;
  }
  if (cuda)
    std::printf("kernels: %lld in %zu kinds, %lld on the CUDA backend's host fallback\n",
                (long long)total, report.kinds.size(), (long long)fallback);
  else
    std::printf("kernels: %lld in %zu kinds (this zrun has no CUDA backend)\n", (long long)total,
                report.kinds.size());
  return 0;
}

struct ExportOptions {
  std::string checkpoint, safetensors, onnxIn, onnxOut, hf, dtype = "fp32", maxShardSize = "5GB";
};

/// Consolidates the ranks' shards into whole float32 tensors.
int runExport(const ExportOptions &e) {
  if (e.safetensors.empty() && e.onnxIn.empty() && e.hf.empty())
    return usageError("export writes --hf DIR, --safetensors OUT and/or --onnx MODEL.onnx -o "
                      "OUT.onnx",
                      "export");
  HfExportOptions hf;
  hf.bf16 = e.dtype == "bf16";
  if (std::optional<int64_t> size = parseByteSize(e.maxShardSize); size && *size > 0)
    hf.maxShardBytes = *size;
  else
    return usageError("--max-shard-size " + e.maxShardSize + ": not a size (e.g. 5GB, 500MB, 2GiB)",
                      "export");
  if (e.hf.empty() && e.maxShardSize != "5GB")
    return usageError("--max-shard-size goes with --hf DIR", "export");
  if (e.hf.empty() && e.safetensors.empty() && e.dtype != "fp32")
    return usageError("--dtype goes with --hf DIR or --safetensors OUT", "export");
  if (e.onnxIn.empty() != e.onnxOut.empty())
    return usageError("--onnx MODEL.onnx and -o TRAINED.onnx go together", "export");
  std::string dir;
  plan::Checkpoint manifest;
  std::vector<NamedTensor> tensors;
  std::string note;
  if (Status s = openCheckpoint("export", e.checkpoint, dir, manifest, note); !s)
    return fail(s);
  if (!note.empty())
    std::fprintf(stderr, "zrun: export: %s\n", note.c_str());
  // The outputs: none inside the checkpoint read (its step, its 'latest'),
  // none the --onnx model, none each other's.
  OutputPaths outputs;
  outputs.addInput(e.onnxIn);
  outputs.addInputFolder(dir);
  outputs.addCheckpointRoot(std::filesystem::path(dir).parent_path().string());
  if (!e.safetensors.empty())
    if (Status s = outputs.claim("--safetensors", e.safetensors); !s)
      return fail(s);
  if (!e.onnxOut.empty())
    if (Status s = outputs.claim("-o", e.onnxOut); !s)
      return fail(s);
  if (!e.hf.empty())
    if (Status s = outputs.claimFolder("--hf", e.hf); !s)
      return fail(s);
  if (Status s = consolidate(dir, manifest, tensors); !s)
    return fail(s);
  int trainable = 0;
  for (const NamedTensor &t : tensors)
    trainable += t.trainable;
  if (!e.safetensors.empty()) {
    if (Status s = writeSafetensors(e.safetensors, tensors, manifest, hf.bf16); !s)
      return fail(s);
    std::printf("%s: %zu tensors (%d trained) after %lld steps\n", e.safetensors.c_str(),
                tensors.size(), trainable, (long long)manifest.steps_done());
  }
  if (!e.hf.empty()) {
    HfExportSummary summary;
    if (Status s = writeHfCheckpoint(e.hf, tensors, manifest, hf, summary); !s)
      return fail(s);
    std::printf("%s: %d tensors (%s, %.1f MB in %d file%s)%s after %lld steps\n", e.hf.c_str(),
                summary.tensors, hf.bf16 ? "bf16" : "fp32", summary.bytes / 1e6, summary.shards,
                summary.shards == 1 ? "" : "s + model.safetensors.index.json",
                summary.config ? " and config.json" : "", (long long)manifest.steps_done());
    if (!summary.config)
      std::fprintf(stderr,
                   "zrun: export: the export record has no config (the model was not "
                   "a Hugging Face one); copy its config.json into %s\n",
                   e.hf.c_str());
  }
  if (!e.onnxIn.empty()) {
    int replaced = 0;
    if (Status s = writeTrainedOnnx(e.onnxIn, e.onnxOut, tensors, replaced); !s)
      return fail(s);
    std::printf("%s: %d initializers of %s replaced by the trained ones\n", e.onnxOut.c_str(),
                replaced, e.onnxIn.c_str());
  }
  return 0;
}

int runDevices() {
  std::string why;
  if (cudaUsable(why)) {
    std::printf("cuda: usable\n");
    return 0;
  }
  std::printf("cuda: %s\n", why.c_str());
  return 1;
}

/// zrun comm-bench: launches the ranks (--nproc-per-node), or runs the
/// sweep as one; rank 0 prints the table. Exits 1 if a check failed.
int runCommBench(int argc, char **argv, CommBenchOptions o, const std::vector<std::string> &sizes,
                 const std::string &dtype, const LaunchFlags &launch,
                 const std::optional<LaunchEnv> &job) {
  for (const std::string &one : sizes) {
    std::optional<int64_t> bytes = parseByteSize(one);
    if (!bytes || *bytes <= 0)
      return usageError("--sizes: '" + one + "' is not a size (e.g. 4096, 16M, 1GiB)",
                        "comm-bench");
    o.sizes.push_back(*bytes);
  }
  o.type = dtype == "fp32" ? CommType::F32 : dtype == "fp16" ? CommType::F16 : CommType::BF16;
  if (!job && launch.nprocPerNode > 0) {
    int exitCode = 1;
    std::vector<std::string> rest = without(argc, argv, {"--nproc-per-node", "--master-port"}, {});
    if (Status s = launchLocal(rest, launch.nprocPerNode, launch.masterPort, Restarts{}, exitCode);
        !s)
      return fail(s);
    return exitCode;
  }
  std::vector<CommBenchRow> rows;
  if (Status s = commBench(o, job, rows); !s)
    return fail(s);
  if (job && job->rank != 0)
    return std::all_of(rows.begin(), rows.end(), [](auto &r) { return r.correct; }) ? 0 : 1;
  int world = job ? job->world : 1;
  std::printf("comm-bench: %d rank%s, %s, %s; a call's time is the mean of %d after %d "
              "warm-up calls, averaged over the ranks\n",
              world, world == 1 ? "" : "s",
              o.backend == "cuda" ? "NCCL on device buffers" : "Gloo on host buffers",
              commTypeName(o.type), o.iters, o.warmup);
  std::printf("%-15s %14s %12s %13s %13s  %s\n", "collective", "bytes", "time (us)", "algbw (GB/s)",
              "busbw (GB/s)", "check");
  bool ok = true;
  for (const CommBenchRow &r : rows) {
    ok &= r.correct;
    std::printf("%-15s %14lld %12.1f %13.3f %13.3f  %s\n", benchCollectiveName(r.op),
                (long long)r.bytes, r.seconds * 1e6, r.algbw / 1e9, r.busbw / 1e9,
                r.correct ? "ok" : "WRONG RESULT");
  }
  return ok ? 0 : 1;
}

const char *kDescription = "zrun: runs a plan that zcc compiled (docs/runtime.md); "
                           "'zrun COMMAND --help' lists a command's options";

} // namespace

/// zrun train's options and what run() needs of them after parsing.
struct TrainCommand {
  CLI::App *app = nullptr;
  TrainOptions t;
  LaunchFlags launch;
  std::optional<std::string> warmupType;
  std::string traceSteps;
  bool testCrashInSave = false;
  double testSlowSave = 0;
};

/// Adds `zrun train` and its options to |app|, into |c|.
static void addTrain(CLI::App &app, Common &common, const std::string &planHelp, TrainCommand &c) {
  CLI::App *train = c.app = app.add_subcommand(
      "train", "run N optimizer steps; each consumes the next global batch (micro-batch x "
               "accumulation steps x world size samples) and logs one line");
  addCommon(train, common, planHelp);
  train->add_option("--steps", c.t.steps, "optimizer steps to run (required)")
      ->type_name("N")
      ->check(integer(1, "a positive integer"));
  optional(train, "--lr", c.t.lr, "base learning rate (default: the plan's, from zcc --lr)")
      ->type_name("LR")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--lr-schedule", c.t.lrSchedule,
           "constant (default); warmup-cosine (linear warmup from 0 over --warmup-steps, cosine "
           "to 0 at --total-steps); DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR "
           "(docs/training.md)")
      ->type_name("S");
  optional(train, "--warmup-steps", c.t.warmupSteps, "warmup steps")
      ->type_name("N")
      ->check(integer(0, "a non-negative integer"));
  optional(train, "--total-steps", c.t.totalSteps, "the schedule's length (default: --steps)")
      ->type_name("N")
      ->check(integer(1, "a positive integer"));
  optional(train, "--warmup-type", c.warmupType, "log (DeepSpeed's default) or linear")
      ->type_name("log|linear")
      ->check(oneOf({"log", "linear"}, "log or linear"));
  optional(train, "--warmup-min-lr", c.t.warmupMinLr, "WarmupLR, WarmupDecayLR: the first lr")
      ->type_name("LR")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--warmup-min-ratio", c.t.warmupMinRatio, "WarmupCosineLR: the first lr / lr")
      ->type_name("R")
      ->check(number(0, false, "a non-negative number"));
  optional(train, "--cos-min-ratio", c.t.cosMinRatio, "WarmupCosineLR: the last lr / lr")
      ->type_name("R")
      ->check(number(0, false, "a non-negative number"));
  train
      ->add_option("--metrics", c.t.metrics,
                   "one JSON object per step (written atomically when the run ends)")
      ->type_name("FILE.jsonl");
  addTokenOptions(train, c.t.tokens);
  train
      ->add_option("--eval-data", c.t.evalData,
                   "evaluate this set every --eval-every steps: a token file (cut as --tokens "
                   "is) or NAME=FILE.npy per input; 'eval_loss' in the log and metrics")
      ->type_name("FILE.bin|NAME=FILE.npy")
      ->allow_extra_args(false);
  train
      ->add_option("--eval-prompt-mask", c.t.evalPromptMask,
                   "--eval-data's prompt mask (as --prompt-mask)")
      ->type_name("FILE");
  train
      ->add_option("--eval-every", c.t.evalEvery,
                   "steps between evaluations (default: once, after the last step)")
      ->type_name("N")
      ->check(integer(1, "a positive number of steps"));
  train
      ->add_option("--eval-batches", c.t.evalBatches,
                   "global batches per evaluation (default: the whole --eval-data)")
      ->type_name("K")
      ->check(integer(1, "a positive integer"));
  train
      ->add_option("--seed", c.t.seed,
                   "dropout's seed (default 42, as Hugging Face's Trainer): the same seed, the "
                   "same masks at any world size")
      ->type_name("SEED")
      ->check(integer(0, "a seed (a non-negative integer)"));
  train
      ->add_option("--shuffle", c.t.shuffleSeed,
                   "visit samples in a seeded random order, new each epoch")
      ->type_name("SEED")
      ->check(integer(0, "a seed (a non-negative integer)"));
  train
      ->add_option("--checkpoint-dir", c.t.checkpointDir,
                   "save checkpoints here (at the last step, and every --save-every)")
      ->type_name("DIR");
  train
      ->add_option("--save-every-minutes", c.t.saveEveryMinutes,
                   "also save when this many minutes have passed since the last save")
      ->type_name("M")
      ->check(number(0, true, "a positive number of minutes"));
  train->add_option("--save-every", c.t.saveEvery, "steps between checkpoints")
      ->type_name("K")
      ->check(integer(1, "a positive number of steps"));
  train
      ->add_option("--keep-last", c.t.keepLast,
                   "keep the newest N checkpoints (never the one 'latest' names; default: all)")
      ->type_name("N")
      ->check(integer(1, "a positive number of checkpoints"));
  train
      ->add_option("--resume", c.t.resume,
                   "continue from a checkpoint (a step-K directory, or a --checkpoint-dir: "
                   "its latest)")
      ->type_name("DIR");
  train->add_flag("--profile", c.t.profile,
                  "time every instruction (rank 0, steps after the first); print where a "
                  "step's time goes, by kind, shape and instruction");
  train
      ->add_option("--trace", c.t.trace,
                   "write the traced steps as a Chrome trace (Perfetto, chrome://tracing): a "
                   "track per rank and stream, every instruction a slice with its ONNX node, "
                   "bytes and FLOPs")
      ->type_name("FILE.json");
  train
      ->add_option("--dashboard", c.t.dashboard,
                   "keep a self-contained HTML page of the run up to date (loss, lr, grad norm, "
                   "loss scale, tokens/s, TFLOP/s or MFU, memory); opens with no network")
      ->type_name("FILE.html");
  train
      ->add_option("--tensorboard", c.t.tensorboard,
                   "write TensorBoard event files here (train/loss, train/learning_rate, "
                   "train/grad_norm, eval/loss, perf/..., one event a step)")
      ->type_name("DIR");
  train
      ->add_option("--memory-page", c.t.memoryPage,
                   "after the run, the plan's memory over the step (zcc --emit=memory-html) "
                   "with what this run measured")
      ->type_name("FILE.html");
  train
      ->add_option("--peak-tflops", c.t.peakTflops,
                   "a GPU's dense peak (e.g. 989.4 for H100/H200 bf16): --dashboard shows MFU "
                   "against it")
      ->type_name("TFLOPS")
      ->check(number(0, true, "a positive number of TFLOP/s"));
  train
      ->add_option("--trace-steps", c.traceSteps,
                   "the steps --trace records, 0-based: A (one step) or A:B (A to B-1; default "
                   "1:3)")
      ->type_name("A[:B]")
      ->check(check("A or A:B, steps with A < B", [](const std::string &v) {
        char *end = nullptr;
        long long a = std::strtoll(v.c_str(), &end, 10), b = a + 1;
        if (end == v.c_str() || a < 0)
          return false;
        if (*end == ':') {
          const char *second = end + 1;
          b = std::strtoll(second, &end, 10);
          if (end == second)
            return false;
        }
        return !*end && b > a;
      }));
  train
      ->add_option("--comm-timeout", c.t.commTimeout,
                   "seconds a collective may wait before the job stops (default 300)")
      ->type_name("SECONDS")
      ->check(number(0, true, "a positive number of seconds"));
  train->add_flag("--test-crash-in-save", c.testCrashInSave)->group(""); // tests only: hidden
  train->add_option("--test-slow-save", c.testSlowSave)->group("");      // tests only: hidden
  train->add_flag("--sync-save", c.t.syncSave,
                  "finish writing each checkpoint before the next step (default: periodic saves "
                  "are written while training goes on)");
  addLaunch(train, c.launch);
}

/// Runs `zrun train` as parsed into |c|: a launcher (--hostfile, or
/// --nproc-per-node), or this process's ranks; its exit code.
static int runTrain(TrainCommand &c, Common &common, CLI::App *cmd, int argc, char **argv,
                    const std::optional<LaunchEnv> &job, StopOnSignals &signals) {
  if (c.t.steps == 0)
    return usageError("train needs --steps N", "train");
  if ((c.t.saveEvery > 0 || c.t.saveEveryMinutes > 0) && c.t.checkpointDir.empty())
    return usageError(c.t.saveEvery > 0 ? "--save-every needs --checkpoint-dir"
                                        : "--save-every-minutes needs --checkpoint-dir",
                      "train");
  if (c.warmupType)
    c.t.warmupLog = *c.warmupType == "log";
  if (!c.traceSteps.empty()) {
    if (c.t.trace.empty())
      return usageError("--trace-steps goes with --trace FILE.json", "train");
    size_t colon = c.traceSteps.find(':');
    c.t.traceFrom = std::stoll(c.traceSteps.substr(0, colon));
    c.t.traceTo =
        colon == std::string::npos ? c.t.traceFrom + 1 : std::stoll(c.traceSteps.substr(colon + 1));
    if (c.t.traceFrom >= c.t.steps)
      return usageError("--trace-steps " + c.traceSteps + ": the run has steps 0 to " +
                            std::to_string(c.t.steps - 1) + " (--steps " +
                            std::to_string(c.t.steps) + ")",
                        "train");
  }
  c.t.crashInSave = c.testCrashInSave;
  c.t.slowSave = c.testSlowSave;
  c.t.stop = &signals.flag();
  int exitCode = 1;
  Restarts &restarts = c.launch.restarts;
  restarts.checkpointDir = c.t.checkpointDir;
  if (restarts.max > 0 && c.t.checkpointDir.empty())
    return usageError("--max-restarts needs --checkpoint-dir (a restart continues from the "
                      "job's last checkpoint there)",
                      "train");
  if (restarts.max > 0 && c.launch.nprocPerNode == 0 && c.launch.hosts.hostfile.empty() && !job)
    return usageError("--max-restarts restarts a launched job: add --nproc-per-node N or "
                      "--hostfile FILE",
                      "train");
  if (restarts.minNodes > 0 && c.launch.hosts.hostfile.empty())
    return usageError("--min-nodes needs --hostfile", "train");
  if (!job && !c.launch.hosts.hostfile.empty()) {
    // One `zrun train ... --nproc-per-node n` per node over ssh.
    c.launch.hosts.port = c.launch.masterPort;
    c.launch.hosts.argv =
        without(argc, argv,
                {"--hostfile", "--include", "--exclude", "--num_nodes", "--num_gpus",
                 "--master-port", "--nproc-per-node", "--max-restarts", "--min-nodes"},
                {"--dry-run"});
    c.launch.hosts.argv[0] = selfPath(argv[0]);
    restarts.planArg = positionalIndex(cmd, c.launch.hosts.argv);
    if (Status s = launchHosts(c.launch.hosts, restarts, exitCode); !s)
      return fail(s);
    return exitCode;
  }
  if (!job && c.launch.nprocPerNode > 0) {
    std::vector<std::string> rest =
        without(argc, argv, {"--nproc-per-node", "--master-port", "--max-restarts"}, {});
    restarts.planArg = positionalIndex(cmd, rest);
    if (Status s =
            launchLocal(rest, c.launch.nprocPerNode, c.launch.masterPort, restarts, exitCode);
        !s)
      return fail(s);
    return exitCode;
  }
  TrainOutcome outcome;
  if (Status s = zrt::train(common.run, c.t, job, outcome); !s)
    return fail(s);
  // Stopped by a signal: 0 after a checkpoint on SIGTERM (what a preempted
  // cluster job is expected to return), else 128 + the signal.
  if (outcome.stoppedBy)
    return outcome.stoppedBy == SIGTERM && !outcome.checkpoint.empty() ? 0
                                                                       : 128 + outcome.stoppedBy;
  return 0;
}

/// Adds `zrun export` and its options to |app|, into |o|.
static CLI::App *addExport(CLI::App &app, ExportOptions &o) {
  CLI::App *exportCmd = app.add_subcommand(
      "export", "a checkpoint's weights, consolidated from the ranks' shards, as float32");
  exportCmd->allow_extras();
  exportCmd
      ->add_option("CHECKPOINT", o.checkpoint,
                   "a --checkpoint-dir (its latest) or one of its step-K")
      ->required();
  exportCmd
      ->add_option("--hf", o.hf,
                   "a Hugging Face checkpoint folder: safetensors under the module's parameter "
                   "names (tools/zcc-export's record) and config.json, for from_pretrained")
      ->type_name("DIR");
  exportCmd
      ->add_option("--dtype", o.dtype,
                   "with --hf or --safetensors: fp32 (default: the float32 masters) or bf16 (them "
                   "rounded)")
      ->type_name("fp32|bf16")
      ->check(oneOf({"fp32", "bf16"}, "fp32 or bf16"));
  exportCmd
      ->add_option("--max-shard-size", o.maxShardSize,
                   "with --hf: shard past this size, with an index (default 5GB)")
      ->type_name("SIZE");
  exportCmd->add_option("--safetensors", o.safetensors, "write safetensors here")
      ->type_name("OUT.safetensors");
  exportCmd->add_option("--onnx", o.onnxIn, "the model the plan was compiled from")
      ->type_name("MODEL.onnx");
  exportCmd->add_option("-o", o.onnxOut, "with --onnx: the trained model")
      ->type_name("TRAINED.onnx");
  return exportCmd;
}

/// zrun comm-bench's options.
struct CommBenchCommand {
  CommBenchOptions options;
  std::vector<std::string> sizes = {"1M", "16M", "256M"};
  std::string dtype = "bf16";
  LaunchFlags launch;
};

/// Adds `zrun comm-bench` and its options to |app|, into |c|.
static CLI::App *addCommBench(CLI::App &app, CommBenchCommand &c) {
  CLI::App *commBenchCmd = app.add_subcommand(
      "comm-bench", "all_reduce, all_gather and reduce_scatter timed at a sweep of sizes "
                    "(nccl-tests' algbw and busbw), each result checked; one process per GPU "
                    "with --nproc-per-node N");
  commBenchCmd
      ->add_option("--backend", c.options.backend,
                   "cuda (NCCL on device buffers; default) or cpu (Gloo on host buffers)")
      ->check(oneOf({"cpu", "cuda"}, "cpu or cuda"));
  commBenchCmd
      ->add_option("--sizes", c.sizes,
                   "each call's whole buffer, comma-separated (default 1M,16M,256M)")
      ->type_name("SIZE,..")
      ->delimiter(',');
  commBenchCmd->add_option("--dtype", c.dtype, "bf16 (default), fp16 or fp32")
      ->check(oneOf({"bf16", "fp16", "fp32"}, "bf16, fp16 or fp32"));
  commBenchCmd->add_option("--iters", c.options.iters, "timed calls a size (default 20)")
      ->type_name("N")
      ->check(integer(1, "a positive number", 1000000));
  commBenchCmd->add_option("--warmup", c.options.warmup, "untimed calls first (default 5)")
      ->type_name("N")
      ->check(integer(0, "0 or more calls", 1000000));
  commBenchCmd
      ->add_option("--comm-timeout", c.options.commTimeout,
                   "seconds a collective may wait before the job stops (default 300)")
      ->type_name("SECONDS")
      ->check(number(0, true, "a positive number of seconds"));
  addLocalLaunch(commBenchCmd, c.launch, "Launch (one process per GPU)");
  return commBenchCmd;
}

int run(int argc, char **argv);

int main(int argc, char **argv) {
  int code = run(argc, argv);
  if (code == 0)
    return 0;
  // A failed run ends here, without the libraries' exit handlers: OpenBLAS's
  // joins a worker thread that, under a tight `ulimit -v`, retries an
  // allocation for ever (the error has been reported; files are closed).
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

int run(int argc, char **argv) {
  // zrun train stops cleanly on SIGTERM, SIGINT and SIGHUP (support/
  // Signals.h): from the start, so that a signal during start-up is not lost.
  std::optional<StopOnSignals> signals;
  if (argc > 1 && !std::strcmp(argv[1], "train"))
    signals.emplace();
  CLI::App app(kDescription, "zrun");
  app.set_version_flag("--version", std::string("zrun ") + ZCC_VERSION + " (zcc project)");
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  const std::set<std::string> commands = {"eval",   "train",   "gradcheck",  "kernels",
                                          "export", "devices", "trace-page", "comm-bench"};
  Common common;
  const std::string planHelp = "the plan (zcc -o FILE.zplan)";

  CLI::App *eval =
      app.add_subcommand("eval", "evaluate K global batches; print the mean loss ('loss: <mean>')");
  EvalOptions evalOptions;
  std::vector<std::string> outputs;
  addCommon(eval, common, planHelp);
  eval->add_option("--batches", evalOptions.batches, "global batches to evaluate (default 1)")
      ->type_name("K")
      ->check(integer(1, "a positive integer"));
  addTokenOptions(eval, evalOptions.tokens);
  eval->add_option("--output", outputs,
                   "write the graph output NAME of the first batch (or the input NAME as fed)")
      ->type_name("NAME=FILE.npy")
      ->allow_extra_args(false) // one value per --data
      ->check(kAssignment);

  TrainCommand train;
  addTrain(app, common, planHelp, train);

  CLI::App *grad = app.add_subcommand(
      "gradcheck", "compare micro_step's gradients with central differences of the eval loss "
                   "along a direction per parameter (its gradient's plus a random one; first "
                   "batch, CPU backend); differences within the float32 loss's resolution "
                   "(+-, 4 ulps over 2 H) do not count");
  GradCheckOptions gradOptions;
  addCommon(grad, common, planHelp);
  grad->add_option("--param", gradOptions.param, "only parameters whose name contains this")
      ->type_name("NAME");
  grad->add_option("--epsilon", gradOptions.epsilon, "the finite-difference step (default 1e-2)")
      ->type_name("H")
      ->check(number(0, true, "a positive number"));
  grad->add_option("--tolerance", gradOptions.tolerance,
                   "the largest relative error that passes (default 1e-2)")
      ->type_name("T")
      ->check(number(0, true, "a positive number"));

  CLI::App *kernels = app.add_subcommand(
      "kernels", "the plan's kernel kinds with their counts; which would run on the CUDA "
                 "backend's host fallback");
  std::string ptxDir;
  addCommon(kernels, common, planHelp);
  kernels->add_option("--ptx", ptxDir, "write the generated kernels' PTX here (for ptxas)")
      ->type_name("DIR");

  ExportOptions exportOptions;
  CLI::App *exportCmd = addExport(app, exportOptions);

  CLI::App *devices = app.add_subcommand("devices", "whether --backend cuda can run here");

  CLI::App *tracePage = app.add_subcommand(
      "trace-page", "a timeline page (self-contained HTML) of zrun train --trace's files: a "
                    "lane per rank and track, zoom and pan, time by kind");
  std::vector<std::string> tracePageInputs;
  std::string tracePageOut;
  tracePage
      ->add_option("TRACE", tracePageInputs,
                   "the trace (a launched job: NAME.json and its NAME.rank<r>.json files)")
      ->required();
  tracePage->add_option("-o", tracePageOut, "the page to write")
      ->type_name("PAGE.html")
      ->required();

  CommBenchCommand bench;
  CLI::App *commBenchCmd = addCommBench(app, bench);

  if (argc < 2) {
    std::cerr << app.help();
    return 2;
  }
  if (argv[1][0] != '-' && !commands.count(argv[1]))
    return usageError("unknown command '" + std::string(argv[1]) + "'", "");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::vector<CLI::App *> chosen = app.get_subcommands();
    return usageError(e.what(), chosen.empty() ? "" : chosen[0]->get_name());
  }
  CLI::App *cmd = app.get_subcommands().at(0);
  if (auto error = unknownArgument(cmd))
    return usageError(*error, cmd->get_name());
  common.run.data = splitAssignments(common.data);
  evalOptions.outputs = splitAssignments(outputs);

  // Launched as one rank of a multi-process job (torchrun-style environment
  // or zrun --nproc-per-node): which one, and on which GPU.
  std::string envError;
  LaunchEnv launchEnv;
  std::optional<LaunchEnv> job;
  if (readLaunchEnv(launchEnv, envError))
    job = launchEnv;
  if (!envError.empty())
    return usageError("launcher environment: " + envError, "");

  try {
    if (cmd == eval)
      return runEval(common, evalOptions);
    if (cmd == grad)
      return runGradcheck(common, gradOptions);
    if (cmd == kernels)
      return runKernels(common, ptxDir);
    if (cmd == exportCmd)
      return runExport(exportOptions);
    if (cmd == devices)
      return runDevices();
    if (cmd == commBenchCmd)
      return runCommBench(argc, argv, bench.options, bench.sizes, bench.dtype, bench.launch, job);
    if (cmd == tracePage) {
      size_t slices = 0;
      if (Status s = writeTracePage(tracePageInputs, tracePageOut, slices); !s)
        return fail(s);
      std::printf("trace-page: %s (%zu slices from %zu file%s)\n", tracePageOut.c_str(), slices,
                  tracePageInputs.size(), tracePageInputs.size() == 1 ? "" : "s");
      return 0;
    }
    return runTrain(train, common, cmd, argc, argv, job, *signals);
  } catch (const std::bad_alloc &) {
    return fail(errorf("out of memory allocating the plan's arenas"));
  }
}
