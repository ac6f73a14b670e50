//===- KernelTable.cpp - the CPU kernels by id ----------------------------===//
//
// One entry per line of kernels/Kernels.def, in its order, so that a kernel
// id indexes the table. Every kernel needs a CPU implementation (the CPU is
// the reference the other backends are checked against): one missing is an
// undefined check<Id> or run<Id> at link time.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

using namespace zrt;

namespace {
const KernelInfo kCpuKernels[] = {
#define ZRT_KERNEL(Id, Name) {Name, cpu::check##Id, cpu::run##Id},
#include "kernels/Kernels.def"
};
static_assert(sizeof(kCpuKernels) / sizeof(kCpuKernels[0]) == kNumKernels,
              "one CPU kernel per entry of Kernels.def");
} // namespace

const KernelInfo &zrt::cpuKernel(KernelId id) { return kCpuKernels[(size_t)id]; }
