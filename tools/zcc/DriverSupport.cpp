//===- DriverSupport.cpp - zcc's driver pieces outside main ---------------===//
#include "DriverSupport.h"

#include "zcc/Analysis/DeepSpeedEstimate.h"
#include "zero/ZeroOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;

namespace zcc {

/// Why |path| cannot be read as a model (empty: it can): a device such as
/// /dev/zero, a FIFO or a directory would be read without end or not at all.
std::string checkInputFile(const std::string &path) {
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return "cannot read the model: " + ec.message();
  if (st.type() == llvm::sys::fs::file_type::directory_file)
    return "is a directory; pass the .onnx file";
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return "not a regular file (a device, FIFO or socket); pass the .onnx file";
  return "";
}

/// Why |path| cannot be an output (empty: it can): it is one of |inputs|, a
/// directory, or a device or other special file (but /dev/null).
std::string checkOutput(const std::string &path, std::vector<std::string> inputs) {
  if (path == "-" || path == "/dev/null") // stdout; the usual sink
    return "";
  for (const std::string &in : inputs) {
    bool same = false;
    if (!in.empty() && !llvm::sys::fs::equivalent(in, path, same) && same)
      return "is an input of this compilation (" + in + "); write the output elsewhere";
  }
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st, /*Follow=*/false))
    return ""; // a new file
  if (st.type() == llvm::sys::fs::file_type::symlink_file)
    return "is a symbolic link; pass the file itself (zcc does not write through links)";
  if (st.type() == llvm::sys::fs::file_type::directory_file)
    return "is a directory; pass a file name";
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return "is a device or other special file, not a regular file";
  return "";
}

/// Splits "NAME=4x1024" into the name and dimensions.
LogicalResult parseInputShape(StringRef spec, std::string &name, SmallVectorImpl<int64_t> &dims) {
  auto [n, shape] = spec.rsplit('=');
  if (n.empty() || shape.empty())
    return failure();
  name = n.str();
  SmallVector<StringRef> parts;
  shape.split(parts, 'x');
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d <= 0)
      return failure();
    dims.push_back(d);
  }
  return success();
}

/// Renders a diagnostic location as "FILE: node 'NAME' (OP)" where known.
std::string describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    auto [node, op] = name.getName().strref().rsplit(':');
    std::string file = describeLocation(name.getChildLoc());
    std::string where = "node '" + node.str() + "'" + (op.empty() ? "" : " (" + op.str() + ")");
    return file.empty() ? where : file + ": " + where;
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0)
      return file.getFilename().str();
    return (file.getFilename().strref() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto s = describeLocation(l); !s.empty())
        return s;
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callsite.getCallee());
  return "";
}

/// zcc estimate: model-state memory per rank for ZeRO stages 0-3 and several
/// world sizes, from the parameter count alone (as DeepSpeed's
/// estimate_zero*_model_states_mem_needs), without compiling a plan.
int printEstimate(ModuleOp module, llvm::raw_ostream &out, bool mixedPrecision, bool json,
                  ArrayRef<int64_t> worldSizes) {
  int64_t psi = 0, frozen = 0;
  std::vector<std::pair<std::string, int64_t>> named;
  for (auto g : module.getOps<zcc::zero::GlobalOp>()) {
    if (!isa<FloatType>(g.getTensorType().getElementType()))
      continue;
    (g.getTrainable() ? psi : frozen) += g.getTensorType().getNumElements();
    if (g.getTrainable())
      named.push_back({g.getSymName().str(), g.getTensorType().getNumElements()});
  }
  const int64_t largest = zcc::largestLayerParams(named);
  std::string discarded;
  llvm::raw_string_ostream sink(discarded);
  llvm::raw_ostream &os = json ? sink : out;
  llvm::json::Array rows;
  SmallVector<int64_t> worlds(worldSizes.begin(), worldSizes.end());
  for (int64_t w : worlds)
    if (w < 1 || w > 1 << 20) {
      llvm::errs() << "zcc: error: --world-sizes: " << w << " is not a world size (1 or more)\n";
      return 2;
    }
  if (worlds.empty())
    worlds = {1, 2, 4, 8, 16, 64};
  auto source = zcc::zero::attrs(module).getSourceAttrHelper().getAttr(module);
  os << "zcc estimate: " << (source ? source.getValue() : "model") << ", Psi = " << psi
     << " trainable parameters (" << frozen << " frozen elements)\n";
  // GiB for real models, MiB below 1 GiB.
  bool gib = 16.0 * psi >= 1024.0 * 1024 * 1024;
  double unit = gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
  os << "model states per rank in " << (gib ? "GiB" : "MiB")
     << (mixedPrecision ? " (zcc: 16-bit working params and grads, float32 master shards and "
                          "AdamW moments, 2+2+12 bytes per parameter (docs/zero.md);\n"
                        : " (zcc: float32 params + grads + AdamW moments, 4+4+8 "
                          "bytes per parameter;\n")
     << "paper: mixed-precision Adam, 2+2+12; deepspeed: its estimate_zero2/zero3_model_states_"
        "mem_needs,\n4 Psi + 16 Psi/N for stages 1-2, 4 L + 18 Psi/N for stage 3 with L = "
     << largest
     << " parameters in the largest layer); activations need a compiled plan: zcc "
        "--emit=report\n";
  os << llvm::format("  %-7s %-6s", "stage", "");
  for (int64_t n : worlds)
    os << llvm::format(" %9s", ("N=" + std::to_string(n)).c_str());
  os << "\n";
  for (int stage = 0; stage <= 3; ++stage)
    for (int paper = 0; paper < 3; ++paper) {
      if (paper == 2 && stage == 0)
        continue; // DeepSpeed has no estimator for stage 0
      bool half = paper || mixedPrecision;
      double p = half ? 2 : 4, g = half ? 2 : 4, k = half ? 12 : 8;
      const char *name = paper == 2 ? "ds" : paper ? "paper" : "zcc";
      os << llvm::format("  %-7d %-6s", stage, name);
      llvm::json::Object bytesAt;
      for (int64_t n : worlds) {
        double bytes;
        if (paper == 2) {
          bytes = zcc::deepspeedEstimate(stage, (double)psi, (double)largest, n, false, false)
                      ->gpuBytes;
          os << llvm::format(" %9.3f", bytes / unit);
          bytesAt[std::to_string(n)] = bytes;
          continue;
        }
        switch (stage) {
        case 0:
          bytes = (p + g + k) * psi;
          break;
        case 1:
          bytes = (p + g) * psi + k * psi / n;
          break;
        case 2:
          bytes = p * psi + (g + k) * psi / n;
          break;
        default:
          bytes = (p + g + k) * psi / n;
          break;
        }
        os << llvm::format(" %9.3f", bytes / unit);
        bytesAt[std::to_string(n)] = bytes;
      }
      os << "\n";
      rows.push_back(llvm::json::Object{{"stage", stage},
                                        {"formula", paper == 2 ? "deepspeed"
                                                    : paper    ? "paper"
                                                               : "zcc"},
                                        {"bytes_per_rank_by_world_size", std::move(bytesAt)}});
    }
  if (json)
    out << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                      {"model", source ? source.getValue().str() : "model"},
                                      {"trainable_parameters", psi},
                                      {"frozen_elements", frozen},
                                      {"largest_layer_parameters", largest},
                                      {"model_states", std::move(rows)}}))
        << "\n";
  return 0;
}

/// The command line a plan records: argv[0] as "zcc" and without -o and its
/// value, so that where zcc lives and where the plan is written do not make
/// two compiles of one model differ.
std::vector<std::string> recordedCommand(int argc, char **argv) {
  std::vector<std::string> out = {"zcc"};
  for (int i = 1; i < argc; ++i) {
    StringRef a = argv[i];
    if (a == "-o" || a == "--o") {
      ++i;
      continue;
    }
    if (a.starts_with("-o=") || a.starts_with("--o="))
      continue;
    out.push_back(a.str());
  }
  return out;
}

/// Prints |context|'s diagnostics one a line: "zcc: error: FILE: node 'N'
/// (Op): message".
void printDiagnostics(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    llvm::raw_ostream &os = llvm::errs();
    os << "zcc: ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      llvm::WithColor(os, llvm::HighlightColor::Error) << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      llvm::WithColor(os, llvm::HighlightColor::Warning) << "warning: ";
      break;
    case DiagnosticSeverity::Remark:
      llvm::WithColor(os, llvm::HighlightColor::Remark) << "remark: ";
      break;
    case DiagnosticSeverity::Note:
      llvm::WithColor(os, llvm::HighlightColor::Note) << "note: ";
      break;
    }
    std::string where = describeLocation(diag.getLocation());
    if (!where.empty())
      os << where << ": ";
    os << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      os << "zcc: note: " << note << "\n";
    return success();
  });
}

} // namespace zcc
