//===- zrun.cpp - run a zcc plan ------------------------------------------===//
//
// The runtime half of zcc: no LLVM/MLIR in this process. This file is the
// command line (CLI11) and calls into the runtime: each command's body is in
// runtime/run/Run.h, the launchers in runtime/launch/Launch.h. Everything is
// validated before anything runs; every error names what and where.
//
// The options every command shares and the launch flags are in Cli.h;
// zrun train's options and launch in Train.h.
//
//===----------------------------------------------------------------------===//
#include "Cli.h"
#include "Train.h"

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

using namespace zrun;

namespace {

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
      "gradcheck", "compare micro_step's gradients with central differences of its loss "
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
