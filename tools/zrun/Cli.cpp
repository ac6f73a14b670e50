//===- Cli.cpp - zrun's command-line pieces the commands share ------------===//
#include "Cli.h"

#include "support/ByteSize.h"

#include <cstdio>
#include <filesystem>

#include <unistd.h>

using namespace zrt;

namespace zrun {

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

CLI::Validator integer(int64_t min, std::string what, int64_t max) {
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

//===--- the options every command takes ----------------------------------===//

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

} // namespace zrun
