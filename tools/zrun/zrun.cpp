//===- zrun.cpp - run a zcc plan ------------------------------------------===//
//
//   zrun eval PLAN --data NAME=FILE.npy ... [--batches K] [--output NAME=FILE.npy]
//                  [--print-memory]
//
// The runtime half of zcc: no LLVM/MLIR in this process. Everything is
// validated before anything runs; every error names what and where.
//
//===----------------------------------------------------------------------===//
#include "exec/Executor.h"
#include "plan/PlanLoader.h"
#include "train/Data.h"
#include "train/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace zrt;

namespace {

const char *kUsage =
    "usage: zrun eval PLAN --data NAME=FILE.npy ... [--batches K] [--output NAME=FILE.npy]\n"
    "                 [--print-memory]\n"
    "\n"
    "  eval    evaluates K global batches (default 1) and prints 'loss: <mean>'\n"
    "          --data NAME=FILE.npy   an array of samples for the plan input NAME\n"
    "          --output NAME=FILE.npy writes the graph output NAME of the first batch\n"
    "          --print-memory         prints the bytes allocated for the arenas\n"
    "\n"
    "  (train and export come with the training step)\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "zrun: error: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int fail(const Status &s) {
  std::fprintf(stderr, "zrun: error: %s\n", s.message().c_str());
  return 1;
}

bool splitAssign(const std::string &arg, std::string &name, std::string &value) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return false;
  name = arg.substr(0, eq);
  value = arg.substr(eq + 1);
  return true;
}

int evalCommand(int argc, char **argv) {
  std::string planPath;
  std::vector<std::pair<std::string, std::string>> data, outputs;
  int64_t batches = 1;
  bool printMemory = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](std::string &v) {
      if (i + 1 >= argc)
        return false;
      v = argv[++i];
      return true;
    };
    std::string v, name, path;
    if (a == "--data" || a == "--output") {
      if (!next(v) || !splitAssign(v, name, path))
        return usageError(a + " expects NAME=FILE.npy");
      (a == "--data" ? data : outputs).emplace_back(name, path);
    } else if (a == "--batches") {
      char *end = nullptr;
      if (!next(v) || (batches = std::strtoll(v.c_str(), &end, 10), *end) || batches < 1)
        return usageError("--batches expects a positive integer");
    } else if (a == "--print-memory") {
      printMemory = true;
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (planPath.empty()) {
      planPath = a;
    } else {
      return usageError("unexpected argument '" + a + "'");
    }
  }
  if (planPath.empty())
    return usageError("missing PLAN");

  plan::Plan plan;
  if (Status s = loadPlan(planPath, plan); !s)
    return fail(s);
  Executor executor(plan);
  const plan::Program *program = executor.program("eval");
  if (!program)
    return fail(errorf(planPath, ": the plan has no 'eval' program"));
  DataFeeder feeder;
  if (Status s = feeder.load(data, plan, *program); !s)
    return fail(s);
  int lossBuffer = -1;
  for (const plan::NamedBuffer &out : program->outputs())
    if (out.name() == "loss")
      lossBuffer = out.buffer();
  for (const auto &[name, path] : outputs) {
    bool found = false;
    for (const plan::NamedBuffer &out : program->outputs())
      found |= out.name() == name;
    if (!found)
      return fail(errorf("--output ", name, ": the plan has no output named '", name, "'"));
  }
  if (printMemory)
    std::printf("arena bytes: %lld\n", (long long)executor.allocatedBytes());

  double total = 0;
  for (int64_t k = 0; k < batches; ++k) {
    feeder.feed(k, executor, *program);
    if (Status s = executor.run(*program); !s)
      return fail(s);
    if (lossBuffer >= 0)
      total += *executor.buffer(lossBuffer).as<float>();
    if (k == 0)
      for (const auto &[name, path] : outputs)
        for (const plan::NamedBuffer &out : program->outputs())
          if (out.name() == name) {
            TensorRef t = executor.buffer(out.buffer());
            NpyArray array;
            array.dtype = t.dtype;
            array.shape = t.shape;
            array.data.assign(t.data, t.data + t.numel() * dtypeSize(t.dtype));
            std::string error;
            if (!writeNpy(path, array, error))
              return fail(Status::error("--output " + name + ": " + error));
          }
  }
  if (lossBuffer >= 0)
    std::printf("loss: %.9g\n", total / batches);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  try {
    if (command == "eval")
      return evalCommand(argc - 2, argv + 2);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "zrun: error: out of memory allocating the plan's arenas\n");
    return 1;
  }
  if (command == "train" || command == "export")
    return usageError("'" + command + "' is not available in this version yet");
  return usageError("unknown command '" + command + "'");
}
