//===- Profile.h - where a step's time goes ----------------------*- C++ -*-===//
//
// zrun train --profile: an executor's instruction times (ExecutorBase::
// Profile) summed by kernel kind and ranked by instruction, with the
// communication the compute stream waited for, per optimizer step.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_PROFILE_H
#define ZRT_EXEC_PROFILE_H

#include "exec/Interpreter.h"

#include <cstdint>
#include <string>

namespace zrt {

/// An instruction as --profile and --trace name it: |what| its kind (the
/// kernel, the collective as zcc prints it, "copy", "wait"), |where| its ONNX
/// node and operand shapes ("node [4x8] -> [4x8]").
void describeInstruction(const plan::Plan &plan, const plan::Instruction &inst, std::string &what,
                         std::string &where);

/// Prints |profile| of |plan| (rank 0's, over |steps| steps) to stdout.
void printProfile(const plan::Plan &plan, const ExecutorBase::Profile &profile, int64_t steps);

} // namespace zrt

#endif // ZRT_EXEC_PROFILE_H
