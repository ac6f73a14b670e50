//===- DriverSupport.h - zcc's driver pieces outside main --------*- C++ -*-===//
//
// What zcc's main calls that does not depend on its flags: checks of the
// input and output paths, --input-shape's parsing, diagnostics printed with
// their locations as "FILE: node 'N' (Op)", the command line a plan records,
// and the table of `zcc estimate`.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TOOLS_DRIVERSUPPORT_H
#define ZCC_TOOLS_DRIVERSUPPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zcc {

/// Why |path| cannot be read as a model (empty: it can).
std::string checkInputFile(const std::string &path);
/// Why |path| cannot be an output (empty: it can): one of |inputs|, a
/// directory, a link, or a special file other than /dev/null.
std::string checkOutput(const std::string &path, std::vector<std::string> inputs);
/// Splits "NAME=4x1024" into the name and dimensions.
mlir::LogicalResult parseInputShape(llvm::StringRef spec, std::string &name,
                                    llvm::SmallVectorImpl<int64_t> &dims);
/// A diagnostic location as "FILE: node 'NAME' (OP)" where known.
std::string describeLocation(mlir::Location loc);
/// Prints |context|'s diagnostics one a line: "zcc: error: FILE: node 'N'
/// (Op): message".
void printDiagnostics(mlir::MLIRContext &context);
/// The command line a plan records (argv[0] as "zcc", without -o).
std::vector<std::string> recordedCommand(int argc, char **argv);
/// zcc estimate's model-state table for |worldSizes| (empty: 1, 2, 4, 8,
/// 16, 64), as text or |json|; returns the exit status.
int printEstimate(mlir::ModuleOp module, llvm::raw_ostream &out, bool mixedPrecision, bool json,
                  llvm::ArrayRef<int64_t> worldSizes);

} // namespace zcc

#endif // ZCC_TOOLS_DRIVERSUPPORT_H
